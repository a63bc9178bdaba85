# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Hostile identities on a real udev (issue 38): a lab guest with two extra virtio disks whose serials are hostile -
the data disk's serial behind a leading space (a trimmed copy would match the data disk and never its own) and one
full of udev's syntax (a quote, ``$``, ``%``, a backslash, globs, ``|``, a comma) - then:

1. blk_queue on each data disk either refuses, naming the disk, and leaves the host as it was (no rule file, the
   queue's read_ahead_kb unchanged), or writes a rule keyed by an identity that is the disk's alone (the leading-
   space copy shares its serial, as udev and the collection compare it, with the data disk: it gets its by-path
   identity);
2. ``udevadm test`` of every virtio disk: each written rule fires for its own disk and no other;
3. rules the collection renders for COUNT generated serials (near misses of the disks' serials - case, prefix,
   suffix, a leading or trailing space - and random printable ASCII), each with its own read_ahead_kb value and
   file, are installed together, and ``udevadm test`` of each disk shows which fired: exactly the rules whose
   serial is that disk's serial as the kernel shows it; the refused ones were never rendered.

The unit test tests/unit/plugins/module_utils/test_udev_identities.py checks the same property against a model of
udev over 10,000 identities; this checks the model against udev.
  usage: python3 tests/lab/udev_identities.py VENV_BIN [--guest debian12|debian13] [--count N] [--seed S]
"""

import argparse
import os
import random
import sys
import time

import labcall
from labcall import REPO, guest, lab

DATA_SERIAL = "lab-virtio-data"
HOSTILE = [" " + DATA_SERIAL, 'q"$k%n\\*?[|,x']
RULE_PREFIX = "/etc/udev/rules.d/91-aiinfra-idtest-"


def say(msg):
    print("udev-identities: %s" % msg, flush=True)


def disks(name):
    """{kernel name: serial bytes} of the guest's virtio disks, as the kernel shows them."""
    out = guest(name, "for d in /sys/block/vd*; do [ -e $d/serial ] && echo ${d##*/} $(od -An -tx1 -v $d/serial "
                      "| tr -d ' \\n'); done").stdout
    found = {}
    for line in out.splitlines():
        dev, _sep, hexed = line.partition(" ")
        found[dev] = bytes.fromhex(hexed)
    return found


def udev_sees(raw):
    return raw.decode("utf-8", "surrogateescape").rstrip()


def module(bin_dir, inventory, name, args):
    """One blk_queue call through ansible ad hoc; its JSON result."""
    return labcall.module(bin_dir, inventory, name, "aiinfra.io_isolation.blk_queue", args)


def fired(name, dev):
    """The idtest and managed rule files whose rule matched ``dev`` in ``udevadm test`` (each sets the queue's
    read_ahead_kb; udevadm names the file and line of every assignment it makes)."""
    r = guest(name, "udevadm test --action=add /sys/block/%s 2>&1" % dev, check=False)
    files = set()
    for line in r.stdout.splitlines():
        if "read_ahead_kb" not in line:
            continue
        for word in line.replace(":", " ").split():
            if word.startswith("/etc/udev/rules.d/91-aiinfra-"):
                files.add(word)
    return files, r.stdout


def generated(rng, serials, count):
    """Near misses of the disks' serials, then random printable ASCII, up to ``count`` distinct strings."""
    out = []
    for s in serials:
        out += [s, s.upper(), s.lower(), s[1:], s[:-1], s + "x", "x" + s, " " + s, s + " ", s.strip(), s + "*",
                s[:-1] + "?", s.replace("-", "_")]
    safe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:+@-"
    while len(out) < count * 2:
        # half of them from the characters a rule may hold, so that many rules are rendered and tried
        n = rng.randint(1, 20)
        out.append("".join(rng.choice(safe) if len(out) % 2 else chr(rng.randint(32, 126)) for _i in range(n)))
    seen, unique = set(), []
    for s in out:
        if s and s not in seen:
            seen.add(s)
            unique.append(s)
    return unique[:count]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    p.add_argument("bin", help="the venv's bin directory (ansible)")
    p.add_argument("--guest", default="debian12")
    p.add_argument("--count", type=int, default=400)
    p.add_argument("--seed", type=int, default=38)
    a = p.parse_args()
    sys.path.insert(0, os.path.join(REPO, ".cache", "collections"))
    from ansible_collections.aiinfra.io_isolation.plugins.module_utils._concerns import blk_queue as _blk_queue
    from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.devices import BlockDevice
    from ansible_collections.aiinfra.io_isolation.plugins.module_utils._host.persist import PersistError

    name = "ids-" + a.guest
    t0 = time.monotonic()
    lab("down", name, "--purge")
    up = ["up", a.guest, "--name", name, "--fresh-root"]
    for s in HOSTILE:
        up += ["--identity-disk", s]
    say(lab(*up).stdout.strip().splitlines()[-1])
    inventory = os.path.join(REPO, ".cache", name + "-inventory.yml")
    try:
        with open(inventory, "w") as f:
            f.write(lab("inventory", name).stdout)
        shown = disks(name)
        say("virtio disks and their serials as the kernel shows them: %s"
            % ", ".join("%s %r" % (d, s.decode("utf-8", "replace")) for d, s in sorted(shown.items())))
        assert sorted(udev_sees(s) for s in shown.values()) == sorted(["lab-root", DATA_SERIAL] + [
            h.rstrip() for h in HOSTILE]), shown

        # 1. the module on each data disk: a refusal that changes nothing, or a rule; 2. each rule, under udevadm
        # test, fires for its own disk and no other
        written = {}
        for dev in sorted(d for d in shown if d != "vda"):
            before = guest(name, "cat /sys/block/%s/queue/read_ahead_kb; ls /etc/udev/rules.d" % dev).stdout
            result = module(a.bin, inventory, name, {"device": dev, "read_ahead_kb": 512})
            if result.get("failed"):
                after = guest(name, "cat /sys/block/%s/queue/read_ahead_kb; ls /etc/udev/rules.d" % dev).stdout
                assert "cannot match safely" in result["msg"] and dev in result["msg"], result
                assert before == after, (before, after)
                say("%s (serial %r): refused, nothing changed: %s" % (dev, shown[dev].decode(), result["msg"][:200]))
                continue
            record = result["devices"][0]
            written[dev] = record["persisted_to"]
            identity = record["device"]
            say("%s (serial %r): identity %s (%s), rule %s" % (
                dev, shown[dev].decode(), identity["stable_id"], identity.get("stable_id_note") or "-", written[dev]))
        assert DATA_SERIAL in [udev_sees(shown[d]) for d in written], "the data disk's own serial gives a rule"
        for dev in sorted(shown):
            files, _log = fired(name, dev)
            ours = set(f for f in files if not f.startswith(RULE_PREFIX))
            assert ours == set([written[dev]] if dev in written else []), (dev, files, written)
        say("udevadm test: each rule fired for its own disk alone (%s)" % ", ".join(
            "%s: %s" % (d, os.path.basename(f)) for d, f in sorted(written.items())))
        guest(name, "rm -f %s" % " ".join(written.values()))

        # 3. the generated serials' rules, all installed at once
        rng = random.Random(a.seed)
        candidates = generated(rng, [udev_sees(s) for s in shown.values()], a.count)
        rules, refused = {}, 0
        for i, serial in enumerate(candidates):
            record = BlockDevice(name="vdz", kind="virtio", majmin="254:0", rotational=True, serial=serial,
                                 stable_id="virtio-serial:%d" % i, stable_id_source="serial")
            setting = type("S", (), {"attr": "read_ahead_kb", "order": 1, "rule_value": lambda self, v=1000 + i: str(v)})()
            try:
                text = _blk_queue.udev_rule(record, [setting])
            except PersistError:
                refused += 1
                continue
            rules["%s%04d.rules" % (RULE_PREFIX, i)] = (serial, text)
        script = "set -e\n" + "".join("cat > %s <<'AIINFRA_EOF'\n%sAIINFRA_EOF\n" % (path, text)
                                      for path, (_s, text) in sorted(rules.items()))
        guest(name, script)
        try:
            total = 0
            for dev, raw in sorted(shown.items()):
                files, log = fired(name, dev)
                got = set(f for f in files if f.startswith(RULE_PREFIX))
                want = set(p for p, (serial, _t) in rules.items() if serial == udev_sees(raw))
                assert got == want, "%s (serial %r): fired %s, expected %s\n%s" % (
                    dev, raw, sorted(got), sorted(want), log[-3000:])
                total += len(got)
                say("%s (serial %r): %d of %d generated rules fired, exactly the expected ones"
                    % (dev, raw.decode(), len(got), len(rules)))
        finally:
            guest(name, "rm -f %s*.rules" % RULE_PREFIX)
        say("%d generated serials: %d rules rendered and checked on %d disks with udevadm test, %d refused; "
            "%.0f s" % (len(candidates), len(rules), len(shown), refused, time.monotonic() - t0))
    finally:
        say(lab("down", name, "--purge").stdout.strip())


if __name__ == "__main__":
    main()
