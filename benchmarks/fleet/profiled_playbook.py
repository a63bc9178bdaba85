# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""ansible-playbook with the CPU of every process sampled: how much of the controller's work is the collection's
own code (``bench.py --profile``; benchmarks/fleet/README.md).

ansible-core forks a worker for every task and host; the roles' filters, lookups and argument templating run there.
Each worker (and the strategy process) samples itself: a CPU-time timer (ITIMER_PROF, every 2 ms) interrupts it,
and the CPU used since the last sample is charged to what runs at that moment. It is the collection's when a frame
on the stack runs a file under ``plugins/`` or ansible-core's collection loader is loading (compiling from
source, executing) one of the collection's modules; else it is ansible-core's (or Jinja's, Python's). A sample
that lands after a long C call (compile) comes late and charges that call's whole CPU to the frame that made it.
Unlike a tracing profiler this does not slow Python calls down, so the shares hold for an unprofiled run.

When a worker's task is done it appends one line to FLEET_PROFILE_DIR/workers.log (the strategy process at its
exit): its sampled CPU, the collection's part, by the outermost frame of ours on the stack (what the roles
called: a filter, the lookup, the import of a plugin) and by the innermost (where the time went).

  FLEET_PROFILE_DIR=dir python benchmarks/fleet/profiled_playbook.py -i inventory playbook.yml
"""

import atexit
import json
import os
import signal
import sys
import time

from ansible.executor.process import worker

MARKER = "ansible_collections/aiinfra/io_isolation/plugins/"
PACKAGE = "ansible_collections.aiinfra.io_isolation.plugins."
LOADER = os.sep + "_collection_finder.py"
INTERVAL = 0.002
HERE = os.path.dirname(os.path.abspath(__file__))
REPO_PLUGINS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "plugins") + os.sep


def our_file(filename):
    """plugins/<...> for a file of the collection's plugins (through the collections path or the checkout)."""
    if MARKER in filename:
        return "plugins/" + filename.split(MARKER, 1)[1]
    return "plugins/" + filename[len(REPO_PLUGINS):] if filename.startswith(REPO_PLUGINS) else None


def our_frame(frame):
    """What of ours a frame runs ("plugins/x.py:function", "plugins/x.py (import)"), or None."""
    code = frame.f_code
    mine = our_file(code.co_filename)
    if mine:
        return mine + (" (import)" if code.co_name == "<module>" else ":" + code.co_name)
    if code.co_filename.endswith(LOADER) and code.co_name in ("get_code", "exec_module"):
        name = frame.f_locals.get("fullname") or getattr(frame.f_locals.get("module"), "__name__", "")
        if isinstance(name, str) and name.startswith(PACKAGE):
            return "plugins/%s.py (import)" % name[len(PACKAGE):].replace(".", "/")
    return None


class Sampler:
    """CPU seconds of this process in all and the collection's, by outermost and innermost frame of ours."""

    def __init__(self):
        self.total = self.ours = 0.0
        self.outer, self.inner = {}, {}
        self.last = time.process_time()

    def charge(self, frame):
        now = time.process_time()
        spent, self.last = now - self.last, now
        self.total += spent
        outer = inner = None
        while frame is not None:
            mine = our_frame(frame)
            if mine:
                outer = mine
                inner = inner or mine
            frame = frame.f_back
        if outer:
            self.ours += spent
            self.outer[outer] = self.outer.get(outer, 0.0) + spent
            self.inner[inner] = self.inner.get(inner, 0.0) + spent

    def start(self):
        self.last = time.process_time()
        signal.signal(signal.SIGPROF, lambda _sig, frame: self.charge(frame))
        signal.setitimer(signal.ITIMER_PROF, INTERVAL, INTERVAL)

    def stop(self, frame, **labels):
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        self.charge(frame)
        line = dict(labels, total=self.total, ours=self.ours, outer=self.outer, inner=self.inner)
        with open(os.path.join(os.environ["FLEET_PROFILE_DIR"], "workers.log"), "a", encoding="utf-8") as log:
            log.write(json.dumps(line, sort_keys=True) + "\n")


def install():
    run = worker.WorkerProcess._run  # pylint: disable=protected-access

    def sampled_run(self):
        # interval timers are not inherited by a forked child: each worker starts its own
        sampler = Sampler()
        sampler.start()
        try:
            return run(self)
        finally:
            sampler.stop(sys._getframe(), process="worker", host=self._host.name,  # pylint: disable=protected-access
                         task=self._task.get_name())  # pylint: disable=protected-access

    worker.WorkerProcess._run = sampled_run  # pylint: disable=protected-access
    strategy = Sampler()
    strategy.start()
    atexit.register(lambda: strategy.stop(sys._getframe(), process="strategy", host="", task=""))  # pylint: disable=protected-access


def summarize(path, hosts, count=10):
    """The processes' lines added up, per host: the sampled CPU of the workers and of the strategy process, the
    collection's part, its largest entries (outermost frame of ours) and places (innermost), and tasks."""
    sums = {"worker": [0.0, 0.0], "strategy": [0.0, 0.0]}
    outer, inner, tasks, workers = {}, {}, {}, 0
    with open(path, encoding="utf-8") as f:
        for text in f:
            line = json.loads(text)
            workers += line["process"] == "worker"
            sums[line["process"]][0] += line["total"]
            sums[line["process"]][1] += line["ours"]
            for key, into in (("outer", outer), ("inner", inner)):
                for name, seconds in line[key].items():
                    into[name] = into.get(name, 0.0) + seconds
            if line["process"] == "worker":
                tasks[line["task"]] = tasks.get(line["task"], 0.0) + line["ours"]

    def per_host(seconds):
        return round(1000.0 * seconds / hosts, 1)

    def top(values):
        return [{"name": k, "ms_per_host": per_host(v)} for k, v in sorted(values.items(), key=lambda kv: -kv[1])[:count]
                if v > 0]

    total = sums["worker"][0] + sums["strategy"][0]
    ours = sums["worker"][1] + sums["strategy"][1]
    return {"workers": workers, "sampled_ms_per_host": per_host(total), "ours_ms_per_host": per_host(ours),
            "ours_share": round(ours / total, 3) if total else None,
            "workers_ms_per_host": per_host(sums["worker"][0]), "strategy_ms_per_host": per_host(sums["strategy"][0]),
            "strategy_ours_ms_per_host": per_host(sums["strategy"][1]),
            "entries": top(outer), "places": top(inner), "tasks": top(tasks)}


if __name__ == "__main__":
    install()
    from ansible.cli.playbook import main  # pylint: disable=ungrouped-imports
    sys.argv[0] = "ansible-playbook"
    sys.exit(main())
