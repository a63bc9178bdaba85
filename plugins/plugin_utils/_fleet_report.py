# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The fleet report: one JSON document and one HTML page for a verify run (or several, merged).

PRIVATE to aiinfra.io_isolation. Not a public API; it may change in any release.

Controller side only. What each part serves:

* :func:`host_record` - one host's result, made on the controller where verify.yml judged the host (the
  ``fleet_host`` filter);
* :func:`part` - one job's records with the job's hosts that left no record (the ``fleet_report`` action; AWX
  carries it to later workflow nodes as the artifact ``io_isolation_fleet_part_<job id>``);
* :func:`merge` / :func:`report` - parts of several jobs (AWX's slices of one verify) into one report;
* :func:`render_html` / :func:`render_json` - the two files.

A host's state is one of ``STATES``: ``ok`` (holds its settings), ``drift`` (a check-mode run would change
something; the lines say what), ``latency`` (holds its settings but the inference slice missed its latency
objective), ``failed`` (verify failed on the host before or after judging it), ``unreachable`` (no result at all:
unreachable, or failed before verify got as far as its facts).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import html
import json

from ansible_collections.aiinfra.io_isolation.plugins.plugin_utils import _calibration_db

FORMAT = 1
PART_PREFIX = "io_isolation_fleet_part_"
STATES = ("drift", "latency", "failed", "unreachable", "ok")
STATE_TITLES = {"ok": "OK", "drift": "DRIFT", "latency": "LATENCY", "failed": "FAILED", "unreachable": "UNREACHABLE"}
NO_RESULT = "no result: the host was unreachable, or failed before verify gathered its facts (see the job's output)"
# A host's drift lines shown on the page; the JSON keeps them all.
PAGE_DRIFT_LINES = 12
OBJECTIVE_KEYS = ("p50_us", "p90_us", "p99_us", "p999_us")


class FleetReportError(Exception):
    pass


def _qos_phrase(source):
    """What verify.yml's OK line says of one disk's QoS (the qos_source_text filter's words), with its vrate bounds."""
    # imported here: the filter file is the one owner of the wording
    from ansible_collections.aiinfra.io_isolation.plugins.filter.io_isolation import qos_source_text
    full = qos_source_text({"d": source or {}})[0]
    return full.split(": ", 1)[1]


def _text(value):
    return "" if value is None else str(value)


def host_record(host, facts, qos_sources=None, model_sources=None, drift=None, boost=None, groups=None,
                objective=None, latency=None, latency_missed=None):
    """One host's result for the report.

    ``facts``: the host's io_facts (``ansible_facts.io_isolation``); ``qos_sources`` / ``model_sources``: what
    io_baseline planned per disk (keyed by the disk's stable selector); ``drift``: verify's drift lines (None: verify
    did not get as far as judging the host); ``boost``: an open boost window (verify_drift's ``boost``);
    ``objective``: io_isolation_latency_objective where set; ``latency``: io_latency's result; ``latency_missed``:
    the registered result of the task that fails a host above its objective."""
    devices = dict((str((d.get("identity") or {}).get("stable_selector")), d.get("identity") or {})
                   for d in ((facts or {}).get("devices") or {}).values())
    disks = []
    for selector in sorted(qos_sources or {}):
        identity = devices.get(selector, {})
        model, firmware, size = _calibration_db.device_class(identity)
        source = (qos_sources or {}).get(selector) or {}
        disks.append({"selector": selector, "name": _text(identity.get("name")), "serial": _text(identity.get("serial")),
                      "model": _text(model), "firmware": _text(firmware), "capacity_bytes": size,
                      "iocost_model": _text((model_sources or {}).get(selector) or "kernel"),
                      "qos": _qos_phrase(source), "solution": source.get("solution")})
    record = {"host": _text(host), "groups": sorted(_text(g) for g in groups or []), "disks": disks,
              "drift": [], "boost_until": None, "objective": None, "latency": None, "error": None}
    if isinstance(boost, dict) and boost.get("window_end"):
        record["boost_until"] = _text(boost["window_end"])
    if isinstance(objective, dict):
        record["objective"] = dict((k, objective[k]) for k in sorted(objective) if k in OBJECTIVE_KEYS + (
            "seconds", "min_count"))
    if isinstance(latency, dict) and isinstance(latency.get("latency"), list):
        key = next((k for k in OBJECTIVE_KEYS if k in (record["objective"] or {})), "p99_us")
        record["latency"] = [{"disk": _text(d.get("disk")), key: d.get(key), "count": d.get("count")}
                             for d in latency["latency"] if isinstance(d, dict)]
    if drift is None:
        record["state"] = "failed"
        record["error"] = "failed before verify judged its drift (see the job's output)"
    elif drift:
        record["state"] = "drift"
        record["drift"] = [_text(line) for line in drift]
    elif isinstance(latency_missed, dict) and latency_missed.get("failed"):
        record["state"] = "latency"
        record["error"] = _text(latency_missed.get("msg"))
    else:
        record["state"] = "ok"
    return record


def part(hosts, records, active=None, job=None):
    """One job's part: its ``records`` (host_record's) for the job's ``hosts``; a host without a record is
    unreachable, one whose record says ok but that is not ``active`` any more failed after its judgement."""
    by_host = {}
    for record in records or []:
        if not isinstance(record, dict) or record.get("state") not in STATES or not record.get("host"):
            raise FleetReportError("a host record is not one the fleet_host filter made: %.200r" % (record,))
        by_host[record["host"]] = record
    active = None if active is None else set(_text(h) for h in active)
    out = {}
    for host in sorted(set(_text(h) for h in hosts or []) | set(by_host)):
        record = by_host.get(host)
        if record is None:
            record = {"host": host, "state": "unreachable", "groups": [], "disks": [], "drift": [],
                      "boost_until": None, "objective": None, "latency": None, "error": NO_RESULT}
        elif record["state"] == "ok" and active is not None and host not in active:
            record = dict(record, state="failed", error="failed after verify judged it OK (see the job's output)")
        out[host] = record
    return {"format": FORMAT, "job": _text(job) if job is not None else None, "hosts": out}


def merge(parts, hosts=None):
    """Parts of several jobs (AWX's slices) as one: a host's record from the part that has one (the last such
    part wins); ``hosts`` (the inventory's) adds the hosts no part names, as unreachable."""
    merged, jobs = {}, []
    for one in parts or []:
        if not isinstance(one, dict) or one.get("format") != FORMAT or not isinstance(one.get("hosts"), dict):
            raise FleetReportError("not a fleet report part of format %d: %.200r" % (FORMAT, one))
        if one.get("job") is not None:
            jobs.append(one["job"])
        for host, record in one["hosts"].items():
            if host not in merged or merged[host]["state"] == "unreachable" or record["state"] != "unreachable":
                merged[host] = record
    out = part(hosts or [], list(merged.values()))
    out["jobs"] = jobs
    return out


def report(merged, calibration_entries=None, title=None, now=None):
    """The report: the merged hosts by state, the hardware classes (hosts, disks, whether a calibration entry
    covers them, the QoS in force), the latency objectives."""
    hosts = merged["hosts"]
    counts = dict((s, 0) for s in STATES)
    classes = {}
    for name in sorted(hosts):
        record = hosts[name]
        counts[record["state"]] += 1
        for disk in record["disks"]:
            key = (disk["model"], disk["firmware"], int(disk["capacity_bytes"] or 0))
            cls = classes.setdefault(key, {"model": key[0], "firmware": key[1], "capacity_bytes": key[2],
                                           "hosts": set(), "disks": 0, "iocost_models": {}, "qos": {},
                                           "entry": False})
            cls["hosts"].add(name)
            cls["disks"] += 1
            cls["iocost_models"][disk["iocost_model"]] = cls["iocost_models"].get(disk["iocost_model"], 0) + 1
            cls["qos"][disk["qos"]] = cls["qos"].get(disk["qos"], 0) + 1
            cls["entry"] = cls["entry"] or disk["iocost_model"] == "calibration"
    for entry in calibration_entries or []:
        if not isinstance(entry, dict):
            continue
        key = _calibration_db.entry_class(entry)
        cls = classes.setdefault(key, {"model": key[0], "firmware": key[1], "capacity_bytes": key[2], "hosts": set(),
                                       "disks": 0, "iocost_models": {}, "qos": {}, "entry": True})
        cls["entry"] = True
    listed = []
    for n, key in enumerate(sorted(classes, key=lambda k: (-classes[k]["disks"], [_text(x) for x in k])), 1):
        cls = classes[key]
        listed.append(dict(cls, id="C%d" % n, hosts=len(cls["hosts"])))
    when = now or datetime.datetime.now(datetime.timezone.utc)
    return {"format": FORMAT, "title": title or "I/O isolation fleet report",
            "generated": when.strftime("%Y-%m-%dT%H:%M:%SZ"), "jobs": merged.get("jobs") or [],
            "counts": counts, "hosts": hosts, "classes": listed}


def render_json(rep):
    # compact: at 1,000 hosts an indented document is 1.2 MB, this one about two thirds of it
    return json.dumps(rep, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"


# ----------------------------------------------------------------------------------------------
# the page: one file, inline CSS, no script, every value from a host escaped

STYLE = (
    "body{font-family:sans-serif;margin:1.2em;color:#222;font-size:14px}h1{font-size:1.4em}"
    "h2{font-size:1.15em;margin-top:1.4em}table{border-collapse:collapse;margin:.4em 0}"
    "th,td{border:1px solid #ccc;padding:.15em .5em;text-align:left;vertical-align:top}th{background:#eee}"
    "td.n{text-align:right;font-variant-numeric:tabular-nums}.s{font-weight:bold;padding:.1em .4em;border-radius:3px}"
    ".ok{background:#d6f0d6}.drift{background:#fbd5d5}.latency{background:#fde7c4}.failed{background:#f3c6f3}"
    ".unreachable{background:#ddd}ul{margin:.1em 0;padding-left:1.2em}code{font-size:.95em}"
    "footer{margin-top:2em;color:#777;font-size:.85em}summary{cursor:pointer}")


def _e(value):
    return html.escape(_text(value), quote=True)


def _badge(state):
    return '<span class="s %s">%s</span>' % (state, STATE_TITLES[state])


def _class_label(cls):
    return "%s, firmware %s, %s" % (cls["model"] or "?", cls["firmware"] or "?",
                                    _calibration_db.human_bytes(cls["capacity_bytes"]))


def _objective_text(objective):
    if not objective:
        return ""
    key = next((k for k in OBJECTIVE_KEYS if k in objective), None)
    if key is None:
        return ""
    return "%s &le; %s us over %s s" % (_e(key[:-3]), _e(objective[key]), _e(objective.get("seconds", 10)))


def _latency_text(record):
    objective = record.get("objective") or {}
    key = next((k for k in OBJECTIVE_KEYS if k in objective), "p99_us")
    if record.get("latency") is None:
        return "not sampled"
    if not record["latency"]:
        return "no I/O"
    return ", ".join("%s %s us (%s I/Os)" % (_e(d.get("disk")), _e(d.get(key)), _e(d.get("count")))
                     for d in record["latency"])


def _disk_classes(record, class_ids):
    seen = {}
    for disk in record["disks"]:
        cid = class_ids[(disk["model"], disk["firmware"], int(disk["capacity_bytes"] or 0))]
        seen[cid] = seen.get(cid, 0) + 1
    return ", ".join("%d&times;%s" % (n, cid) for cid, n in sorted(seen.items()))


def render_html(rep):
    hosts, classes = rep["hosts"], rep["classes"]
    class_ids = dict(((c["model"], c["firmware"], c["capacity_bytes"]), c["id"]) for c in classes)
    counts = rep["counts"]
    out = ['<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width">',
           "<title>%s</title><style>%s</style></head><body>" % (_e(rep["title"]), STYLE),
           "<h1>%s</h1>" % _e(rep["title"]),
           "<p>%d hosts: %s. Generated %s from %s.</p>" % (
               len(hosts), ", ".join("%s %d" % (_badge(s), counts[s]) for s in STATES if counts[s] or s == "ok"),
               _e(rep["generated"]), _e(_jobs_text(rep["jobs"])))]
    attention = [hosts[h] for h in sorted(hosts) if hosts[h]["state"] != "ok"]
    out.append("<h2>Hosts that need attention (%d)</h2>" % len(attention))
    if attention:
        out.append("<table><tr><th>host</th><th>state</th><th>what</th></tr>")
        for record in sorted(attention, key=lambda r: (STATES.index(r["state"]), r["host"])):
            if record["state"] == "drift":
                lines = record["drift"][:PAGE_DRIFT_LINES]
                more = len(record["drift"]) - len(lines)
                what = "<ul>%s%s</ul>" % ("".join("<li>%s</li>" % _e(line) for line in lines),
                                          "<li>and %d more (the JSON has them all)</li>" % more if more > 0 else "")
            else:
                what = _e(record.get("error"))
            out.append("<tr><td>%s</td><td>%s</td><td>%s</td></tr>" % (_e(record["host"]), _badge(record["state"]),
                                                                       what))
        out.append("</table>")
    else:
        out.append("<p>None: every host holds its I/O isolation settings.</p>")
    out.append("<h2>Hardware classes (%d)</h2>" % len(classes))
    out.append("<table><tr><th>class</th><th>model, firmware, capacity</th><th>hosts</th><th>disks</th>"
               "<th>calibration entry</th><th>iocost model in force (disks)</th><th>QoS in force (disks)</th></tr>")
    for cls in classes:
        out.append('<tr><td>%s</td><td>%s</td><td class="n">%d</td><td class="n">%d</td><td>%s</td><td>%s</td>'
                   "<td>%s</td></tr>" % (
                       cls["id"], _e(_class_label(cls)), cls["hosts"], cls["disks"],
                       "yes" if cls["entry"] else '<span class="s drift">none</span>',
                       "<br>".join("%s (%d)" % (_e(k), v) for k, v in sorted(cls["iocost_models"].items())),
                       "<br>".join("%s (%d)" % (_e(k), v) for k, v in sorted(cls["qos"].items()))))
    out.append("</table>")
    objectives = [hosts[h] for h in sorted(hosts) if hosts[h].get("objective")]
    out.append("<h2>Latency objectives (%d hosts)</h2>" % len(objectives))
    if objectives:
        out.append("<table><tr><th>host</th><th>objective</th><th>measured</th><th>state</th></tr>")
        for record in objectives:
            out.append("<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>" % (
                _e(record["host"]), _objective_text(record["objective"]), _latency_text(record),
                _badge(record["state"])))
        out.append("</table>")
    else:
        out.append("<p>No host sets io_isolation_latency_objective.</p>")
    out.append("<details><summary><h2 style=\"display:inline\">All hosts (%d)</h2></summary>" % len(hosts))
    out.append("<table><tr><th>host</th><th>state</th><th>groups</th><th>disks by class</th><th>QoS in force</th>"
               "</tr>")
    for name in sorted(hosts):
        record = hosts[name]
        qos = sorted(set(d["qos"] for d in record["disks"]))
        note = (" (boost window until %s)" % _e(record["boost_until"])) if record.get("boost_until") else ""
        out.append("<tr><td>%s</td><td>%s%s</td><td>%s</td><td>%s</td><td>%s</td></tr>" % (
            _e(name), _badge(record["state"]), note, _e(" ".join(record["groups"])),
            _disk_classes(record, class_ids), "; ".join(_e(q) for q in qos)))
    out.append("</table></details>")
    out.append("<footer>aiinfra.io_isolation fleet report, format %d. The JSON beside this page has every host's "
               "record: its disks (selector, serial, class, iocost model and QoS in force), its drift and its "
               "latency samples.</footer></body></html>\n" % FORMAT)
    return "\n".join(out)


def _jobs_text(jobs):
    named = [j for j in jobs or [] if j not in (None, "")]
    if not named:
        return "one run"
    return "%d job%s (%s)" % (len(named), "" if len(named) == 1 else "s", ", ".join(_text(j) for j in named))
