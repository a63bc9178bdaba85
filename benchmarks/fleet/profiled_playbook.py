# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""ansible-playbook with every worker process profiled: what of the controller's work is the collection's code
(``bench.py --profile``; benchmarks/fleet/README.md).

ansible-core forks a worker for every task and host, and the roles' filters, lookups and argument templating run
there. Each worker runs under cProfile; when its task is done it appends one line to FLEET_PROFILE_DIR/workers.log:
the CPU seconds its profile saw in all, and how much of that was spent in the collection's own code (functions in
files under ``plugins/``, counted where they are called from ansible-core or Jinja so that nested calls are not
counted twice), by file and by function, and what ansible-core's collection loader took to compile the
collection's source files (it keeps no bytecode cache). The strategy process itself is not profiled: it assembles
each task's variables and processes results, which is ansible-core's own work.

Profiling makes Python calls slower, the collection's many small ones more than ansible-core's: the profiled
seconds are an upper bound of the unprofiled ones, read as shares.

  FLEET_PROFILE_DIR=dir python benchmarks/fleet/profiled_playbook.py -i inventory playbook.yml
"""

import cProfile
import json
import os
import pstats
import sys
import time

from ansible.executor.process import worker
from ansible.utils.collection_loader import _collection_finder

OURS = ("ansible_collections/aiinfra/io_isolation/plugins/",)
HERE = os.path.dirname(os.path.abspath(__file__))
REPO_PLUGINS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "plugins") + os.sep
COLLECTION = "ansible_collections.aiinfra.io_isolation."


def ours(filename):
    """plugins/<...> for a file of the collection's plugins (through the collections path or the checkout)."""
    for marker in OURS:
        if marker in filename:
            return "plugins/" + filename.split(marker, 1)[1]
    real = os.path.realpath(filename) if filename.startswith(os.sep) else filename
    return "plugins/" + real[len(REPO_PLUGINS):] if real.startswith(REPO_PLUGINS) else None


def our_compile(get_code, loader, fullname):
    """ansible-core's collection loader compiling one of the collection's files (counted by this name)."""
    return get_code(loader, fullname)


def attribute(stats):
    """{total, ours, files: {file: s}, funcs: {"file:function": s}, compile: s} of one worker's pstats."""
    total = sum(v[2] for v in stats.values())
    files, funcs, compiled = {}, {}, 0.0
    for func, (_cc, _nc, _tt, _ct, callers) in stats.items():
        if func[2] == "our_compile" and func[0].endswith("profiled_playbook.py"):
            compiled += sum(c[3] for c in callers.values())
            continue
        mine = ours(func[0])
        if not mine:
            continue
        # time entering the collection's code from elsewhere: inclusive, nested calls of ours not counted again
        entered = sum(c[3] for caller, c in callers.items() if not ours(caller[0]))
        if entered:
            files[mine] = files.get(mine, 0.0) + entered
            funcs["%s:%s" % (mine, func[2])] = funcs.get("%s:%s" % (mine, func[2]), 0.0) + entered
    return {"total": total, "ours": sum(files.values()), "files": files, "funcs": funcs, "compile": compiled}


def install(out_dir):
    run = worker.WorkerProcess._run  # pylint: disable=protected-access
    get_code = _collection_finder._AnsibleCollectionPkgLoaderBase.get_code  # pylint: disable=protected-access

    def profiled_get_code(self, fullname):
        if fullname.startswith(COLLECTION):
            return our_compile(get_code, self, fullname)
        return get_code(self, fullname)

    def profiled_run(self):
        prof = cProfile.Profile(time.process_time)
        prof.enable()
        try:
            return run(self)
        finally:
            prof.disable()
            line = attribute(pstats.Stats(prof).stats)
            line.update(host=self._host.name, task=self._task.get_name())  # pylint: disable=protected-access
            with open(os.path.join(out_dir, "workers.log"), "a", encoding="utf-8") as log:
                log.write(json.dumps(line, sort_keys=True) + "\n")

    worker.WorkerProcess._run = profiled_run  # pylint: disable=protected-access
    _collection_finder._AnsibleCollectionPkgLoaderBase.get_code = profiled_get_code  # pylint: disable=protected-access


def summarize(path, hosts, count=10):
    """The workers' lines added up: per host, the profiled CPU in all and the collection's, its files and
    functions (the ``count`` largest), the compile of its source, and the largest tasks by the collection's time."""
    total = mine = compiled = 0.0
    files, funcs, tasks, workers = {}, {}, {}, 0
    with open(path, encoding="utf-8") as f:
        for text in f:
            line = json.loads(text)
            workers += 1
            total += line["total"]
            mine += line["ours"]
            compiled += line["compile"]
            for key, into in (("files", files), ("funcs", funcs)):
                for name, seconds in line[key].items():
                    into[name] = into.get(name, 0.0) + seconds
            tasks[line["task"]] = tasks.get(line["task"], 0.0) + line["ours"]

    def top(values):
        return [{"name": k, "ms_per_host": round(1000.0 * v / hosts, 2)}
                for k, v in sorted(values.items(), key=lambda kv: -kv[1])[:count]]

    return {"workers": workers, "profiled_ms_per_host": round(1000.0 * total / hosts, 1),
            "ours_ms_per_host": round(1000.0 * mine / hosts, 1), "ours_share": round(mine / total, 3) if total else None,
            "compile_ours_ms_per_host": round(1000.0 * compiled / hosts, 1),
            "files": top(files), "functions": top(funcs), "tasks": top(tasks)}


if __name__ == "__main__":
    install(os.environ["FLEET_PROFILE_DIR"])
    from ansible.cli.playbook import main  # pylint: disable=ungrouped-imports
    sys.argv[0] = "ansible-playbook"
    sys.exit(main())
