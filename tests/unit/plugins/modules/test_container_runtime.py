# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""container_runtime through AnsibleModule, as host_profile's section and through purge, on SimRuntimes: Docker's
daemon.json merged (the user's keys kept), Podman's containers.conf edited by one key (every other byte kept), the
original kept and put back byte for byte, dockerd restarted only with restart, the placement check, and every bad
input refused with nothing written."""

import json

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import container_runtime as _cr
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import Original, STAMP
from ansible_collections.aiinfra.io_isolation.plugins.modules import container_runtime, host_profile, purge
from sim.containers import SimRuntimes

DAEMON = "/etc/docker/daemon.json"
CONF = "/etc/containers/containers.conf"
DOCKER_COPY = "/var/lib/aiinfra-io_isolation/originals/etc_docker_daemon.json.orig"
PODMAN_COPY = "/var/lib/aiinfra-io_isolation/originals/etc_containers_containers.conf.orig"
INVALID = "Invalid request (nothing was changed): "
USER_JSON = b'{\n    "log-driver": "journald",\n    "exec-opts": ["native.cgroupdriver=cgroupfs", "isolation=x"],\n' \
            b'    "data-root": "/srv/docker"\n}\n'
USER_TOML = (b"# my podman settings\n[containers]\nlog_driver = \"journald\"  # keep\n\n[engine]\n"
             b"events_logger = \"file\"\ncgroup_manager = \"cgroupfs\" # was mine\n\n[network]\n"
             b"network_backend = \"netavark\"\n")


class Lab(object):
    def __init__(self, tmp_path, monkeypatch, run_module, **kw):
        self.sim = SimRuntimes(tmp_path, **kw)
        self.warnings = []
        for module in (container_runtime, host_profile, purge):
            monkeypatch.setattr(module, "KernelFS", lambda: self.sim.fs)
            monkeypatch.setattr(module, "Runner", lambda module: self.sim)
        from ansible.module_utils import basic
        monkeypatch.setattr(basic.AnsibleModule, "warn", lambda module, msg: self.warnings.append(msg))
        self._run = run_module

    def run(self, **args):
        self.sim.calls[:] = []
        self.warnings[:] = []
        return self._run(container_runtime.main, **args)

    def profile(self, **args):
        self.sim.calls[:] = []
        self.warnings[:] = []
        return self._run(host_profile.main, **args)

    def purge(self, **args):
        self.sim.calls[:] = []
        return self._run(purge.main, **args)


@pytest.fixture
def lab(tmp_path, monkeypatch, run_module):
    return Lab(tmp_path, monkeypatch, run_module)


DOCKER = [{"name": "docker", "slice": "training.slice"}]
BOTH = DOCKER + [{"name": "podman", "slice": "machine.slice"}]


def test_docker_merge_keeps_the_users_keys_and_reports_the_restart(lab):
    lab.sim.write(DAEMON, USER_JSON, mode=0o600)
    r = lab.run(runtimes=DOCKER)
    assert r["changed"] and not r.get("failed"), r
    data = json.loads(lab.sim.read(DAEMON))
    assert data == {"log-driver": "journald", "exec-opts": ["isolation=x", "native.cgroupdriver=systemd"],
                    "data-root": "/srv/docker", "cgroup-parent": "training.slice"}
    assert list(data)[:3] == ["log-driver", "exec-opts", "data-root"]
    assert lab.sim.mode(DAEMON) == 0o600
    # the original, byte for byte, in a stamped copy
    present, mode, original = Original.parse(lab.sim.read(DOCKER_COPY))
    assert (present, mode, original) == (True, 0o600, USER_JSON)
    assert STAMP.encode() in lab.sim.read(DOCKER_COPY).split(b"\n")[0]
    # dockerd started before the change: listed, not restarted
    assert r["restart_required"] == ["docker.service"] and r["restarted"] == [] and lab.sim.restarts() == []
    assert any("docker.service runs with its old configuration" in w for w in lab.warnings)
    # a second run writes nothing and still says the daemon must restart
    again = lab.run(runtimes=DOCKER)
    assert not again["changed"] and again["restart_required"] == ["docker.service"]
    # with restart: dockerd restarted once, new containers land in the slice; then nothing to do
    moved = lab.run(runtimes=DOCKER, restart=True)
    assert moved["changed"] and moved["restarted"] == ["docker.service"] and len(lab.sim.restarts()) == 1
    assert lab.sim.run_container("docker").startswith("/training.slice/docker-")
    done = lab.run(runtimes=DOCKER, restart=True)
    assert not done["changed"] and done["restarted"] == [] and done["restart_required"] == []


def test_docker_without_a_file_and_a_new_file(lab):
    r = lab.run(runtimes=DOCKER, restart=True)
    assert json.loads(lab.sim.read(DAEMON)) == {"cgroup-parent": "training.slice",
                                                "exec-opts": ["native.cgroupdriver=systemd"]}
    assert Original.parse(lab.sim.read(DOCKER_COPY)) == (False, None, None)
    assert r["restarted"] == ["docker.service"]
    # absent: the file did not exist, so it goes; the copy goes too
    gone = lab.run(runtimes=[{"name": "docker"}], state="absent")
    assert gone["changed"] and lab.sim.read(DAEMON) is None and lab.sim.read(DOCKER_COPY) is None
    assert gone["restart_required"] == ["docker.service"]


def test_a_file_holding_the_settings_is_left_byte_for_byte(lab):
    mine = b'{"cgroup-parent":"training.slice","exec-opts":["native.cgroupdriver=systemd"]}'
    lab.sim.write(DAEMON, mine)
    lab.sim.started = __import__("time").monotonic()        # dockerd started after the file
    r = lab.run(runtimes=DOCKER)
    assert lab.sim.read(DAEMON) == mine and r["restart_required"] == []
    assert r["changed"]         # only the copy of the original is new
    assert not lab.run(runtimes=DOCKER)["changed"]


def test_podman_edits_one_key_and_keeps_every_other_byte(lab):
    lab.sim.write(CONF, USER_TOML)
    r = lab.run(runtimes=BOTH[1:])
    assert r["changed"] and r["restart_required"] == [] and lab.sim.restarts() == []
    assert lab.sim.read(CONF) == USER_TOML.replace(b'cgroup_manager = "cgroupfs" # was mine',
                                                   b'cgroup_manager = "systemd" # was mine')
    assert not lab.run(runtimes=BOTH[1:])["changed"]
    # Podman's containers still go to machine.slice: the slice is the tenant
    assert lab.sim.run_container("podman").startswith("/machine.slice/libpod-")
    back = lab.run(runtimes=BOTH[1:], state="absent")
    assert back["changed"] and lab.sim.read(CONF) == USER_TOML and lab.sim.read(PODMAN_COPY) is None


@pytest.mark.parametrize("text, want", [
    (None, '[engine]\ncgroup_manager = "systemd"\n'),
    ("", '[engine]\ncgroup_manager = "systemd"\n'),
    ('[containers]\nlog_driver = "k8s-file"',
     '[containers]\nlog_driver = "k8s-file"\n\n[engine]\ncgroup_manager = "systemd"\n'),
    ('[engine]\nevents_logger = "file"\n', '[engine]\ncgroup_manager = "systemd"\nevents_logger = "file"\n'),
    ('[engine]', '[engine]\ncgroup_manager = "systemd"\n'),
    ('[engine]\r\ncgroup_manager = \'cgroupfs\'\r\n', '[engine]\r\ncgroup_manager = "systemd"\r\n'),
    ('[engine]\n#cgroup_manager = "systemd"\n[engine.runtimes]\ncrun = []\n',
     '[engine]\ncgroup_manager = "systemd"\n#cgroup_manager = "systemd"\n[engine.runtimes]\ncrun = []\n'),
])
def test_podman_merge(text, want):
    assert _cr.podman_merge(text) == want


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=8),
                       st.one_of(st.integers(), st.text(max_size=10), st.booleans()), max_size=5))
def test_docker_merge_then_unmerge_keeps_every_user_key(user):
    text = json.dumps(user)
    merged = json.loads(_cr.docker_merge(text, "training.slice"))
    assert merged["cgroup-parent"] == "training.slice" and merged["exec-opts"][-1] == "native.cgroupdriver=systemd"
    assert dict((k, v) for k, v in merged.items() if k not in ("cgroup-parent", "exec-opts")) == \
        dict((k, v) for k, v in user.items() if k not in ("cgroup-parent", "exec-opts"))
    back = _cr.docker_unmerge(_cr.docker_merge(text, "training.slice"), text)
    assert json.loads(back) == user


def test_restore_after_the_user_edited_the_file_keeps_their_edit(lab):
    lab.sim.write(DAEMON, USER_JSON)
    lab.run(runtimes=DOCKER)
    data = json.loads(lab.sim.read(DAEMON))
    data["debug"] = True
    lab.sim.write(DAEMON, json.dumps(data))
    r = lab.run(runtimes=[{"name": "docker"}], state="absent")
    assert any("only its own keys were put back" in w for w in lab.warnings)
    assert json.loads(lab.sim.read(DAEMON)) == dict(json.loads(USER_JSON), debug=True)


def test_purge_restores_both_files_byte_for_byte_and_restarts_nothing(lab):
    lab.sim.write(DAEMON, USER_JSON, mode=0o640)
    lab.sim.write(CONF, USER_TOML)
    before = lab.sim.files()
    r = lab.profile(container_runtime={"runtimes": BOTH})
    assert r["sections"]["container_runtime"]["changed"], r
    assert lab.sim.read(DAEMON) != USER_JSON and lab.sim.read(CONF) != USER_TOML
    p = lab.purge()
    assert not p.get("failed"), p
    assert lab.sim.files() == before and lab.sim.mode(DAEMON) == 0o640
    assert lab.sim.restarts() == []
    assert not lab.purge()["changed"]


def test_check_mode_writes_nothing(lab):
    lab.sim.write(DAEMON, USER_JSON)
    before = lab.sim.files()
    r = lab.run(runtimes=BOTH, restart=True, _ansible_check_mode=True)
    assert r["changed"] and r["restarted"] == ["docker.service"]
    assert lab.sim.files() == before and lab.sim.restarts() == []


@pytest.mark.parametrize("setup, args, error", [
    ({DAEMON: b'{"log-driver": "journald",}'}, {"runtimes": DOCKER}, "/etc/docker/daemon.json does not parse as JSON"),
    ({DAEMON: b'["a"]'}, {"runtimes": DOCKER}, "holds a JSON list, not an object"),
    ({DAEMON: b'{"exec-opts": "native.cgroupdriver=systemd"}'}, {"runtimes": DOCKER}, "exec-opts is"),
    ({CONF: b'[engine\ncgroup_manager = "systemd"\n'}, {"runtimes": BOTH[1:]},
     "/etc/containers/containers.conf does not parse as TOML"),
    ({}, {"runtimes": [{"name": "podman", "slice": "training.slice"}]},
     "Podman has no setting for its containers' default cgroup parent"),
    ({}, {"runtimes": DOCKER + [{"name": "docker", "slice": "inference.slice"}]}, "docker is listed twice"),
    ({}, {"runtimes": [{"name": "docker", "slice": "training"}]}, "'training' is not a slice name"),
    ({}, {"runtimes": [{"name": "docker"}]}, "None is not a slice name"),
    ({}, {"tenant_slices": ["-.slice"]}, "-.slice is the root slice"),
])
def test_bad_input_is_refused_with_nothing_written(lab, setup, args, error):
    for path, data in setup.items():
        lab.sim.write(path, data)
    before = lab.sim.files()
    r = lab.run(**args)
    assert r.get("failed") and r["msg"].startswith(INVALID) and error in r["msg"], r
    assert lab.sim.files() == before and lab.sim.restarts() == []


def test_a_flag_on_dockerds_command_line_is_refused(tmp_path, monkeypatch, run_module):
    lab = Lab(tmp_path, monkeypatch, run_module, exec_start="/usr/sbin/dockerd -H fd:// --exec-opt native.cgroupdriver=cgroupfs")
    r = lab.run(runtimes=DOCKER)
    assert r.get("failed") and "docker.service's command line has --exec-opt" in r["msg"], r
    assert lab.sim.files() == {}


def test_a_host_without_docker_gets_the_file_and_no_restart(tmp_path, monkeypatch, run_module):
    lab = Lab(tmp_path, monkeypatch, run_module, docker=False)
    r = lab.run(runtimes=DOCKER, restart=True)
    assert r["changed"] and r["restart_required"] == [] and r["restarted"] == [] and lab.sim.restarts() == []


def test_the_placement_check(lab):
    lab.run(runtimes=DOCKER, restart=True)
    placed = lab.sim.run_container("docker")
    by_hand = lab.sim.run_container("docker", cgroup_parent="system.slice")
    podman_placed = lab.sim.run_container("podman", cgroup_parent="inference.slice")
    podman_default = lab.sim.run_container("podman")
    nested = lab.sim.run_container("docker", cgroup_parent="training-jobs.slice")
    # the listed runtime's container sent to the other tenant's slice by the user's tooling: placed (the colocated
    # scenario's Podman container with --cgroup-parent=inference.slice where Podman serves inference)
    other_tenant = lab.sim.run_container("docker", cgroup_parent="inference.slice")
    r = lab.run(runtimes=DOCKER, tenant_slices=["inference.slice"])
    found = dict((c["cgroup"], c) for c in r["containers"])
    assert set(found) == {placed, by_hand, podman_placed, podman_default, nested, other_tenant}
    assert [c["cgroup"] for c in r["outside"]] == [by_hand, podman_default]
    assert found[podman_default]["expected"] == ["inference.slice", "training.slice"]
    assert found[by_hand]["expected"] == ["training.slice", "inference.slice"]
    assert found[other_tenant]["outside"] is False
    assert found[nested]["outside"] is False and len(found[placed]["id"]) == 12
    assert any("podman container %s runs in %s, outside inference.slice and training.slice"
               % (found[podman_default]["id"], podman_default) in w for w in lab.warnings)
    # no tenant slice, no runtime: nothing is expected of any container
    assert lab.run()["outside"] == []
    assert "containers" not in lab.run(check=False)


def test_the_registry_walks_it_last_and_purge_after_placement():
    from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import registry
    assert registry.CONCERNS[-1].name == "container_runtime"
    removals = [f.__module__.rsplit(".", 1)[-1] for f in registry.REMOVALS]
    assert removals.index("container_runtime") == removals.index("placement") + 1
