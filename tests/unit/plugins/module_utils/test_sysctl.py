# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""_sysctl: names, values, the vm.dirty_* pairs, debugfs scheduler tunables and the owned files.

Every end-to-end test runs the real Reconciler against a fake /proc/sys + /sys/kernel/debug tree
under tmp_path. The pseudo-files are SimKernel handlers: each write is parsed the way the kernel
does it (page-writeback.c rules for the dirty pairs: see ``SysctlHost``), not stored as text.
"""

import errno
import os

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import sysctl as sc
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import is_managed, stamped
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import Reconciler, ReconcileError
from sim.sysctl import PAGE, SCHED_61, SYSCTLS, U32, SysctlHost


def owned(body):
    return stamped(body, sc.OWNER)


def refusing(err):
    """A pseudo-file handler that refuses every write with ``err``."""
    def handler(line):
        raise OSError(err, "refused %r" % line)
    return handler


@pytest.fixture
def host(tmp_path):
    return SysctlHost(tmp_path)


# --------------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("spelling, comps", [
    ("vm.dirty_ratio", ["vm", "dirty_ratio"]),
    ("vm/dirty_ratio", ["vm", "dirty_ratio"]),
    ("/proc/sys/vm/dirty_ratio", ["vm", "dirty_ratio"]),
    ("  vm.page-cluster ", ["vm", "page-cluster"]),
    ("net.ipv4.conf.eth0/1.rp_filter", ["net", "ipv4", "conf", "eth0.1", "rp_filter"]),
    ("net/ipv4/conf/eth0.1/rp_filter", ["net", "ipv4", "conf", "eth0.1", "rp_filter"]),
    ("net.ipv4.conf.eth0.1.rp_filter", ["net", "ipv4", "conf", "eth0", "1", "rp_filter"]),
    ("debugfs.sched.base_slice_ns", ["debugfs", "sched", "base_slice_ns"]),
    ("debugfs/sched/numa_balancing/scan_delay_ms", ["debugfs", "sched", "numa_balancing", "scan_delay_ms"]),
])
def test_names_follow_sysctl_d_normalisation(spelling, comps):
    assert sc.split_name(spelling) == comps
    assert sc.canonical(spelling) == sc.dotted(comps)
    assert sc.split_name(sc.dotted(comps)) == comps


def test_canonical_and_paths():
    assert sc.canonical("net/ipv4/conf/eth0.1/rp_filter") == "net.ipv4.conf.eth0/1.rp_filter"
    assert sc.proc_path(sc.split_name("net.ipv4.conf.eth0/1.rp_filter")) == "/proc/sys/net/ipv4/conf/eth0.1/rp_filter"
    assert sc.debugfs_path(sc.split_name("debugfs.sched.base_slice_ns")) == "/sys/kernel/debug/sched/base_slice_ns"
    assert sc.debugfs_name("/sys/kernel/debug/sched/numa_balancing/scan_delay_ms") == \
        "debugfs.sched.numa_balancing.scan_delay_ms"


@pytest.mark.parametrize("bad", ["", "  ", "vm..dirty_ratio", "vm.dirty ratio", "vm.dirty_ratio=5", "-vm.swappiness",
                                 "net.ipv4.conf.*.rp_filter", "vm.swappiness\n", "vm/../kernel/x", 5, None])
def test_bad_names_are_refused(bad):
    with pytest.raises(sc.SysctlNameError):
        sc.split_name(bad)


_COMP = st.text(alphabet="abcxyz019_-.", min_size=1, max_size=8).filter(lambda c: c not in (".", ".."))
# The first separator decides the form (sysctl_normalize), so a first component has no dot; no
# top-level /proc/sys directory has one.
_COMPS = st.lists(_COMP, min_size=1, max_size=6).filter(lambda cs: not cs[0].startswith("-") and "." not in cs[0])


@hsettings(deadline=None, max_examples=150)
@given(_COMPS)
def test_dotted_and_slash_forms_round_trip(comps):
    assert sc.split_name(sc.dotted(comps)) == comps
    assert sc.split_name("/".join(comps)) == comps
    assert sc.split_name(sc.proc_path(comps)) == comps


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, tokens", [
    (10, "10"), (-1, "-1"), ("4096\t87380  6291456", "4096 87380 6291456"),
    ([4096, "87380", 6291456], "4096 87380 6291456"), (" fq ", "fq"),
])
def test_values_become_tokens(value, tokens):
    assert sc.value_tokens("x", value) == (tokens, None)


@pytest.mark.parametrize("value, words", [
    (True, "boolean"), (0.5, "floating-point"), ("1\n2", "newline"), (["1", "2\r"], "newline"), ("a\x00", "control"),
    ("  ", "empty"), ([], "not a value"), ({"a": 1}, "not a value"), ([True], "not a value"), (None, "not a value"),
])
def test_bad_values_are_refused(value, words):
    tokens, problem = sc.value_tokens("vm.swappiness", value)
    assert tokens is None and words in problem and problem.startswith("vm.swappiness")


@pytest.mark.parametrize("desired, current, words", [
    ("010", "60", "'010' has a leading zero (read as octal or refused); write 10"),
    ("0x10", "60", "'0x10' is hexadecimal 16"),
    ("4096 087380 6291456", "4096\t131072\t6291456", "write 87380"),
])
def test_base0_integers_are_refused(desired, current, words):
    problems = sc.base0_problems("vm.swappiness")(desired, sc.codecs.tokens(current))
    assert len(problems) == 1 and words in problems[0] and "base 0" in problems[0]


def test_base0_leaves_text_sysctls_and_zero_alone():
    check = sc.base0_problems("kernel.hostname")
    assert check("007", "lab") == [] and check("0", "60") == [] and check("10", "60") == []
    assert check(None, "60") == [] and check("010", None) == []


@pytest.mark.parametrize("name, value, words", [
    ("vm.dirty_bytes", "0", "set vm.dirty_ratio instead"),
    ("vm.dirty_background_bytes", "0", "set vm.dirty_background_ratio instead"),
    ("vm.dirty_bytes", "4096", "below two pages (8192 bytes)"),
    ("vm.dirty_bytes", str((U32 + 1) * PAGE), "ERANGE"),
    ("vm.dirty_ratio", "101", "out of range 0..100"),
    ("vm.dirty_ratio", "1e3", "not a whole number"),
    ("vm.dirty_bytes", "0100", "not a whole number"),
])
def test_dirty_pair_values(name, value, words):
    problems = sc.pair_value_problems(name, value, PAGE)
    assert len(problems) == 1 and words in problems[0]


def test_dirty_pair_values_accepted():
    assert sc.pair_value_problems("vm.dirty_bytes", "8192", PAGE) == []
    assert sc.pair_value_problems("vm.dirty_background_bytes", "1", PAGE) == []
    assert sc.pair_value_problems("vm.dirty_ratio", "0", PAGE) == []
    assert sc.pair_value_problems("vm.dirty_background_ratio", "100", PAGE) == []


# --------------------------------------------------------------------------------------------
# Owned files
# --------------------------------------------------------------------------------------------

_TOKEN = st.text(alphabet="abz019_-./:,=#", min_size=1, max_size=6)
_ENTRIES = st.dictionaries(_COMPS.map(sc.dotted),
                           st.lists(_TOKEN, min_size=1, max_size=4).map(" ".join), max_size=8)


@hsettings(deadline=None, max_examples=150)
@given(_ENTRIES)
def test_sysctl_conf_round_trip(entries):
    text = sc.render_sysctl_conf(entries)
    assert is_managed(text)
    parsed, ignored = sc.parse_sysctl_conf(text)
    assert list(parsed.items()) == list(entries.items()) and ignored == []


@hsettings(deadline=None, max_examples=100)
@given(st.dictionaries(st.lists(st.text(alphabet="abz_019", min_size=1, max_size=8), min_size=1, max_size=2)
                       .map(lambda cs: sc.dotted(["debugfs", "sched"] + cs)),
                       st.integers(0, U32).map(str), max_size=6))
def test_tmpfiles_conf_round_trip(entries):
    parsed, ignored = sc.parse_tmpfiles_conf(sc.render_tmpfiles_conf(entries))
    assert list(parsed.items()) == list(entries.items()) and ignored == []


def test_sysctl_conf_parser_follows_systemd():
    text = ("# comment\n; also a comment\n\n  vm.swappiness=10  \n-net/ipv4/conf/eth0.1/rp_filter = 2\n"
            "vm.dirty_ratio = 20\nnet.ipv4.tcp_rmem =\t4096  87380 6291456\nnot an assignment\n = 5\n"
            "vm.swappiness = 30\n")
    entries, ignored = sc.parse_sysctl_conf(text)
    assert list(entries.items()) == [("net.ipv4.conf.eth0/1.rp_filter", "2"), ("vm.dirty_ratio", "20"),
                                     ("net.ipv4.tcp_rmem", "4096 87380 6291456"), ("vm.swappiness", "30")]
    assert ignored == ["not an assignment", " = 5"]


def test_file_formats_are_exact():
    assert sc.render_sysctl_conf({"vm.swappiness": "10", "net.ipv4.conf.eth0/1.rp_filter": "2"}) == owned(
        "vm.swappiness = 10\nnet.ipv4.conf.eth0/1.rp_filter = 2\n")
    assert sc.render_tmpfiles_conf({"debugfs.sched.base_slice_ns": "3000000"}) == owned(
        "w /sys/kernel/debug/sched/base_slice_ns - - - - 3000000\n")
    entries, ignored = sc.parse_tmpfiles_conf(owned("w /sys/kernel/debug/sched/base_slice_ns - - - - 3000000\n"
                                                    "d /run/x 0755 root root -\n"
                                                    "w /sys/block/sda/queue/nr_requests - - - - 64\n"))
    assert entries == {"debugfs.sched.base_slice_ns": "3000000"} and len(ignored) == 2


# --------------------------------------------------------------------------------------------
# End to end: sysctls
# --------------------------------------------------------------------------------------------

def test_set_applies_only_differences_persists_one_file_and_is_idempotent(host):
    result, warnings, info = host.run({"vm.swappiness": 10, "vm/dirty_expire_centisecs": "3000",
                                       "net.ipv4.tcp_rmem": "4096 87380 6291456"})
    assert host.sim.writes == [("/proc/sys/vm/swappiness", "10"), ("/proc/sys/net/ipv4/tcp_rmem", "4096 87380 6291456")]
    assert host.get("/proc/sys/vm/swappiness") == "10"
    assert host.file(sc.SYSCTL_CONF) == owned(
        "vm.swappiness = 10\nvm.dirty_expire_centisecs = 3000\nnet.ipv4.tcp_rmem = 4096 87380 6291456\n")
    assert result["changed"] is True
    assert result["diff"]["before"]["vm.swappiness"] == "60"
    assert result["diff"]["after"]["net.ipv4.tcp_rmem"] == "4096 87380 6291456"
    assert result["diff"]["before"][sc.SYSCTL_CONF] is None
    assert "vm.dirty_expire_centisecs" not in result["diff"]["before"]
    assert result["values"]["vm.dirty_expire_centisecs"] == "3000"
    assert info["paths"]["vm.dirty_expire_centisecs"] == "/proc/sys/vm/dirty_expire_centisecs"
    assert info["persisted"] == {sc.SYSCTL_CONF: {"vm.swappiness": "10", "vm.dirty_expire_centisecs": "3000",
                                                  "net.ipv4.tcp_rmem": "4096 87380 6291456"}}
    assert warnings == [] and info["debug_interfaces"] == [] and info["mapped"] == {}
    host.sim.writes[:] = []
    again, _w, _i = host.run({"vm.swappiness": "10", "vm.dirty_expire_centisecs": 3000,
                              "net.ipv4.tcp_rmem": [4096, 87380, 6291456]})
    assert again["changed"] is False and host.sim.writes == []
    assert again["diff"] == {"before": {}, "after": {}}


def test_values_compare_token_wise(host):
    # the kernel prints tcp_rmem with tabs; the request has runs of spaces: nothing to do live
    result, _w, _i = host.run({"net.ipv4.tcp_rmem": "4096  131072\t 6291456"}, persist=False)
    assert result["changed"] is False and host.sim.writes == []
    assert result["values"] == {"net.ipv4.tcp_rmem": "4096 131072 6291456"}
    assert host.file(sc.SYSCTL_CONF) is None


def test_check_mode_plans_and_writes_nothing(host):
    result, _w, _i = host.run({"vm.swappiness": 10}, check_mode=True)
    assert result["changed"] is True and host.sim.writes == []
    assert result["diff"]["before"]["vm.swappiness"] == "60" and result["diff"]["after"]["vm.swappiness"] == "10"
    assert result["diff"]["after"][sc.SYSCTL_CONF] == owned("vm.swappiness = 10\n")
    assert host.file(sc.SYSCTL_CONF) is None and host.get("/proc/sys/vm/swappiness") == "60"


def test_merges_into_the_owned_file(host):
    host.real(sc.SYSCTL_CONF, owned("vm.swappiness = 10\nvm.page-cluster = 0\n"))
    host.run({"vm.page-cluster": 0, "net.core.default_qdisc": "fq"})
    assert host.file(sc.SYSCTL_CONF) == owned("vm.swappiness = 10\nvm.page-cluster = 0\nnet.core.default_qdisc = fq\n")
    assert host.get("/proc/sys/net/core/default_qdisc") == "fq"


def test_interface_names_with_dots(host):
    err = host.refused({"net.ipv4.conf.eth0.1.rp_filter": 2})
    assert "net.ipv4.conf.eth0/1.rp_filter" in err.msg and "net/ipv4/conf/eth0.1/rp_filter" in err.msg
    assert "/proc/sys/net/ipv4/conf/eth0/1/rp_filter does not exist" in err.msg
    result, _w, info = host.run({"net/ipv4/conf/eth0.1/rp_filter": 2})
    assert host.sim.writes == [("/proc/sys/net/ipv4/conf/eth0.1/rp_filter", "2")]
    assert host.get("/proc/sys/net/ipv4/conf/eth0/rp_filter") == "0"
    assert result["values"]["net.ipv4.conf.eth0/1.rp_filter"] == "2"
    assert info["paths"]["net.ipv4.conf.eth0/1.rp_filter"] == "/proc/sys/net/ipv4/conf/eth0.1/rp_filter"
    assert host.file(sc.SYSCTL_CONF) == owned("net.ipv4.conf.eth0/1.rp_filter = 2\n")
    again, _w, _i = host.run({"net.ipv4.conf.eth0/1.rp_filter": "2"})
    assert again["changed"] is False


def test_unknown_key_names_close_matches_and_writes_nothing(host):
    err = host.refused({"vm.swappiness": 10, "vm.dirty_ration": 10})
    assert err.errors == ["vm.dirty_ration: unknown sysctl (/proc/sys/vm/dirty_ration does not exist on this host); "
                          "did you mean vm.dirty_ratio or vm.dirty_background_ratio or vm.dirty_bytes?"]


def test_unknown_key_without_close_match(host):
    err = host.refused({"qqq.zzz": 1})
    assert "unknown sysctl" in err.msg and "sysctl -a" in err.msg


def test_sysctl_names_walks_the_tree(host):
    names = sc.sysctl_names(host.sim)
    assert "net.ipv4.conf.eth0/1.rp_filter" in names and "vm.dirty_ratio" in names and len(names) == len(SYSCTLS)
    assert sc.regroupings(host.sim, ["net", "ipv4", "conf", "eth0", "1", "rp_filter"]) == [
        ["net", "ipv4", "conf", "eth0.1", "rp_filter"]]


@pytest.mark.parametrize("request_, words", [
    ({"vm.swappiness": "1\n2"}, "contains a newline"),
    ({"vm.swappiness": True}, "boolean"),
    ({"vm.swappiness": None}, "no value"),
    ({"vm.swappiness": "010"}, "leading zero"),
    ({"vm": 1}, "is a directory of sysctls"),
    ({"vm.drop_caches": 3}, "action trigger"),
    ({"kernel.osrelease": "x"}, "read-only"),
    ({"vm.swappiness": 10, "vm/swappiness": 10}, "name the same setting"),
    ({"vm.swappiness": {"state": "absent", "value": 1}}, "takes no value"),
    ({"vm.swappiness": {"value": 1, "state": "gone"}}, "expected {value"),
    ({"vm swappiness": 1}, "not a sysctl name"),
])
def test_bad_requests_fail_before_any_write(tmp_path, request_, words):
    host = SysctlHost(tmp_path, extra={"/proc/sys/vm/drop_caches": "0"})
    host.pseudo("/proc/sys/kernel/osrelease", "6.12", mode=0o444)
    err = host.refused(dict(request_, **{"vm.page-cluster": 0}))
    assert words in err.msg


def test_sysctls_must_be_a_mapping(host):
    for bad in (None, {}, ["vm.swappiness"]):
        out, errors, _w, _i = sc.settings(host.sim, {"sysctls": bad}, release=host.release, page_size=PAGE)
        assert out == [] and errors == ["sysctls must be a non-empty mapping of sysctl name -> value (or {value, "
                                        "state})"]


def test_text_sysctl_takes_leading_zero(host):
    host.run({"kernel.hostname": "007"})
    assert host.get("/proc/sys/kernel/hostname") == "007"


def test_kernel_refusal_restores_earlier_writes(host):
    host.pseudo("/proc/sys/vm/swappiness", "60", handler=refusing(errno.EINVAL))
    with pytest.raises(ReconcileError) as exc:
        host.run({"vm.page-cluster": 0, "vm.swappiness": 500})
    assert host.get("/proc/sys/vm/page-cluster") == "3"
    assert "EINVAL" in exc.value.msg and "vm.page-cluster" in exc.value.restored
    assert host.file(sc.SYSCTL_CONF) is None


# --------------------------------------------------------------------------------------------
# state: absent, adopt, persist
# --------------------------------------------------------------------------------------------

def test_absent_removes_from_the_file_and_reports_the_live_value(host):
    host.run({"vm.swappiness": 10, "vm.page-cluster": 0})
    host.sim.writes[:] = []
    result, _w, info = host.run({"vm.swappiness": {"state": "absent"}})
    assert host.sim.writes == [] and host.get("/proc/sys/vm/swappiness") == "10"
    assert host.file(sc.SYSCTL_CONF) == owned("vm.page-cluster = 0\n")
    assert result["values"]["vm.swappiness"] == "10" and info["absent"] == ["vm.swappiness"]
    assert result["changed"] is True and list(result["diff"]["before"]) == [sc.SYSCTL_CONF]
    result, _w, _i = host.run({"vm.page-cluster": {"state": "absent"}, "gone.key": {"state": "absent"}})
    assert host.file(sc.SYSCTL_CONF) is None, "an owned file with no entries is removed"
    assert result["values"] == {"vm.page-cluster": "0", "gone.key": None, sc.SYSCTL_CONF: None}
    again, _w, _i = host.run({"vm.page-cluster": {"state": "absent"}})
    assert again["changed"] is False


def test_foreign_file_is_refused_unless_adopted(host):
    host.real(sc.SYSCTL_CONF, "vm.swappiness = 1\nbogus line\n")
    err = host.refused({"vm.page-cluster": 0})
    assert "not managed by aiinfra.io_isolation" in err.msg
    _r, warnings, _i = host.run({"vm.page-cluster": 0}, adopt=True)
    assert host.file(sc.SYSCTL_CONF) == owned("vm.swappiness = 1\nvm.page-cluster = 0\n")
    assert any("dropping lines this module does not manage: bogus line" in w for w in warnings)


def test_persist_false_touches_no_file(host):
    out, errors, _w, info = sc.settings(host.sim, {"sysctls": {"vm.swappiness": 10}, "persist": False},
                                        release=host.release, page_size=PAGE)
    assert errors == [] and [s.key for s in out] == ["vm.swappiness"] and info["persisted"] == {}
    Reconciler(host.sim).run(out, errors)
    assert host.file(sc.SYSCTL_CONF) is None and host.get("/proc/sys/vm/swappiness") == "10"


def test_boot_overrides_warn_about_later_files(host):
    host.real("/etc/sysctl.conf", "vm.swappiness = 30\nvm.dirty_ratio = 20\n")
    host.real("/etc/sysctl.d/10-early.conf", "vm.swappiness = 5\n")
    host.real("/usr/lib/sysctl.d/95-net.conf", "net.ipv4.conf.*.rp_filter = 1\n")
    os.symlink("../sysctl.conf", os.path.join(host.root, "etc/sysctl.d/99-sysctl.conf"))
    _r, warnings, _i = host.run({"vm.swappiness": 10, "vm.dirty_bytes": 8 * 2 ** 20,
                                 "net/ipv4/conf/eth0.1/rp_filter": 2})
    assert len(warnings) == 3, warnings
    assert warnings[0].startswith("/usr/lib/sysctl.d/95-net.conf sets net.ipv4.conf.*.rp_filter = 1 and is applied "
                                  "after %s" % sc.SYSCTL_CONF)
    assert warnings[1].startswith("/etc/sysctl.d/99-sysctl.conf sets vm.swappiness = 30")
    assert warnings[2].startswith("/etc/sysctl.d/99-sysctl.conf sets vm.dirty_ratio = 20 after")
    assert "the kernel then sets vm.dirty_bytes to 0, so the persisted vm.dirty_bytes will not survive" in warnings[2]
    assert not any("10-early" in w for w in warnings)


# --------------------------------------------------------------------------------------------
# vm.dirty_* exclusive pairs
# --------------------------------------------------------------------------------------------

def test_dirty_bytes_writes_alone_compares_the_pair_and_persists_only_itself(host):
    host.real(sc.SYSCTL_CONF, owned("vm.dirty_ratio = 20\nvm.swappiness = 10\n"))
    result, _w, info = host.run({"vm.dirty_bytes": 268435456})
    assert [w for w in host.sim.writes if w[0].startswith("/proc")] == [("/proc/sys/vm/dirty_bytes", "268435456")]
    assert host.get("/proc/sys/vm/dirty_ratio") == "0"
    assert result["diff"]["before"]["vm.dirty_bytes"] == "0" and result["diff"]["before"]["vm.dirty_ratio"] == "20"
    assert result["diff"]["after"]["vm.dirty_bytes"] == "268435456" and result["diff"]["after"]["vm.dirty_ratio"] == "0"
    assert result["values"]["vm.dirty_bytes"] == "268435456" and result["values"]["vm.dirty_ratio"] == "0"
    assert host.file(sc.SYSCTL_CONF) == owned("vm.swappiness = 10\nvm.dirty_bytes = 268435456\n")
    assert info["exclusive"] == {"vm.dirty_bytes": "vm.dirty_ratio"}
    host.sim.writes[:] = []
    again, _w, _i = host.run({"vm.dirty_bytes": "268435456"})
    assert again["changed"] is False and host.sim.writes == []
    # and back to the ratio: only dirty_ratio is written, and the kernel clears dirty_bytes
    host.run({"vm.dirty_ratio": 15})
    assert host.sim.writes[0] == ("/proc/sys/vm/dirty_ratio", "15") and host.get("/proc/sys/vm/dirty_bytes") == "0"
    assert host.file(sc.SYSCTL_CONF) == owned("vm.swappiness = 10\nvm.dirty_ratio = 15\n")


def test_unflattened_pair_report(host):
    out, errors, _w, _i = sc.settings(host.sim, {"sysctls": {"vm.dirty_background_bytes": 1048576}, "persist": False},
                                      release=host.release, page_size=PAGE)
    result = Reconciler(host.sim).run(out, errors)
    assert result["values"] == {"vm.dirty_background_bytes": {"vm.dirty_background_bytes": "1048576",
                                                              "vm.dirty_background_ratio": "0"}}


def test_both_of_a_pair_non_zero_is_refused(host):
    err = host.refused({"vm.dirty_bytes": 268435456, "vm.dirty_ratio": 10})
    assert err.errors == ["vm.dirty_bytes and vm.dirty_ratio are exclusive (writing one makes the kernel set the other "
                          "to 0): ask for one of them"]


def test_zero_next_to_its_partner_is_implied(host):
    result, _w, _i = host.run({"vm.dirty_background_bytes": 0, "vm.dirty_background_ratio": 5})
    assert host.sim.writes[0] == ("/proc/sys/vm/dirty_background_ratio", "5")
    assert host.file(sc.SYSCTL_CONF) == owned("vm.dirty_background_ratio = 5\n")
    assert "vm.dirty_background_bytes" in result["values"]   # spread out of the ratio's pair report


@pytest.mark.parametrize("request_, words", [
    ({"vm.dirty_bytes": 0}, "vm.dirty_bytes: 0 cannot be written"),
    ({"vm.dirty_bytes": 4096}, "below two pages"),
    ({"vm.dirty_bytes": 0, "vm.dirty_ratio": 0}, "set vm.dirty_ratio instead"),
    ({"vm.dirty_ratio": 101}, "out of range 0..100"),
    ({"vm.dirty_background_bytes": "1 2"}, "not a whole number"),
])
def test_dirty_pair_bad_values_fail_before_any_write(host, request_, words):
    assert words in host.refused(request_).msg


def test_dirty_ratio_zero_cannot_switch_off_dirty_bytes(host):
    host.run({"vm.dirty_bytes": 268435456}, persist=False)
    host.sim.writes[:] = []
    with pytest.raises(ReconcileError) as exc:
        host.run({"vm.dirty_ratio": 0}, persist=False)
    assert host.sim.writes == [] and "clears dirty_bytes only when the ratio changes" in exc.value.msg


def test_dirty_background_ratio_zero_does_switch_off_background_bytes(host):
    host.run({"vm.dirty_background_bytes": 1048576}, persist=False)
    result, _w, _i = host.run({"vm.dirty_background_ratio": 0}, persist=False)
    assert host.get("/proc/sys/vm/dirty_background_bytes") == "0"   # that handler clears on every write
    assert result["values"] == {"vm.dirty_background_ratio": "0", "vm.dirty_background_bytes": "0"}


def test_pair_restore_puts_back_the_mode_in_force(host):
    host.pseudo("/proc/sys/vm/swappiness", "60", handler=refusing(errno.EINVAL))
    with pytest.raises(ReconcileError) as exc:
        host.run({"vm.dirty_bytes": 268435456, "vm.swappiness": 5})
    assert host.get("/proc/sys/vm/dirty_ratio") == "20" and host.get("/proc/sys/vm/dirty_bytes") == "0"
    assert exc.value.restored == ["vm.dirty_bytes"]   # swappiness refuses its restore too (reported)
    assert "EINVAL" in exc.value.restore_errors[0]
    assert ("/proc/sys/vm/dirty_ratio", "20") in host.sim.writes


def test_pair_restore_writes_bytes_back_when_bytes_was_in_force(host):
    host.run({"vm.dirty_bytes": 268435456}, persist=False)
    setting = sc.ExclusivePairSetting("vm.dirty_ratio", "10")
    previous = setting.read(host.sim)
    setting.write(host.sim, setting.desired, previous)
    assert host.get("/proc/sys/vm/dirty_bytes") == "0"
    setting.restore(host.sim, previous)
    assert host.get("/proc/sys/vm/dirty_bytes") == "268435456" and host.get("/proc/sys/vm/dirty_ratio") == "0"


# --------------------------------------------------------------------------------------------
# debugfs scheduler tunables
# --------------------------------------------------------------------------------------------

def test_debugfs_tunable_written_persisted_in_tmpfiles_and_flagged(host):
    result, warnings, info = host.run({"debugfs.sched.base_slice_ns": 4000000})
    assert host.sim.writes == [("/sys/kernel/debug/sched/base_slice_ns", "4000000")]
    assert host.file(sc.TMPFILES_CONF) == owned("w /sys/kernel/debug/sched/base_slice_ns - - - - 4000000\n")
    assert host.file(sc.SYSCTL_CONF) is None
    assert result["values"]["debugfs.sched.base_slice_ns"] == "4000000"
    assert result["diff"]["before"]["debugfs.sched.base_slice_ns"] == "3000000"
    assert info["debug_interfaces"] == ["debugfs.sched.base_slice_ns"] and info["mapped"] == {}
    assert len(warnings) == 1 and "kernel debug interface (debugfs), not a stable ABI" in warnings[0]
    again, _w, _i = host.run({"debugfs/sched/base_slice_ns": "4000000"})
    assert again["changed"] is False


def test_old_sched_name_maps_to_base_slice_on_eevdf(host):
    result, warnings, info = host.run({"kernel.sched_min_granularity_ns": 3500000})
    assert host.sim.writes[0] == ("/sys/kernel/debug/sched/base_slice_ns", "3500000")
    assert info["mapped"] == {"kernel.sched_min_granularity_ns": "debugfs.sched.base_slice_ns"}
    assert warnings[0].startswith("kernel.sched_min_granularity_ns is not a sysctl on kernel 6.12.48+deb13-amd64 (the "
                                  "scheduler tunables moved to debugfs in 5.13): mapped to debugfs.sched.base_slice_ns")
    assert "EEVDF" in warnings[0]
    assert result["values"] == {"debugfs.sched.base_slice_ns": "3500000", sc.TMPFILES_CONF: owned(
        "w /sys/kernel/debug/sched/base_slice_ns - - - - 3500000\n")}


def test_old_sched_name_maps_to_min_granularity_before_eevdf(tmp_path):
    host = SysctlHost(tmp_path, release="6.1.0-50-amd64", sched=SCHED_61)
    _r, warnings, info = host.run({"kernel.sched_min_granularity_ns": 3500000, "kernel.sched_latency_ns": 20000000})
    assert host.sim.writes == [("/sys/kernel/debug/sched/min_granularity_ns", "3500000"),
                               ("/sys/kernel/debug/sched/latency_ns", "20000000")]
    assert info["mapped"] == {"kernel.sched_min_granularity_ns": "debugfs.sched.min_granularity_ns",
                              "kernel.sched_latency_ns": "debugfs.sched.latency_ns"}
    assert "mapped to debugfs.sched.min_granularity_ns" in warnings[0] and "EEVDF" not in warnings[0]
    assert host.file(sc.TMPFILES_CONF) == owned("w /sys/kernel/debug/sched/min_granularity_ns - - - - 3500000\n"
                                                "w /sys/kernel/debug/sched/latency_ns - - - - 20000000\n")


def test_old_sched_name_stays_a_sysctl_where_the_kernel_has_it(tmp_path):
    host = SysctlHost(tmp_path, release="5.10.0-30-amd64", sched={},
                      extra={"/proc/sys/kernel/sched_min_granularity_ns": "3000000"})
    _r, warnings, info = host.run({"kernel.sched_min_granularity_ns": 3500000})
    assert host.sim.writes == [("/proc/sys/kernel/sched_min_granularity_ns", "3500000")]
    assert info["mapped"] == {} and warnings == []
    assert host.file(sc.SYSCTL_CONF) == owned("kernel.sched_min_granularity_ns = 3500000\n")


@pytest.mark.parametrize("release, sched, debugfs, request_, words", [
    ("6.12.48+deb13-amd64", {"migration_cost_ns": "500000"}, True, {"kernel.sched_min_granularity_ns": 1},
     "has neither /proc/sys/kernel/sched_min_granularity_ns nor /sys/kernel/debug/sched/base_slice_ns nor "
     "/sys/kernel/debug/sched/min_granularity_ns"),
    ("6.12.48+deb13-amd64", None, True, {"kernel.sched_latency_ns": 1}, "EEVDF dropped latency_ns"),
    ("5.10.0-30-amd64", {}, True, {"kernel.sched_min_granularity_ns": 1}, "before 5.13"),
    ("6.12.48+deb13-amd64", None, False, {"kernel.sched_min_granularity_ns": 1},
     "moved to /sys/kernel/debug/sched) and debugfs is not mounted on /sys/kernel/debug"),
    ("6.12.48+deb13-amd64", None, False, {"debugfs.sched.base_slice_ns": 1}, "debugfs is not mounted"),
    ("6.12.48+deb13-amd64", {}, True, {"debugfs.sched.base_slice_ns": 1}, "/sys/kernel/debug/sched does not exist"),
    ("6.12.48+deb13-amd64", None, True, {"debugfs.sched.base_slice_ns": U32 + 1}, "out of range 0..4294967295"),
    ("6.12.48+deb13-amd64", None, True, {"debugfs.sched.tunable_scaling": 3}, "out of range 0..2"),
    ("6.12.48+deb13-amd64", None, True, {"debugfs.sched.base_slice_ns": "3ms"}, "not a plain integer"),
    ("6.12.48+deb13-amd64", None, True, {"debugfs.sched.base_slice_ns": "3000000\n"}, "contains a newline"),
    ("6.12.48+deb13-amd64", None, True, {"debugfs.sched.features": "NO_X"}, "not an integer tunable"),
    ("6.12.48+deb13-amd64", None, True, {"debugfs.sched.base_slice_nss": 1},
     "did you mean debugfs.sched.base_slice_ns?"),
])
def test_debugfs_refusals_write_nothing(tmp_path, release, sched, debugfs, request_, words):
    host = SysctlHost(tmp_path, release=release, sched=sched, debugfs=debugfs)
    err = host.refused(request_)
    assert words in err.msg, err.msg


def test_debugfs_without_persist_warns_it_is_lost_at_reboot(host):
    _r, warnings, info = host.run({"debugfs.sched.nr_migrate": 16}, persist=False)
    assert host.file(sc.TMPFILES_CONF) is None and info["persisted"] == {}
    assert warnings == ["debugfs.sched.nr_migrate: kernel debug interface (debugfs), not a stable ABI: it may change "
                        "or vanish with a kernel update, and the kernel recomputes some tunables on CPU hotplug; not "
                        "persisted (persist is off): lost at reboot"]


def test_tunable_scaling_is_written_before_base_slice(host):
    host.run({"debugfs.sched.base_slice_ns": 4000000, "debugfs.sched.tunable_scaling": 0, "vm.swappiness": 10})
    assert [p for p, _v in host.sim.writes] == [
        "/proc/sys/vm/swappiness", "/sys/kernel/debug/sched/tunable_scaling", "/sys/kernel/debug/sched/base_slice_ns"]
    assert host.file(sc.TMPFILES_CONF) == owned("w /sys/kernel/debug/sched/base_slice_ns - - - - 4000000\n"
                                                "w /sys/kernel/debug/sched/tunable_scaling - - - - 0\n")
    assert host.file(sc.SYSCTL_CONF) == owned("vm.swappiness = 10\n")


def test_debugfs_absent_and_old_name_absent(host):
    host.run({"debugfs.sched.base_slice_ns": 4000000, "debugfs.sched.nr_migrate": 16})
    host.sim.writes[:] = []
    result, warnings, info = host.run({"kernel.sched_min_granularity_ns": {"state": "absent"}})
    assert host.sim.writes == [] and host.get("/sys/kernel/debug/sched/base_slice_ns") == "4000000"
    assert warnings == []
    assert host.file(sc.TMPFILES_CONF) == owned("w /sys/kernel/debug/sched/nr_migrate - - - - 16\n")
    assert result["values"]["debugfs.sched.base_slice_ns"] == "4000000"
    assert info["absent"] == ["debugfs.sched.base_slice_ns"] and info["debug_interfaces"] == [
        "debugfs.sched.base_slice_ns"]
    host.run({"debugfs.sched.nr_migrate": {"state": "absent"}})
    assert host.file(sc.TMPFILES_CONF) is None


def test_flat_result_prefers_the_pair_read_back():
    result = {"changed": True, "diff": {"before": {}, "after": {}},
              "values": {"vm.dirty_bytes": {"vm.dirty_bytes": "8192", "vm.dirty_ratio": "0"}, "vm.dirty_ratio": "20",
                         "vm.swappiness": "10"}}
    assert sc.flat_result(result)["values"] == {"vm.dirty_bytes": "8192", "vm.dirty_ratio": "0", "vm.swappiness": "10"}


# --------------------------------------------------------------------------------------------
# Edges
# --------------------------------------------------------------------------------------------

def test_edges_of_the_helpers(host):
    assert sc.regroupings(host.sim, ["vm"]) == [] and sc.regroupings(host.sim, ["a"] * 11) == []
    os.makedirs(os.path.join(host.root, "proc/sys/fs/binfmt_misc"))
    live = sc.LiveValue("fs.binfmt_misc", "/proc/sys/fs/binfmt_misc")   # unreadable (a directory): None
    assert live.read(host.sim) is None and live.differs(None) is False
    assert 512 <= sc.host_page_size() <= 2 ** 20


def test_pair_partner_file_missing_is_a_read_error(tmp_path):
    host = SysctlHost(tmp_path)
    os.unlink(os.path.join(host.root, "proc/sys/vm/dirty_ratio"))
    del host.sim.state["/proc/sys/vm/dirty_ratio"]
    err = host.refused({"vm.dirty_bytes": 268435456})
    assert "/proc/sys/vm/dirty_ratio" in err.msg and "ENOENT" in err.msg


def test_ratio_zero_next_to_bytes_is_implied(host):
    host.run({"vm.dirty_bytes": 268435456, "vm.dirty_ratio": 0})
    assert [w for w in host.sim.writes if w[0].startswith("/proc")] == [("/proc/sys/vm/dirty_bytes", "268435456")]
    assert host.file(sc.SYSCTL_CONF) == owned("vm.dirty_bytes = 268435456\n")


def test_read_only_debugfs_file_is_refused(tmp_path):
    host = SysctlHost(tmp_path)
    host.pseudo("/sys/kernel/debug/sched/latency_warn_ms", "100", mode=0o444)
    assert "read-only" in host.refused({"debugfs.sched.latency_warn_ms": 50}).msg
