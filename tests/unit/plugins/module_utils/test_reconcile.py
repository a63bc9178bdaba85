# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The reconcile engine against a simulated kernel: order, check mode, verify, restore."""

import errno

import pytest

from sim.kernel import SimKernel

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFileError
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import ManagedFile, stamped, is_managed
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import (
    KernelFileSetting, Reconciler, ReconcileError, Setting, fail_module,
)


def int_file(sim, path, initial, reject=None, normalise=None):
    """A single-integer pseudo-file; ``reject(v)`` -> errno or None; ``normalise`` mimics clamping."""
    sim.state[path] = str(initial)

    def handler(line):
        value = int(line.strip())
        if reject and reject(value):
            raise OSError(reject(value), "rejected")
        sim.state[path] = str(normalise(value) if normalise else value)
    sim.handlers[path] = handler


def int_setting(key, path, desired, order=None, validate=None):
    return KernelFileSetting(key, path, desired, parse=lambda t: int(t.strip()),
                             format=lambda v, cur: [str(v)], order=order, validate=validate)


@pytest.fixture
def sim(tmp_path):
    return SimKernel(str(tmp_path))


def test_check_mode_plans_and_writes_nothing(sim):
    int_file(sim, "/sys/a", 1)
    int_file(sim, "/sys/b", 2)
    result = Reconciler(sim, check_mode=True).run([int_setting("a", "/sys/a", 5), int_setting("b", "/sys/b", 2)])
    assert sim.writes == []
    assert result["changed"] is True
    assert result["diff"] == {"before": {"a": 1}, "after": {"a": 5}}
    assert result["values"] == {"a": 1, "b": 2}


def test_apply_in_kernel_order_then_idempotent(sim):
    for p in ("/sys/model", "/sys/qos", "/sys/weight"):
        int_file(sim, p, 0)
    settings = [int_setting("weight", "/sys/weight", 3, order=30),
                int_setting("qos", "/sys/qos", 2, order=20),
                int_setting("model", "/sys/model", 1, order=10)]
    result = Reconciler(sim).run(settings)
    assert [p for p, _v in sim.writes] == ["/sys/model", "/sys/qos", "/sys/weight"]
    assert result["changed"] and result["values"] == {"weight": 3, "qos": 2, "model": 1}
    sim.writes[:] = []
    again = Reconciler(sim).run(settings)
    assert again["changed"] is False and sim.writes == [] and again["diff"] == {"before": {}, "after": {}}


def test_kernel_rejection_mid_plan_restores_earlier_writes(sim):
    int_file(sim, "/sys/first", 10)
    int_file(sim, "/sys/second", 20, reject=lambda v: errno.EINVAL if v > 100 else None)
    int_file(sim, "/sys/third", 30)
    settings = [int_setting("first", "/sys/first", 11), int_setting("second", "/sys/second", 999),
                int_setting("third", "/sys/third", 33)]
    with pytest.raises(ReconcileError) as exc:
        Reconciler(sim).run(settings)
    err = exc.value
    assert sim.state == {"/sys/first": "10", "/sys/second": "20", "/sys/third": "30"}
    assert "/sys/second" in err.msg and "'999'" in err.msg and "EINVAL" in err.msg
    assert err.failed == "second" and set(err.restored) == {"first", "second"}
    assert err.kernel_error["errno"] == "EINVAL"
    # The third setting was never attempted.
    assert ("/sys/third", "33") not in sim.writes


def test_readback_mismatch_restores_and_names_values(sim):
    int_file(sim, "/sys/nr_requests", 64, normalise=lambda v: max(v, 4))
    int_file(sim, "/sys/other", 1)
    settings = [int_setting("other", "/sys/other", 2), int_setting("nr", "/sys/nr_requests", 1)]
    with pytest.raises(ReconcileError) as exc:
        Reconciler(sim).run(settings)
    assert "holds 4" in exc.value.msg and "writing 1" in exc.value.msg
    assert sim.state == {"/sys/nr_requests": "64", "/sys/other": "1"}


def test_validation_collects_every_problem_before_any_write(sim):
    int_file(sim, "/sys/a", 1)
    int_file(sim, "/sys/b", 1)

    def positive(desired, current):
        return [] if desired > 0 else ["value must be positive, got %d" % desired]
    settings = [int_setting("a", "/sys/a", -1, validate=positive), int_setting("b", "/sys/b", 0, validate=positive),
                int_setting("c", "/sys/missing", 1)]
    with pytest.raises(ReconcileError) as exc:
        Reconciler(sim).run(settings, errors=["caller-side problem"])
    assert sim.writes == []
    assert len(exc.value.errors) == 4
    assert "caller-side problem" in exc.value.errors
    assert any("/sys/missing" in e and "ENOENT" in e for e in exc.value.errors)
    assert exc.value.msg.startswith("Invalid request (nothing was changed)")


def test_duplicate_keys_refused(sim):
    int_file(sim, "/sys/a", 1)
    with pytest.raises(ReconcileError, match="twice: a"):
        Reconciler(sim).run([int_setting("a", "/sys/a", 2), int_setting("a", "/sys/a", 3)])
    assert sim.writes == []


def test_restore_failure_is_reported(sim):
    int_file(sim, "/sys/a", 1)
    int_file(sim, "/sys/b", 1, reject=lambda v: errno.EBUSY)
    state = {"calls": 0}
    original = sim.handlers["/sys/a"]

    def flaky(line):  # accepts the change, refuses the restore
        state["calls"] += 1
        if state["calls"] > 1:
            raise OSError(errno.EIO, "io error")
        original(line)
    sim.handlers["/sys/a"] = flaky
    with pytest.raises(ReconcileError) as exc:
        Reconciler(sim).run([int_setting("a", "/sys/a", 2), int_setting("b", "/sys/b", 2)])
    assert "COULD NOT RESTORE" in exc.value.msg and exc.value.restore_errors
    assert exc.value.details()["restore_errors"]


def test_setting_base_is_abstract(sim):
    s = Setting("k", 1)
    with pytest.raises(NotImplementedError):
        s.read(sim)
    with pytest.raises(NotImplementedError):
        s.write(sim, 1, None)
    assert s.validate(0) == [] and s.report(3) == 3


def test_managed_file_create_idempotent_and_remove(sim):
    content = stamped("vm.swappiness = 10\n", "aiinfra.io_isolation.sysctl")
    path = "/etc/sysctl.d/90-io-isolation.conf"
    result = Reconciler(sim).run([ManagedFile(path, content)])
    assert result["changed"] and open(sim.path(path)).read() == content
    assert is_managed(content)
    assert Reconciler(sim).run([ManagedFile(path, content)])["changed"] is False
    removed = Reconciler(sim).run([ManagedFile(path, None)])
    assert removed["changed"] and not sim.exists(path)


def test_managed_file_refuses_foreign_file_unless_adopted(sim, tmp_path):
    path = "/etc/sysctl.d/90-io-isolation.conf"
    (tmp_path / "etc" / "sysctl.d").mkdir(parents=True)
    (tmp_path / "etc" / "sysctl.d" / "90-io-isolation.conf").write_text("vm.swappiness = 1\n")
    new = stamped("vm.swappiness = 10", "test")
    with pytest.raises(ReconcileError, match="not managed by aiinfra.io_isolation"):
        Reconciler(sim).run([ManagedFile(path, new)])
    assert open(sim.path(path)).read() == "vm.swappiness = 1\n"
    Reconciler(sim).run([ManagedFile(path, new, adopt=True)])
    assert open(sim.path(path)).read() == new


def test_managed_file_restored_when_a_later_kernel_write_fails(sim, tmp_path):
    path = "/etc/udev/rules.d/90-x.rules"
    int_file(sim, "/sys/late", 1, reject=lambda v: errno.EINVAL)
    settings = [ManagedFile(path, stamped("X\n", "t"), order=0), int_setting("late", "/sys/late", 2, order=5)]
    with pytest.raises(ReconcileError) as exc:
        Reconciler(sim).run(settings)
    assert not sim.exists(path), "a file this call created must be removed again"
    assert path in exc.value.restored


class _Module(object):
    def __init__(self):
        self.failed = None

    def fail_json(self, **kw):
        self.failed = kw
        raise SystemExit(1)


@pytest.mark.parametrize("err, key", [
    (ReconcileError("bad", errors=["x"]), "errors"),
    (KernelFileError("/sys/x", "1", errno.EINVAL), "kernel_error"),
    (ValueError("plain"), None),
])
def test_fail_module_never_tracebacks(err, key):
    m = _Module()
    with pytest.raises(SystemExit):
        fail_module(m, err)
    assert m.failed["msg"]
    if key:
        assert key in m.failed


class _Owing(Setting):
    """A setting whose write leaves work owed until the engine's settle step (as the systemd units' reload)."""

    def __init__(self, key, log):
        super(_Owing, self).__init__(key, "new")
        self.log = log
        self.value = "old"

    def read(self, fs):
        self.log.append(("read", self.key))
        return self.value

    def write(self, fs, value, current):
        self.log.append(("write", self.key))
        self.value = value

    def settle(self, fs):
        self.log.append(("settle", self.key))


def test_settle_runs_once_per_written_setting_after_every_write_and_before_the_read_back(sim):
    log = []
    settings = [_Owing("a", log), _Owing("b", log)]
    result = Reconciler(sim).run(settings)
    assert result["changed"]
    after_plan = log[2:]       # the plan's two reads come first
    assert after_plan[:4] == [("write", "a"), ("write", "b"), ("settle", "a"), ("settle", "b")], log
    assert after_plan[4:] == [("read", "a"), ("read", "b")], log


def test_a_labeled_setting_passes_every_setting_method_to_the_one_it_wraps():
    """host_profile wraps each section's settings (registry.Labeled): a Setting method it did not pass on would
    silently fall back to the base class's default for every setting run through host_profile."""
    from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns.registry import Labeled
    methods = set(name for name, value in vars(Setting).items() if callable(value) and not name.startswith("_"))
    assert methods <= set(vars(Labeled)), sorted(methods - set(vars(Labeled)))
