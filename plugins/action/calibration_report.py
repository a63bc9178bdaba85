# -*- coding: utf-8 -*-
# Copyright (c) 2026 aiinfra.io_isolation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The calibration report: one self-contained HTML file per hardware class, written on the controller
# (documented in plugins/modules/calibration_report.py). Nothing runs on the managed host.

import base64
import html
import io
import math
import os

from ansible.plugins.action import ActionBase

from ansible_collections.aiinfra.io_isolation.plugins.plugin_utils import _controller_files
from ansible_collections.aiinfra.io_isolation.plugins.plugin_utils._calibration_db import (
    COEFS, QOS_KEYS, CalibrationError, check_entry, entry_class, entry_file_name, human_bytes, merge_results,
    report_file_name, unwrap_results)

# Plots are a convenience; the measurement is the product: without matplotlib the report has its tables
# and says, in the page and in the task's result, how to get the plots.
PLOTS_HINT = ("the report's plots need the Python library matplotlib on the controller: pip install matplotlib, "
              "or run from the collection's execution environment (docs/calibration.md)")
ARGUMENT_SPEC = {
    "results": {"type": "raw", "required": True},
    "entry": {"type": "dict"},
    "dest": {"type": "path", "required": True},
    "title": {"type": "str"},
}
TITLES = {
    "rbps": "rbps - sequential read, big blocks",
    "rseqiops": "rseqiops - sequential read, 4 KiB",
    "rrandiops": "rrandiops - random read, 4 KiB",
    "wbps": "wbps - sequential write, big blocks",
    "wseqiops": "wseqiops - sequential write, 4 KiB",
    "wrandiops": "wrandiops - random write, 4 KiB",
}
STYLE = """
body{font-family:sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}
th,td{border:1px solid #bbb;padding:.2em .6em;text-align:right;font-variant-numeric:tabular-nums}
th{background:#eee}td.l,th.l{text-align:left}
img{max-width:100%;border:1px solid #ddd}
footer{margin-top:2em;color:#777;font-size:.85em}
"""


class ReportError(Exception):
    pass


def _stops(m, windows):
    """Where each pass of a measurement stopped on its (passes end to end) time axis, and why."""
    passes = [p for p in m.get("passes") or [] if isinstance(p, dict) and isinstance(p.get("fio_seconds"), (int, float))]
    if passes:
        out, t = [], 0.0
        for p in passes:
            t += float(p["fio_seconds"])
            out.append((t, "%s" % (p.get("stopped") or "stop")))
        return out
    stop = m.get("fio_seconds") or m.get("seconds")
    if stop is None and windows:
        stop = windows[-1][0]
    return [] if stop is None else [(float(stop), "%s" % (m.get("stopped") or "stop"))]


def _load_matplotlib():
    """Figure and the Agg canvas, imported only when a report is asked for; None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg", force=True)
        from matplotlib import ticker
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    return Figure, FigureCanvasAgg, ticker


# ----------------------------------------------------------------------------------------------
# formatting

def _esc(value):
    return html.escape("-" if value is None else str(value), quote=True)


def _fmt_int(value):
    return "-" if value is None else "{:,}".format(int(value))


def _fmt_pct(value, digits=1):
    return "-" if value is None else ("%." + str(digits) + "f%%") % (100.0 * float(value))


def _fmt_num(value):
    if value is None:
        return "-"
    if isinstance(value, float) and not value.is_integer():
        return ("%.2f" % value).rstrip("0").rstrip(".")
    return str(int(value)) if isinstance(value, (int, float)) else str(value)


def _table(headers, rows, left=1):
    out = ["<table>"]
    if headers:
        out.append("<tr>" + "".join('<th%s>%s</th>' % (' class="l"' if i < left else "", _esc(h))
                                    for i, h in enumerate(headers)) + "</tr>")
    for row in rows:
        out.append("<tr>" + "".join('<td%s>%s</td>' % (' class="l"' if i < left else "", _esc(c))
                                    for i, c in enumerate(row)) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _scale(unit):
    return (1e6, "MB/s") if unit == "bytes" else (1e3, "kIO/s")


def _nines(pct):
    """Percentile -> 'nines' axis position: 90 -> 1, 99 -> 2, 99.9 -> 3 (50 -> 0.30)."""
    return -math.log10(max(1.0 - float(pct) / 100.0, 1e-9))


def _png(figure, canvas_class):
    canvas_class(figure)
    buf = io.BytesIO()
    # No Software/time metadata: the same data gives the same bytes, so 'changed' means new content.
    figure.savefig(buf, format="png", dpi=90, metadata={"Software": None})
    return buf.getvalue()


# ----------------------------------------------------------------------------------------------
# plots

def _measurement_figure(results, entry, mpl):
    figure_class, canvas_class, dummy = mpl
    fig = figure_class(figsize=(15, 8.5))
    axes = fig.subplots(2, 3)
    colors = ["C%d" % i for i in range(10)]
    for index, name in enumerate(COEFS):
        ax = axes[index // 3][index % 3]
        unit = "iops" if "iops" in name else "bytes"
        drawn = False
        for run, result in enumerate(results):
            color = colors[run % len(colors)]
            found = [m for m in result.get("measurements") or [] if isinstance(m, dict) and m.get("name") == name]
            if not found:
                continue
            m = found[0]
            unit = m.get("unit") or unit
            scale, label = _scale(unit)
            windows = [w for w in m.get("windows") or [] if isinstance(w, (list, tuple)) and len(w) == 2]
            estimates = [w for w in m.get("estimates") or [] if isinstance(w, (list, tuple)) and len(w) == 2]
            if windows:
                ax.plot([w[0] for w in windows], [w[1] / scale for w in windows], color=color, linewidth=1.0,
                        marker=".", markersize=3, label="run %d rate" % (run + 1))
                drawn = True
            if estimates:
                ax.plot([e[0] for e in estimates], [e[1] / scale for e in estimates], color=color, linewidth=1.2,
                        linestyle="--", label="run %d estimate" % (run + 1))
                drawn = True
            for stop, why in _stops(m, windows):
                ax.axvline(stop, color=color, linestyle=":", linewidth=1.2)
                ax.annotate(why, xy=(stop, 1.0), xycoords=("data", "axes fraction"),
                            xytext=(-2, -4), textcoords="offset points", rotation=90, ha="right", va="top",
                            fontsize=8, color=color)
        scale, label = _scale(unit)
        final = (entry.get("iocost_model") or {}).get(name)
        if final:
            ax.axhline(final / scale, color="black", linewidth=0.8, label="entry %s" % _fmt_int(final))
        ax.set_title(TITLES[name], fontsize=10)
        ax.set_xlabel("seconds")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        if drawn:
            ax.set_ylim(bottom=0)
            ax.legend(fontsize=7, loc="lower right")
        else:
            ax.text(0.5, 0.5, "no measurement", transform=ax.transAxes, ha="center", va="center", color="#888")
    fig.suptitle("Rate per window, running estimate (dashed) and where each run stopped (dotted)", fontsize=11)
    fig.tight_layout()
    return _png(fig, canvas_class)


def _latency_points(result, side):
    latency = (result.get("latency") or {}).get(side) or {}
    points = []
    for pct, us in (latency.get("percentiles_us") or {}).items():
        try:
            p, v = float(pct), float(us)
        except (TypeError, ValueError):
            continue
        if 0 < p < 100 and v > 0:
            points.append((p, v))
    return sorted(points)


def _latency_figure(results, entry, mpl):
    figure_class, canvas_class, ticker = mpl
    if not any(_latency_points(r, side) for r in results for side in ("read", "write")):
        return None
    fig = figure_class(figsize=(13, 5))
    axes = fig.subplots(1, 2)
    qos = entry.get("qos") or {}
    ticks = [50.0, 90.0, 99.0, 99.9, 99.99, 99.999]
    for ax, side, lat_key, pct_key in ((axes[0], "read", "rlat", "rpct"), (axes[1], "write", "wlat", "wpct")):
        top = 50.0
        for run, result in enumerate(results):
            points = _latency_points(result, side)
            if not points:
                continue
            top = max(top, points[-1][0])
            limit = ((result.get("latency") or {}).get(side) or {}).get("iops_limit")
            at = " at %s IO/s" % _fmt_int(limit) if limit else ""
            ax.plot([_nines(point[0]) for point in points], [point[1] for point in points], color="C%d" % (run % 10),
                    marker="o", markersize=3, linewidth=1.0, label="run %d%s" % (run + 1, at))
        if qos.get(lat_key):
            ax.axhline(qos[lat_key], color="black", linestyle="--", linewidth=1.0,
                       label="%s = %s \u00b5s" % (lat_key, _fmt_int(qos[lat_key])))
        if qos.get(pct_key):
            ax.axvline(_nines(qos[pct_key]), color="grey", linestyle=":", linewidth=1.0,
                       label="%s = %s" % (pct_key, _fmt_num(qos[pct_key])))
        shown = sorted(set([p for p in ticks if p <= max(top, float(qos.get(pct_key) or 0))]
                           + ([float(qos[pct_key])] if qos.get(pct_key) else []))) or [50]
        ax.set_xticks([_nines(p) for p in shown])
        ax.set_xticklabels([_fmt_num(float(p)) for p in shown])
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, pos: _fmt_int(v)))
        ax.yaxis.set_minor_formatter(ticker.FuncFormatter(
            lambda v, pos: _fmt_int(v) if str(int(round(v)))[0] in "25" else ""))
        ax.set_xlabel("completion latency percentile")
        ax.set_ylabel("\u00b5s")
        ax.set_title("random %s at 90%% of the measured IOPS" % side, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return _png(fig, canvas_class)


def _solution_curves(entry):
    """[(run label, [(level, p99 ratio, antagonist share)], latency point or None)] from the entry's runs."""
    curves = []
    for index, run in enumerate(entry.get("runs") or []):
        phase = run.get("solutions") or {}
        points = [p for p in phase.get("points") or [] if isinstance(p, dict)]
        pinned = sorted((float(p["level"]), p.get("probe_p99_ratio"), p.get("antagonist_share"))
                        for p in points if p.get("variant") == "pinned" and p.get("level") is not None)
        latency = next((p for p in points if p.get("variant") == "latency"), None)
        if pinned or latency:
            curves.append(("run %d (probe %s IO/s)" % (index + 1, _fmt_int(phase.get("probe_iops"))), pinned, latency))
    return curves


def _solutions_figure(entry, mpl):
    figure_class, canvas_class, dummy = mpl
    curves = _solution_curves(entry)
    if not curves:
        return None
    fig = figure_class(figsize=(13, 5))
    axes = fig.subplots(1, 2)
    for n, (label, pinned, latency) in enumerate(curves):
        color = "C%d" % (n % 10)
        for ax, col in ((axes[0], 1), (axes[1], 2)):
            pts = [(p[0], p[col]) for p in pinned if p[col] is not None]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color, marker="o", linewidth=1.0, label=label)
            value = (latency or {}).get("probe_p99_ratio" if col == 1 else "antagonist_share")
            if value is not None:
                ax.plot([100.0], [value], color=color, marker="*", markersize=10, linestyle="none",
                        label="%s: latency target" % label)
    axes[0].axhline(1.5, color="black", linestyle="--", linewidth=1.0, label="1.5x solo (the isolation bound)")
    axes[0].set_ylabel("probe p99 / its solo p99")
    axes[0].set_yscale("log")
    axes[1].set_ylabel("antagonist IOPS / measured rrandiops")
    for ax in axes:
        ax.set_xlabel("vrate pinned (%)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return _png(fig, canvas_class)


def _solutions_section(entry):
    parts = ['<section id="solutions"><h2>QoS solutions</h2>']
    found = entry.get("solutions")
    if found is None:
        parts.append("<p>No solution phase was measured for this entry (calibrated before it existed, or with "
                     "solutions.measure=false); calibrate again to add it.</p></section>")
        return parts
    rows = []
    for name in sorted(found):
        value = found[name] or {}
        qos = value.get("qos") or {}
        rows.append([name] + [_fmt_num(qos.get(k)) for k in QOS_KEYS]
                    + [_fmt_num(value.get("vrate_read")), _fmt_num(value.get("probe_p99_ratio")),
                       _fmt_pct(value.get("rate_kept")), _fmt_pct(value.get("antagonist_share")),
                       _fmt_num(value.get("repeats"))])
    parts.append(_table(["solution"] + list(QOS_KEYS) + ["vrate read", "probe p99 / solo", "probe rate kept",
                                                         "antagonist share", "repeats"], rows))
    for note in entry.get("solution_notes") or []:
        parts.append("<p>%s</p>" % _esc(note))
    rows = []
    for index, run in enumerate(entry.get("runs") or []):
        phase = run.get("solutions") or {}
        for p in phase.get("points") or []:
            qos = p.get("qos") or {}
            rows.append(["run %d" % (index + 1), p.get("variant"), _fmt_num(p.get("level")),
                         "rpct %s rlat %s min %s max %s" % tuple(_fmt_num(qos.get(k)) for k in ("rpct", "rlat", "min",
                                                                                                "max")),
                         _fmt_num(p.get("probe_p99_us")), _fmt_num(p.get("probe_p99_ratio")), _fmt_pct(p.get("rate_kept")),
                         _fmt_num(p.get("antagonist_iops")), _fmt_pct(p.get("antagonist_share"))])
        if phase:
            rows.append(["run %d" % (index + 1), "solo (iocost off)", "-", "-", _fmt_num(phase.get("solo_p99_us")),
                         "1", "-", "-", "-"])
    if rows:
        parts.append("<p>The curve: each point pins vrate (or sets the latency target) and runs the probe reader "
                     "beside the antagonist.</p>")
        parts.append(_table(["run", "point", "vrate level", "qos", "probe p99 (\u00b5s)", "p99 / solo", "rate kept",
                             "antagonist IOPS", "antagonist share"], rows, left=2))
    parts.append("</section>")
    return parts


# ----------------------------------------------------------------------------------------------
# the document

def _img(name, data, alt):
    return '<img id="plot-%s" alt="%s" src="data:image/png;base64,%s">' % (
        name, _esc(alt), base64.b64encode(data).decode("ascii"))


def render_report(results, entry, title=None, mpl=None):
    """(html text, [plot names]) for the results of one hardware class and its entry.

    mpl is what _load_matplotlib returns; None gives the report without its plots."""
    results = [r for r in results if isinstance(r, dict)]
    device = entry.get("device") or {}
    title = title or "iocost calibration: %s firmware %s, %s" % (
        entry["model"], entry["firmware"], human_bytes(entry["capacity_bytes"]))
    parts = ['<!DOCTYPE html>', '<html lang="en"><head><meta charset="utf-8">',
             "<title>%s</title><style>%s</style></head><body>" % (_esc(title), STYLE),
             "<h1>%s</h1>" % _esc(title)]

    parts.append('<section id="header">')
    parts.append(_table(None, [
        ("device", "%s (serial %s, %s)" % (
            device.get("name") or "-", device.get("serial") or "-", device.get("stable_id") or "no stable id")),
        ("model", entry["model"]), ("firmware", entry["firmware"]),
        ("capacity", "%s bytes (%s)" % (_fmt_int(entry["capacity_bytes"]), human_bytes(entry["capacity_bytes"]))),
        ("kernel", entry.get("kernel")), ("fio", entry.get("fio_version")), ("host", entry.get("host")),
        ("date", entry.get("date")), ("repeats", entry.get("repeats")),
        ("database file", entry_file_name(entry)),
    ], left=2))
    parts.append("</section>")

    parts.append('<section id="model"><h2>Model: calibrated vs the kernel\'s class</h2>')
    kernel = entry.get("kernel_model") or {}
    spread = entry.get("spread") or {}
    rows = []
    for key in COEFS:
        mine, theirs = entry["iocost_model"].get(key), kernel.get(key)
        ratio = "%.2fx" % (float(mine) / float(theirs)) if mine and theirs else "-"
        rows.append((key, _fmt_int(mine), _fmt_int(theirs), ratio, _fmt_pct((spread.get(key) or {}).get("run_rse"), 2),
                     _fmt_pct((spread.get(key) or {}).get("repeat"), 2)))
    parts.append(_table(["coefficient", "calibrated (median)", "kernel class", "ratio", "spread within a run (RSE)",
                         "spread over repeats ((max-min)/median)"], rows))
    if not kernel:
        parts.append("<p>The run did not report the kernel's own class for this disk.</p>")
    parts.append("</section>")

    parts.append('<section id="qos"><h2>QoS</h2>')
    qos = entry.get("qos")
    if qos:
        parts.append(_table(list(QOS_KEYS), [[_fmt_num(qos.get(k)) for k in QOS_KEYS]], left=0))
        rule = next(((r.get("latency") or {}).get("rule") for r in results if (r.get("latency") or {}).get("rule")),
                    None)
        if rule:
            parts.append("<p>%s</p>" % _esc(rule))
    else:
        parts.append("<p>No QoS was measured (measure_qos=false).</p>")
    parts.append("</section>")

    parts.extend(_solutions_section(entry))

    parts.append('<section id="runs"><h2>Runs</h2>')
    parts.append(_table(["date", "host", "seconds", "kernel", "serial", "target"] + list(COEFS) + ["rlat", "wlat"], [
        [run.get("date"), run.get("host"), _fmt_num(run.get("seconds")), run.get("kernel"), run.get("serial"),
         run.get("target")] + [_fmt_int((run.get("model") or {}).get(k)) for k in COEFS]
        + [_fmt_int((run.get("qos") or {}).get(k)) for k in ("rlat", "wlat")]
        for run in entry.get("runs") or []], left=6))
    parts.append("</section>")

    parts.append('<section id="method"><h2>Method</h2>')
    method = entry.get("method") or {}
    stop = method.get("stop_rule") or {}
    rows = [("stop rule: %s" % k, _fmt_num(v)) for k, v in sorted(stop.items())]
    rows += [(k, v if isinstance(v, str) else _fmt_num(v)) for k, v in sorted(method.items())
             if k != "stop_rule" and not isinstance(v, (dict, list))]
    parts.append(_table(None, rows or [("method", "not reported")], left=2))
    parts.append("</section>")

    plots = []
    if mpl is None:
        parts.append('<section id="plots-missing"><h2>Plots</h2><p>No plots: %s.</p></section>' % _esc(PLOTS_HINT))
        parts.append("<footer>aiinfra.io_isolation.calibration_report</footer></body></html>\n")
        return "\n".join(parts), plots
    parts.append('<section id="measurements"><h2>Measurements</h2>')
    parts.append(_img("measurements", _measurement_figure(results, entry, mpl),
                      "rate over time per coefficient with the running estimate and the stopping point"))
    plots.append("measurements")
    parts.append("</section>")

    parts.append('<section id="latency"><h2>Completion latency</h2>')
    latency = _latency_figure(results, entry, mpl)
    if latency is None:
        parts.append("<p>No QoS runs: no latency percentiles.</p>")
    else:
        parts.append(_img("latency", latency, "completion latency percentiles for read and write with rlat/wlat"))
        plots.append("latency")
    parts.append("</section>")
    curve = _solutions_figure(entry, mpl)
    if curve is not None:
        parts.append('<section id="solution-curve"><h2>Isolation trade-off</h2>')
        parts.append(_img("solutions", curve, "probe p99 ratio and antagonist share against the pinned vrate"))
        plots.append("solutions")
        parts.append("</section>")
    parts.append("<footer>aiinfra.io_isolation.calibration_report</footer></body></html>\n")
    return "\n".join(parts), plots


# ----------------------------------------------------------------------------------------------

class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        dest = args["dest"]
        if not os.path.isabs(dest) and self._loader is not None:
            dest = os.path.join(self._loader.get_basedir(), dest)
        try:
            merged = merge_results(args["results"])
            entry = args.get("entry")
            if entry:
                check_entry(entry, "the entry given to calibration_report")
                if entry_class(entry) != entry_class(merged):
                    raise CalibrationError("the results are of %s firmware %s, %d bytes but the entry is of %s "
                                           "firmware %s, %d bytes" % (entry_class(merged) + entry_class(entry)))
            else:
                entry = merged
            results = unwrap_results(args["results"])
            path = os.path.join(dest, report_file_name(entry))
            if os.path.exists(dest) and not os.path.isdir(dest):
                raise ReportError("dest %s is not a directory" % dest)
            mpl = _load_matplotlib()
            text, plots = render_report(results, entry, args.get("title"), mpl)
        except (CalibrationError, ReportError) as e:
            result.update(failed=True, msg="calibration_report: %s" % e)
            return result
        data = text.encode("utf-8")
        try:
            with open(path, "rb") as handle:
                changed = handle.read() != data
        except FileNotFoundError:
            changed = True
        except OSError as e:
            result.update(failed=True, msg="calibration_report: cannot read %s: %s" % (path, e.strerror or e))
            return result
        result.update(changed=changed, path=path, plots=plots, plots_missing=mpl is None, bytes=len(data))
        if self._task.check_mode:
            result["msg"] = "would write %s (%d bytes)" % (path, len(data)) if changed else "%s is up to date" % path
            return result
        if changed:
            try:
                os.makedirs(dest, exist_ok=True)
                _controller_files.replace(path, data, only_if_changed=True)
            except OSError as e:
                result.update(failed=True, msg="calibration_report: cannot write %s: %s" % (
                    path, e.strerror or e))
                return result
        result["msg"] = "wrote %s" % path if changed else "%s is up to date" % path
        if mpl is None:
            result["msg"] += " without plots (%s)" % PLOTS_HINT
        return result
