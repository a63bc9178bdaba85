# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""SimRuntimes: Docker and Podman as the container_runtime module meets them, on a host below a test root.

The files: ``/etc/docker/daemon.json`` and ``/etc/containers/containers.conf`` (whatever the test writes), the cgroup2
tree below ``/sys/fs/cgroup``. The commands (a ``Runner`` stand-in; every argv is recorded in ``calls``):

* ``systemctl show -p P... -- docker.service`` answers ``LoadState``, ``ActiveState``,
  ``ExecMainStartTimestampMonotonic`` (µs of ``time.monotonic()`` when dockerd started) and ``ExecStart`` (systemd's
  ``{ path=... ; argv[]=... }`` form); a host without Docker answers ``LoadState=not-found``;
* ``systemctl restart -- docker.service`` is dockerd starting: it reads daemon.json as dockerd does (a file that
  does not parse, or a key also given as a flag, fails the start: rc 1, the unit ``failed``) and takes its
  ``cgroup-parent`` and cgroup driver for the containers it creates from then on.

:meth:`run_container` is ``docker run``/``podman run`` under the systemd driver: the container's scope
``<runtime>-<64 hex>.scope`` below the parent (``--cgroup-parent``, else the running dockerd's default, else
system.slice; Podman: machine.slice, whatever containers.conf says - libpod has no such setting).
"""

import json
import os
import time

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.kernelfs import KernelFS

CG = "/sys/fs/cgroup"
DOCKERD = "/usr/sbin/dockerd -H fd:// --containerd=/run/containerd/containerd.sock"


def slice_path(name):
    parts = name[:-len(".slice")].split("-")
    return "/".join("-".join(parts[:i + 1]) + ".slice" for i in range(len(parts)))


class SimRuntimes(object):
    def __init__(self, root, docker=True, docker_active=True, exec_start=DOCKERD):
        self.fs = KernelFS(str(root))
        self.docker = docker
        self.active = docker and docker_active
        self.exec_start = exec_start
        self.started = time.monotonic() - 3600 if self.active else 0
        self.parent = None          # the running dockerd's cgroup-parent
        self.driver = "systemd"
        self.calls = []
        self.count = 0
        os.makedirs(self.fs.path(CG), exist_ok=True)

    # -- files ----------------------------------------------------------------------------------
    def write(self, path, data, mode=0o644):
        real = self.fs.path(path)
        os.makedirs(os.path.dirname(real), exist_ok=True)
        with open(real, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode("utf-8"))
        os.chmod(real, mode)

    def read(self, path):
        real = self.fs.path(path)
        if not os.path.isfile(real):
            return None
        with open(real, "rb") as f:
            return f.read()

    def mode(self, path):
        return os.stat(self.fs.path(path)).st_mode & 0o7777

    def files(self):
        out = {}
        for top, _dirs, names in os.walk(self.fs.path("/etc")):
            for name in names:
                out[os.path.join(top, name)] = open(os.path.join(top, name), "rb").read()
        for top, _dirs, names in os.walk(self.fs.path("/var")):
            for name in names:
                out[os.path.join(top, name)] = open(os.path.join(top, name), "rb").read()
        return out

    # -- containers -----------------------------------------------------------------------------
    def run_container(self, runtime, cgroup_parent=None):
        """The new container's cgroup path (below the cgroup root)."""
        self.count += 1
        if runtime == "docker":
            parent = cgroup_parent or self.parent or "system.slice"
        else:
            parent = cgroup_parent or "machine.slice"
        cid = ("%064x" % (0xc0ffee * 1000 + self.count))
        rel = "%s/%s-%s.scope" % (slice_path(parent), "docker" if runtime == "docker" else "libpod", cid)
        os.makedirs(self.fs.path("%s/%s" % (CG, rel)))
        if runtime == "podman":     # conmon's own scope beside it: no container
            os.makedirs(self.fs.path("%s/%s/libpod-conmon-%s.scope" % (CG, slice_path(parent), cid)), exist_ok=True)
        return "/" + rel

    # -- commands -------------------------------------------------------------------------------
    def run(self, argv, check=True, data=None, stderr_is_error=False):
        assert isinstance(argv, list)
        self.calls.append(list(argv))
        if argv[:2] == ["systemctl", "show"]:
            return self._show(argv)
        if argv[:2] == ["systemctl", "restart"] and argv[-1] == "docker.service":
            return self._restart()
        raise AssertionError("unexpected command %r" % (argv,))

    def restarts(self):
        return [c for c in self.calls if c[:2] == ["systemctl", "restart"]]

    def _show(self, argv):
        units = argv[argv.index("--") + 1:]
        wanted = [argv[i + 1] for i, a in enumerate(argv) if a == "-p"]
        blocks = []
        for unit in units:
            if unit != "docker.service" or not self.docker:
                props = {"LoadState": "not-found", "ActiveState": "inactive", "ExecMainStartTimestampMonotonic": "0",
                         "ExecStart": ""}
            else:
                props = {"LoadState": "loaded", "ActiveState": "active" if self.active else "inactive",
                         "ExecMainStartTimestampMonotonic": str(int(self.started * 1e6)) if self.active else "0",
                         "ExecStart": "{ path=%s ; argv[]=%s ; ignore_errors=no }"
                                      % (self.exec_start.split()[0], self.exec_start)}
            blocks.append("".join("%s=%s\n" % (p, props.get(p, "")) for p in wanted))
        return 0, "\n".join(blocks), ""

    def _restart(self):
        if not self.docker:
            return 5, "", "Failed to restart docker.service: Unit docker.service not found.\n"
        text = self.read("/etc/docker/daemon.json")
        try:
            config = json.loads(text.decode("utf-8")) if text and text.strip() else {}
        except ValueError:
            self.active = False
            return 1, "", "Job for docker.service failed because the control process exited with error code.\n"
        if ("cgroup-parent" in config and "--cgroup-parent" in self.exec_start) or \
                ("exec-opts" in config and "--exec-opt" in self.exec_start):
            self.active = False
            return 1, "", "Job for docker.service failed because the control process exited with error code.\n"
        self.parent = config.get("cgroup-parent")
        drivers = [o.split("=", 1)[1] for o in config.get("exec-opts", []) if o.startswith("native.cgroupdriver=")]
        self.driver = drivers[-1] if drivers else "systemd"
        self.active = True
        self.started = time.monotonic()
        return 0, "", ""
