# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The io_metrics role: what it installs is exactly what the exporter imports, the installed tree runs on the
standard library alone, its unit runs the exporter with arguments the exporter accepts, and record_verify writes
a result the exporter turns into the drift flag (ansible-playbook on localhost; no systemd needed)."""

import ast
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from sim.metrics import EXPECTED, lab_host
from playbook import ansible_playbook

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._observability import io_metrics as m
from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
MODULE_UTILS = os.path.join(REPO, "plugins", "module_utils")
ROLE = os.path.join(REPO, "roles", "io_metrics")


def _imports(name):
    """The module_utils files (relative to module_utils) that ``name`` imports, with their packages' __init__.py."""
    tree = ast.parse(open(os.path.join(MODULE_UTILS, name)).read())
    prefix = "ansible_collections.aiinfra.io_isolation.plugins.module_utils"
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == prefix or node.module.startswith(prefix + "."):
                package = node.module[len(prefix):].lstrip(".").replace(".", "/")
                if os.path.isfile(os.path.join(MODULE_UTILS, package + ".py")):
                    out.add(package + ".py")        # from <package>.<module> import names
                else:
                    out.update("%s/%s.py" % (package, a.name) for a in node.names)
        elif isinstance(node, ast.Import):
            assert not any(a.name.startswith("ansible") for a in node.names), name
    return out | set(os.path.dirname(f) + "/__init__.py" for f in out)


def test_installed_files_are_exactly_what_the_exporter_imports():
    closure, todo = set(), ["_observability/io_metrics.py", "_observability/__init__.py"]
    while todo:
        name = todo.pop()
        if name not in closure:
            closure.add(name)
            todo.extend(_imports(name))
    assert sorted(closure) == sorted(m.INSTALLED)
    role_vars = yaml.safe_load(open(os.path.join(ROLE, "vars", "main.yml")))
    assert role_vars["__io_metrics_files"] == list(m.INSTALLED)


def test_role_defaults_match_the_exporter_defaults():
    defaults = yaml.safe_load(open(os.path.join(ROLE, "defaults", "main.yml")))
    assert defaults["io_metrics_textfile_dir"] == m.TEXTFILE_DIR
    assert defaults["io_metrics_verify_file"] == m.VERIFY_FILE
    assert defaults["io_metrics_latency_state"] == m.LATENCY_STATE
    assert defaults["io_metrics_slices"] == list(m.SLICES)
    assert yaml.safe_load(open(os.path.join(ROLE, "vars", "main.yml")))["__io_metrics_output"] == m.OUTPUT_NAME


def render_role_template(name, **overrides):
    """A role template rendered as the template module would (trim_blocks; the filters and lookup it uses)."""
    import jinja2
    values = yaml.safe_load(open(os.path.join(ROLE, "defaults", "main.yml")))
    values.update(yaml.safe_load(open(os.path.join(ROLE, "vars", "main.yml"))))
    values.update(role_path=ROLE, __io_metrics_module_utils=MODULE_UTILS)
    values.update(overrides)
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, trim_blocks=True)
    env.filters["dirname"] = os.path.dirname
    env.filters["to_json"] = json.dumps

    def lookup(plugin, path, rstrip=True):
        assert plugin == "ansible.builtin.file"
        text = open(path).read()
        return text.rstrip() if rstrip else text
    env.globals["lookup"] = lookup
    return env.from_string(open(os.path.join(ROLE, "templates", name)).read()).render(values)


def carried(launcher_text):
    """The launcher's SOURCES: module_utils file -> the text it carries."""
    for node in ast.parse(launcher_text).body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["SOURCES"]:
            return ast.literal_eval(node.value)
    raise AssertionError("no SOURCES in the launcher")


def run_launcher(launcher, *args):
    """The launcher with -I -S: no site-packages (so no ansible), no script directory, no PYTHON* variables."""
    return subprocess.run([sys.executable, "-I", "-S", str(launcher)] + list(args),
                          capture_output=True, text=True, timeout=60, check=False)


def test_the_launcher_carries_the_files_and_runs_on_the_standard_library_alone(tmp_path):
    """One file, the INSTALLED module_utils in it byte for byte; run with -I -S its output is the exporter's in this
    process."""
    h = lab_host(tmp_path)
    text = render_role_template("io-metrics.py.j2")
    assert text.splitlines()[0].startswith("# Managed by Ansible (aiinfra.io_isolation)")
    sources = carried(text)
    assert list(sources) == list(m.INSTALLED)
    assert all(sources[n] == open(os.path.join(MODULE_UTILS, n)).read() for n in m.INSTALLED)
    launcher = tmp_path / "io-metrics"
    launcher.write_text(text)
    proc = run_launcher(launcher, "--root", h.root, "--stdout")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == EXPECTED


def test_a_failure_in_the_carried_code_shows_its_lines(tmp_path):
    """A traceback from the carried code names the file and shows the line, as from an installed tree."""
    copy = tmp_path / "module_utils"
    shutil.copytree(MODULE_UTILS, str(copy))
    exporter = copy / "_observability" / "io_metrics.py"
    text = exporter.read_text()
    exporter.write_text(text.replace("def main(argv=None, out=None):",
                                     "def main(argv=None, out=None):\n    raise RuntimeError('carried')  # the line", 1))
    assert exporter.read_text() != text
    launcher = tmp_path / "io-metrics"
    launcher.write_text(render_role_template("io-metrics.py.j2", __io_metrics_module_utils=str(copy)))
    proc = run_launcher(launcher, "--stdout")
    assert proc.returncode == 1
    assert "io-metrics:_observability/io_metrics.py" in proc.stderr and "raise RuntimeError('carried')  # the line" in proc.stderr


def test_ansible_renders_the_launcher_the_same(tmp_path):
    """The template module's own rendering (its to_json, its file lookup) gives the file these tests check."""
    dest = tmp_path / "io-metrics"
    playbook = tmp_path / "pb.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "vars_files": [
        os.path.join(ROLE, "defaults", "main.yml"), os.path.join(ROLE, "vars", "main.yml")], "tasks": [
        {"ansible.builtin.template": {"src": os.path.join(ROLE, "templates", "io-metrics.py.j2"), "dest": str(dest)},
         "vars": {"role_path": ROLE}}]}]))
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps({"all": {"hosts": {"localhost": {}}, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}))
    proc = ansible_playbook("-i", inventory, playbook)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert dest.read_text() == render_role_template("io-metrics.py.j2")
    assert run_launcher(dest, "--help").returncode == 0


def test_the_service_runs_the_exporter_with_arguments_it_accepts():
    import shlex
    unit = render_role_template("io-metrics.service.j2", io_metrics_slices=["inference.slice", "ai-batch.slice"],
                                io_metrics_workloads={"inference.slice": ["vllm.service", "embed-*.service"]})
    assert unit.splitlines()[0].startswith("# Managed by Ansible (aiinfra.io_isolation)")
    exec_start = [line for line in unit.splitlines() if line.startswith("ExecStart=")][0]
    argv = shlex.split(exec_start[len("ExecStart="):])
    assert argv[:3] == ["/usr/bin/python3", "-I", "/usr/local/libexec/aiinfra-io_isolation/io-metrics"]
    args = m.parse_args(argv[3:])
    assert args.slices == ["inference.slice", "ai-batch.slice"] and args.timeout == 20
    assert args.workloads == {"inference.slice": [{"kind": "service", "name": "vllm.service"},
                                                  {"kind": "service", "pattern": "embed-*.service"}]}
    assert args.textfile_dir == m.TEXTFILE_DIR and args.verify_file == m.VERIFY_FILE
    assert "ReadWritePaths=%s" % m.TEXTFILE_DIR in unit.splitlines()
    timer = render_role_template("io-metrics.timer.j2", io_metrics_interval_seconds=15)
    assert "OnUnitActiveSec=15s" in timer.splitlines()


def test_with_latency_the_service_runs_the_probe_and_may_keep_its_totals():
    import shlex
    unit = render_role_template("io-metrics.service.j2", io_metrics_latency_seconds=5).splitlines()
    exec_start = [line for line in unit if line.startswith("ExecStart=")][0]
    args = m.parse_args(shlex.split(exec_start[len("ExecStart="):])[3:])
    assert (args.latency_seconds, args.latency_state) == (5, m.LATENCY_STATE)
    assert "ReadWritePaths=%s %s" % (m.TEXTFILE_DIR, os.path.dirname(m.LATENCY_STATE)) in unit
    assert "TimeoutStartSec=95" in unit           # 20 + 10, and the 5 s window with 60 s for the probe's start
    off = render_role_template("io-metrics.service.j2").splitlines()
    assert "--latency" not in " ".join(off) and "TimeoutStartSec=30" in off


# -- the role on localhost: check mode, and the verify result ------------------------------------

def run_role(tmp_path, tasks_from, extra, check=False):
    playbook = """
- hosts: all
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: aiinfra.io_isolation.io_metrics
        tasks_from: %s
""" % tasks_from
    (tmp_path / "pb.yml").write_text(playbook)
    inventory = {"all": {"hosts": {"localhost": {}}, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}
    (tmp_path / "inventory.json").write_text(json.dumps(inventory))
    args = ["-i", tmp_path / "inventory.json", tmp_path / "pb.yml", "-e", json.dumps(extra)]
    return ansible_playbook(*(args + (["--check", "--diff"] if check else [])))


def role_paths(tmp_path):
    """Every path the role writes, moved below tmp_path (role vars and defaults, overridden as extra vars)."""
    return {"__io_metrics_old_lib_dir": str(tmp_path / "lib"), "__io_metrics_launcher": str(tmp_path / "libexec" / "io-metrics"),
            "__io_metrics_unit_dir": str(tmp_path / "units"), "io_metrics_textfile_dir": str(tmp_path / "textfile"),
            "io_metrics_verify_file": str(tmp_path / "state" / "verify-result.json")}


def test_check_mode_installs_nothing_and_shows_the_units(tmp_path):
    paths = role_paths(tmp_path)
    proc = run_role(tmp_path, "main", dict(paths, io_metrics_slices=["inference.slice", "ai-batch.slice"]), check=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "--slice inference.slice --slice ai-batch.slice" in out        # the service's diff
    assert "OnUnitActiveSec=30s" in out
    assert "skipping" in out and "Enable and start the timer" in out     # not asked about a unit not installed
    assert not [p for p in ("lib", "libexec", "units", "textfile", "state") if (tmp_path / p).exists()], out


def test_bad_slice_names_are_refused_before_anything_is_written(tmp_path):
    proc = run_role(tmp_path, "main", dict(role_paths(tmp_path), io_metrics_slices=["x.slice --stdout"]), check=True)
    assert proc.returncode != 0 and "io_metrics_slices must be unit names" in proc.stdout, proc.stdout[-2000:]


@pytest.mark.parametrize("workloads", [{"other.slice": ["vllm.service"]}, {"inference.slice": ["vllm --stdout"]},
                                       {"inference.slice": ["vllm"]}])
def test_bad_workloads_are_refused_before_anything_is_written(tmp_path, workloads):
    proc = run_role(tmp_path, "main", dict(role_paths(tmp_path), io_metrics_workloads=workloads), check=True)
    assert proc.returncode != 0 and "io_metrics_workloads a dict of some of them" in proc.stdout, proc.stdout[-2000:]
    assert not [p for p in ("lib", "libexec", "units", "textfile", "state") if (tmp_path / p).exists()]


def test_record_verify_writes_in_check_mode_and_the_exporter_reads_drift(tmp_path):
    h = lab_host(tmp_path)
    verify = h.path(m.VERIFY_FILE)
    os.unlink(verify)
    os.rmdir(os.path.dirname(verify))
    drift = {"inference slice": {"changed": True, "diff": {"before": {"io.weight": 100}, "after": {"io.weight": 1000}}},
             "sysctl": {"changed": False}}
    proc = run_role(tmp_path, "record_verify", {"io_metrics_verify_file": verify, "io_metrics_verify_drift": drift},
                    check=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    recorded = json.load(open(verify))
    assert recorded["drift"] is True and recorded["items"] == ["inference slice: io.weight: 100 -> 1000"]
    out = m.render(m.collect(KernelFS(h.root)))
    assert "aiinfra_io_isolation_config_drift 1\n" in out and "aiinfra_io_isolation_config_drift_items 1\n" in out
    stamp = [line for line in out.splitlines() if line.startswith("aiinfra_io_isolation_config_verify_timestamp_seconds ")]
    assert stamp and abs(int(stamp[0].split()[1]) - recorded["time"]) == 0

    proc = run_role(tmp_path, "record_verify", {"io_metrics_verify_file": verify, "io_metrics_verify_drift": {}})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.load(open(verify))["drift"] is False
    assert "aiinfra_io_isolation_config_drift 0\n" in m.render(m.collect(KernelFS(h.root)))


def test_record_verify_needs_the_drift(tmp_path):
    proc = run_role(tmp_path, "record_verify", {"io_metrics_verify_file": str(tmp_path / "v.json")}, check=True)
    assert proc.returncode != 0 and "io_metrics_verify_drift" in proc.stdout, proc.stdout[-2000:]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verify_accepts_the_units(tmp_path):
    """systemd's own parser, offline: an unknown or misspelt directive is reported (the bad copy shows it would be)."""
    for ext in ("service", "timer"):
        (tmp_path / ("aiinfra-io-metrics." + ext)).write_text(render_role_template("io-metrics.%s.j2" % ext))
    bad = tmp_path / "bad" / "aiinfra-io-metrics.service"
    bad.parent.mkdir()
    bad.write_text((tmp_path / "aiinfra-io-metrics.service").read_text().replace("\nNice=10\n", "\nNicee=10\n"))

    def verify(*paths):
        proc = subprocess.run(["systemd-analyze", "verify"] + [str(p) for p in paths], capture_output=True, text=True,
                              timeout=60, check=False)
        return proc.returncode, (proc.stdout + proc.stderr).strip()
    assert verify(tmp_path / "aiinfra-io-metrics.timer", tmp_path / "aiinfra-io-metrics.service") == (0, "")
    assert "Unknown key" in verify(bad)[1]


def test_the_role_installs_where_purge_looks():
    from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host import persist as _persist
    role = yaml.safe_load(open(os.path.join(ROLE, "vars", "main.yml")))
    assert role["__io_metrics_unit"] == _persist.METRICS_UNIT
    assert role["__io_metrics_unit_dir"] == _persist.SYSTEMD_UNIT_DIR
    assert role["__io_metrics_launcher"] == _persist.METRICS_LAUNCHER
    assert role["__io_metrics_old_lib_dir"] == _persist.METRICS_OLD_LIB_DIR
    assert role["__io_metrics_output"] == m.OUTPUT_NAME
    assert role["__io_metrics_stamp"].startswith(_persist.STAMP)
