# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Running host commands: argv lists, C locale, rc and stderr checked, JSON where the tool has it.

Two ways: :class:`Runner` for a command whose answer comes at its end (``AnsibleModule.run_command``),
:class:`Child` for one that must be read while it runs and stopped on time (fio, bpftrace): pipes read
without blocking (``select`` + ``os.read``), a graceful stop (SIGINT, then SIGTERM) before SIGKILL, and
always reaped.

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import codecs
import json
import os
import select
import signal
import subprocess
import time

from ansible_collections.aiinfra.io_isolation.plugins.module_utils._engine.reconcile import HostError

C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}
# After SIGINT, how long a child gets to print its final output and exit, then SIGTERM, then SIGKILL.
STOP_TIMEOUT = 10.0


class CommandError(HostError):
    """A command that failed: its argv, rc and output."""

    RESULT_KEY = "command"

    def __init__(self, argv, rc, stdout, stderr, reason=None):
        self.argv = list(argv)
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        msg = "Command %s failed" % " ".join(self.argv)
        msg += ": %s" % reason if reason else " with rc=%s: %s" % (rc, (stderr or stdout or "").strip()[:500])
        self.msg = msg
        self.message = msg
        super(CommandError, self).__init__(msg)

    def as_dict(self):
        return {"argv": self.argv, "rc": self.rc, "stderr": (self.stderr or "").strip()[:2000]}


class Runner:
    """Wraps ``AnsibleModule.run_command`` (or any callable with its signature) and ``get_bin_path``."""

    def __init__(self, module):
        self.module = module

    def which(self, name):
        """Absolute path of a tool on the host, or None."""
        return self.module.get_bin_path(name, required=False)

    def run(self, argv, check=True, data=None, stderr_is_error=False):
        """Run argv (a list, never a shell string); returns (rc, stdout, stderr)."""
        if isinstance(argv, str):
            raise TypeError("argv must be a list")
        rc, out, err = self.module.run_command(list(argv), environ_update=C_LOCALE, data=data,
                                               check_rc=False)
        return _checked(argv, rc, out, err, check, stderr_is_error)

    def start(self, argv):
        """Start argv (a list) in the background with the C locale; :meth:`Started.wait` gives (rc, stdout, stderr)
        as :meth:`run` would (CommandError for rc != 0). For a read that takes seconds while the caller goes on."""
        if isinstance(argv, str):
            raise TypeError("argv must be a list")
        # run_command waits for its process; a background read needs Popen (same argv list, C locale, no shell).
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,  # pylint: disable=ansible-bad-function
                                stderr=subprocess.PIPE, env=c_environ(), close_fds=True)
        return Started(list(argv), proc)

    def run_json(self, argv):
        """Run a tool in its JSON output mode and decode the answer."""
        return _json_answer(argv, *self.run(argv))


class Started:
    """A command :meth:`Runner.start` started; :meth:`wait` once for its (rc, stdout, stderr)."""

    def __init__(self, argv, proc):
        self.argv = argv
        self.proc = proc

    def wait(self, check=True):
        out, err = self.proc.communicate()
        out, err = out.decode("utf-8", "surrogateescape"), err.decode("utf-8", "surrogateescape")
        return _checked(self.argv, self.proc.returncode, out, err, check)


def _checked(argv, rc, out, err, check, stderr_is_error=False):
    """(rc, out, err), or CommandError when ``check`` and the command failed. Some tools exit 0 and still report
    failure on stderr (sysctl does): ``stderr_is_error``."""
    if check and (rc != 0 or (stderr_is_error and err.strip())):
        raise CommandError(argv, rc, out, err)
    return rc, out, err


def _json_answer(argv, _rc, out, err):
    """A JSON-mode tool's answer, decoded."""
    try:
        return json.loads(out)
    except ValueError:
        raise CommandError(argv, 0, out, err, reason="output is not JSON: %r" % out[:200])


def _read_only(argv):
    """``systemctl --version`` and ``systemctl show ...``: commands that only read systemd's state."""
    argv = list(argv)
    return len(argv) >= 2 and os.path.basename(str(argv[0])) == "systemctl" and argv[1] in ("--version", "show")


class PlanReads:
    """A Runner for a call's planning, which writes nothing: the answer of each read-only command
    (:func:`_read_only`: ``systemctl --version``, ``systemctl show``) is kept and given again for the same
    argv, so that several sections asking the same (each cgroup section asks systemd's version, a runtime's
    service is shown by two checks) cost one process. Any other command forgets what was kept, and after
    :meth:`stop` (the plan is done: the engine reads, writes and reads again) every command runs."""

    def __init__(self, runner):
        self.runner = runner
        self.kept = {}
        self.active = True
        self.saved = 0      # commands answered from what was kept (unit tests, profiling)

    def stop(self):
        self.active = False
        self.kept = {}

    def run(self, argv, check=True, data=None, stderr_is_error=False):
        if not (self.active and data is None and _read_only(argv)):
            self.kept = {}
            return self.runner.run(argv, check=check, data=data, stderr_is_error=stderr_is_error)
        key = tuple(argv)
        if key in self.kept:
            self.saved += 1
        else:
            self.kept[key] = self.runner.run(argv, check=False)
        return _checked(argv, *self.kept[key], check=check, stderr_is_error=stderr_is_error)

    def run_json(self, argv):
        return _json_answer(argv, *self.run(argv))

    def __getattr__(self, name):     # which() and the rest: the runner's own
        return getattr(self.runner, name)


def c_environ():
    """This process's environment with the C locale: what a child runs with."""
    env = dict(os.environ)
    env.update(C_LOCALE)
    return env


class Child:
    """One running process: non-blocking reads of both pipes (the last ``stderr_tail`` characters of
    stderr kept in ``.stderr``), graceful and forced stops. ``popen_kwargs`` go to ``popen``."""

    def __init__(self, popen, argv, clock, stderr_tail=4000, preexec_fn=None, **popen_kwargs):
        if isinstance(argv, str):
            raise TypeError("argv must be a list")
        self.argv = argv
        self.clock = clock
        self.stderr_tail = stderr_tail

        def child_setup():
            # stop() begins with SIGINT (fio and bpftrace print their final output on it). A process started
            # in the background by a shell without job control (`cmd &`, as CI lanes and nohup do) has SIGINT
            # ignored, and an ignored signal stays ignored across exec: the child would sit out the whole
            # SIGINT timeout. Its default disposition back, before exec.
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            if preexec_fn is not None:
                preexec_fn()
        self.proc = popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=c_environ(), close_fds=True, preexec_fn=child_setup, **popen_kwargs)
        self._fds = {}
        self._dec = {}
        for name, f in (("out", self.proc.stdout), ("err", self.proc.stderr)):
            self._fds[f.fileno()] = name
            self._dec[name] = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.stderr = ""

    @property
    def open(self):
        return bool(self._fds)

    def read(self, timeout):
        """Wait up to ``timeout`` s for output; returns the new stdout text (stderr is kept in ``.stderr``)."""
        if not self._fds:
            return ""
        ready, _w, _x = select.select(list(self._fds), [], [], max(0.0, timeout))
        out = ""
        for fd in ready:
            name = self._fds[fd]
            try:
                data = os.read(fd, 65536)
            except OSError:
                data = b""
            final = not data
            text = self._dec[name].decode(data, final)
            if final:
                del self._fds[fd]
            if name == "out":
                out += text
            else:
                self.stderr = (self.stderr + text)[-self.stderr_tail:]
        return out

    def drain(self, seconds, tick=None, every=1.0):
        """Read until both pipes close or ``seconds`` pass; returns stdout text. ``tick()`` is called
        about every ``every`` seconds meanwhile (work that must happen while the child runs)."""
        deadline = self.clock() + seconds
        next_tick = self.clock()
        out = ""
        while self._fds:
            now = self.clock()
            if tick is not None and now >= next_tick:
                tick()
                next_tick = now + every
            left = deadline - now
            if left <= 0:
                break
            out += self.read(min(left, 0.5))
        return out

    def wait(self, seconds):
        """Reap the process within ``seconds``; returns its rc or None."""
        deadline = self.clock() + seconds
        while True:
            rc = self.proc.poll()
            if rc is not None:
                return rc
            if self.clock() >= deadline:
                return None
            time.sleep(0.05)

    def stop(self, timeout=None):
        """SIGINT (fio and bpftrace print their final output and exit), then SIGTERM, then SIGKILL, each
        given ``timeout`` s. Returns stdout text."""
        timeout = STOP_TIMEOUT if timeout is None else timeout
        out = ""
        for sig in (signal.SIGINT, signal.SIGTERM):
            if self.proc.poll() is not None:
                break
            try:
                self.proc.send_signal(sig)
            except OSError:
                break
            out += self.drain(timeout)
            if self.wait(timeout) is not None:
                break
        self.kill()
        return out

    def kill(self):
        """SIGKILL if still running, reap, close the pipes. Never raises."""
        try:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
        except Exception:  # pylint: disable=broad-except
            pass
        for f in (self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except Exception:  # pylint: disable=broad-except
                pass
        self._fds = {}
