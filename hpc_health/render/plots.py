"""The HTML report's pictures as plotly figure specifications (plain
``{"data", "layout"}`` dicts that plotly.js draws): each figure's trend over
the runs, the picture each benchmark's users expect of one run, and the
compare intervals.

The benchmark pictures are found from how figures are named (a message
size, a thread count or a rank count as the name's last part, see
:mod:`hpc_health.model.figures`), so a new check with an axis gets its
curve without code here; the other pictures a benchmark wants (Darshan's
split of I/O time, the halo's strategies side by side) it declares beside
its parser (:mod:`hpc_health.parsers.registry`)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from hpc_health.judge import verdicts as V
from hpc_health.model.figures import as_read
from hpc_health.parsers import registry

THIS, PREVIOUS, REFERENCE = "#1f5fa8", "#9a9a9a", "#2e8b57"
WORSE, SHIFT, STACK = "#c0392b", "#7f7f7f", "#8e44ad"
VERDICT_COLOURS = {V.DEGRADED: WORSE, V.FAIL: WORSE, V.OUTLIER: "#d35400", V.PASS: REFERENCE,
                   V.IMPROVED: THIS}

_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
SIZE = re.compile(r"^(?P<prefix>[A-Za-z_]+?)_(?P<n>\d+)(?P<unit>B|KiB|MiB|GiB)$")
THREADS = re.compile(r"^(?P<prefix>[A-Za-z_]+?)_(?P<n>\d+)t$")
RANKS = re.compile(r"^(?P<prefix>[A-Za-z0-9_]+?)_n(?P<n>\d+)$")
#: Colours of a split's parts, in order.
PARTS = (THIS, STACK, REFERENCE, SHIFT)


def _r(x: float | None) -> float | None:
    """Four significant digits: the report's size over a year of runs."""
    return None if x is None or not math.isfinite(x) else float(f"{x:.4g}")


_DATE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$")
_COMPACT = re.compile(r"^(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)(\d\d)Z?$")


def _time(stamp: str) -> str:
    """A stored time (ISO 8601 or a run id's compact form, UTC) as
    plotly.js reads a date: "YYYY-MM-DD HH:MM:SS"."""
    found = _COMPACT.match(stamp or "")
    if found:
        y, mo, d, h, mi, s = found.groups()
        return f"{y}-{mo}-{d} {h}:{mi}:{s}"
    return (stamp or "").replace("T", " ").rstrip("Z")[:19]


def _layout(title: str, ytitle: str, **extra: Any) -> dict[str, Any]:
    # Title left, the tool bar upright at the right: neither hides the other.
    layout = {"title": {"text": title, "font": {"size": 13}, "x": 0.01, "xanchor": "left"},
              "modebar": {"orientation": "v"}, "height": 300,
              "margin": {"l": 64, "r": 30, "t": 58 if "<br>" in title else 40, "b": 84},
              "yaxis": {"title": {"text": ytitle}, "zeroline": False},
              "legend": {"orientation": "h", "y": -0.3, "yanchor": "top"}, "showlegend": True,
              "hovermode": "closest"}
    layout.update(extra)
    return layout


def _vline(x: Any, colour: str, dash: str, text: str, y: float = 1.0) -> tuple[dict, dict]:
    shape = {"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
             "line": {"color": colour, "width": 1.5, "dash": dash}}
    note = {"x": x, "xref": "x", "yref": "paper", "y": y, "text": text, "showarrow": False,
            "font": {"size": 10, "color": colour}, "xanchor": "left", "yanchor": "top"}
    return shape, note


def trend(t: Any, stack_marks: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
    """One figure's series (a :class:`hpc_health.judge.trends.Trend`): a
    point per run with its samples' range, the reference and its bounds as
    a band, level shifts, the sustained step to worse and stack changes."""
    x = [_time(s) for s in t.started]
    dated = all(_DATE.match(v) for v in x)
    if not dated:
        x = list(t.runs)
    values = [_r(v) for v in t.values]
    data: list[dict[str, Any]] = [{
        "type": "scatter", "mode": "lines+markers" if len(x) > 1 else "markers",
        "name": "median of the run's samples", "x": x, "y": values,
        "text": t.runs, "hovertemplate": "%{text}<br>%{y} " + t.unit + "<extra></extra>",
        "line": {"color": THIS, "width": 1}, "marker": {"size": 4, "color": THIS},
        "error_y": {"type": "data", "symmetric": False, "thickness": 1, "width": 0,
                    "color": "rgba(31,95,168,0.4)",
                    "array": [_r(h - v) for h, v in zip(t.highs, t.values)],
                    "arrayminus": [_r(v - lo) for v, lo in zip(t.values, t.lows)]}}]
    shapes, notes = [], []
    if t.reference is not None:
        lo = t.lower if t.lower is not None else min(t.lows + [t.reference])
        hi = t.upper if t.upper is not None else max(t.highs + [t.reference])
        shapes.append({"type": "rect", "xref": "paper", "yref": "y", "x0": 0, "x1": 1,
                       "y0": _r(lo), "y1": _r(hi), "line": {"width": 0},
                       "fillcolor": "rgba(46,139,87,0.12)", "layer": "below"})
        data.append({"type": "scatter", "mode": "lines", "name": "reference and bounds",
                     "x": [x[0], x[-1]], "y": [_r(t.reference)] * 2,
                     "line": {"color": REFERENCE, "dash": "dash", "width": 1.5},
                     "hoverinfo": "skip"})
    for i in t.change_points:
        s, n = _vline(x[i], SHIFT, "dot", "level shift", 0.92)
        shapes.append(s)
        notes.append(n)
    if t.worse_since:
        w = t.worse_since
        s, n = _vline(x[w["index"]], WORSE, "solid",
                      f"worse since run {w['run']} ({100 * as_read(w['magnitude'], t.better):+.1f} %)")
        shapes.append(s)
        notes.append(n)
    for run_id, started in stack_marks:
        at = _time(started) if dated else run_id
        if (x[0] < at <= x[-1]) if dated else (run_id in x[1:]):
            s, n = _vline(at, STACK, "dashdot", f"stack changed ({run_id})", 0.84)
            shapes.append(s)
            notes.append(n)
    if len(x) == 1:
        notes.append({"xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5, "showarrow": False,
                      "text": "one run: no trend claimed", "font": {"color": SHIFT}})
    mdc = "no reference" if t.reference is None else (
        f"reference {t.reference:.4g} {t.unit}, MDC "
        + ("-" if t.mdc is None else f"{100 * t.mdc:.0f} %") + (" (weak)" if t.weak else ""))
    return {"data": data, "layout": _layout(
        f"{t.check} · {t.variable} · {t.partition} {t.environ}<br><sub>{mdc}</sub>",
        t.unit, shapes=shapes, annotations=notes,
        xaxis={"type": "date" if dated and len(x) > 1 else "category"})}


# --- one run, as each benchmark's users look at it -----------------------------

def _axis(var: str) -> tuple[str, str, float] | None:
    """(kind, prefix, x) of a figure measured along an axis, or None."""
    for kind, pattern in (("size", SIZE), ("threads", THREADS), ("ranks", RANKS)):
        found = pattern.match(var)
        if found:
            x = int(found["n"]) * (_UNITS[found["unit"]] if kind == "size" else 1)
            return kind, found["prefix"], x
    return None


_XTITLE = {"size": "message size (bytes)", "threads": "cores (OpenMP threads)",
           "ranks": "MPI ranks"}


def _params(p: dict[str, Any], leave_out: str = "") -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(p.items()) if k != leave_out)


def benchmark_views(current: Sequence[V.Verdict],
                    previous: Sequence[Any] = ()) -> list[tuple[str, str, dict[str, Any]]]:
    """(benchmark, title, figure) for one run's verdicts: curves along each
    axis (this run, the reference with its bounds, the previous run),
    side-by-side strategies, the other figures as bars, the splits the
    benchmarks declare (Darshan's I/O time) and, for per-node runs, the heat
    map of nodes."""
    declared = registry.plots()
    sides = {p.param: p for p in declared if isinstance(p, registry.SideBySide)}
    before = {(m.check, m.partition_fullname, m.environ, m.variable, m.node): m.value
              for m in previous if m.value is not None}
    curves: dict[tuple, list] = {}
    bars: dict[tuple, list] = {}
    pernode = [v.measurement for v in current if v.measurement.node]
    for v in current:
        m = v.measurement
        if m.value is None or m.variable is None or m.node:
            continue
        prev = before.get((m.check, m.partition_fullname, m.environ, m.variable, m.node))
        axis = _axis(m.variable)
        where = (m.test, m.partition_fullname, m.environ)
        if axis:
            kind, prefix, x = axis
            side = next((sides[p] for p in m.params if p in sides), None) \
                if kind == "size" else None
            key = (*where, kind, prefix, m.unit,
                   _params(m.params, side.param if side else ""), side)
            curves.setdefault(key, []).append((x, m, prev))
        else:
            bars.setdefault((*where, m.unit), []).append((m, prev))
    out = [_curve(k, pts) for k, pts in curves.items()]
    out += [_bars(k, items) for k, items in bars.items()]
    for plot in declared:
        if isinstance(plot, registry.Split):
            out += _split(plot, current)
    if pernode:
        out.append(_heatmap(pernode))
    return sorted(out, key=lambda o: o[0])


def _curve(key: tuple, pts: list) -> tuple[str, str, dict[str, Any]]:
    test, part, env, kind, prefix, unit, params, side = key
    pts.sort(key=lambda p: p[0])
    xtype = "log" if kind == "size" else "linear"
    title = f"{test} {prefix} {params} · {part} {env}".replace("  ", " ")
    if side:
        # One bar per value at each size: which strategy wins where.
        by: dict[str, list] = {}
        for x, m, _ in pts:
            by.setdefault(str(m.params[side.param]), []).append((x, m))
        data = [{"type": "bar", "name": name, "x": [m.variable.split("_")[-1] for _, m in ms],
                 "y": [_r(m.value) for _, m in ms]} for name, ms in by.items()]
        return test, title, {"data": data, "layout": _layout(
            title, unit, barmode="group", yaxis={"type": "log", "title": {"text": unit}},
            xaxis={"title": {"text": side.xtitle}})}
    xs = [x for x, _, _ in pts]
    ticks = [m.variable.rsplit("_", 1)[-1] if kind == "size" else str(x) for x, m, _ in pts]
    data = [{"type": "scatter", "mode": "lines+markers", "name": "this run", "x": xs,
             "y": [_r(m.value) for _, m, _ in pts], "line": {"color": THIS}}]
    refs = [(x, m) for x, m, _ in pts if m.ref is not None]
    if refs:
        data.append({"type": "scatter", "mode": "lines+markers", "name": "reference and bounds",
                     "x": [x for x, _ in refs], "y": [_r(m.ref) for _, m in refs],
                     "line": {"color": REFERENCE, "dash": "dash"},
                     "error_y": _bounds_bars([m for _, m in refs])})
    prev = [(x, p) for x, _, p in pts if p is not None]
    if prev:
        data.append({"type": "scatter", "mode": "lines+markers", "name": "previous run",
                     "x": [x for x, _ in prev], "y": [_r(p) for _, p in prev],
                     "line": {"color": PREVIOUS, "dash": "dot"}})
    return test, title, {"data": data, "layout": _layout(
        title, unit, xaxis={"type": xtype, "title": {"text": _XTITLE[kind]},
                            "tickmode": "array", "tickvals": xs, "ticktext": ticks},
        yaxis={"type": "log" if kind == "size" else "linear", "title": {"text": unit}})}


def _bounds_bars(ms: Sequence[Any]) -> dict[str, Any]:
    def up(m):
        return 0 if m.upper is None else abs(m.ref) * m.upper

    def down(m):
        return 0 if m.lower is None else -abs(m.ref) * m.lower
    return {"type": "data", "symmetric": False, "array": [_r(up(m)) for m in ms],
            "arrayminus": [_r(down(m)) for m in ms], "color": REFERENCE, "thickness": 1}


def _bars(key: tuple, items: list) -> tuple[str, str, dict[str, Any]]:
    test, part, env, unit = key
    names = [" ".join(filter(None, (_params(m.params), m.variable))) for m, _ in items]
    data = [{"type": "bar", "name": "this run", "x": names,
             "y": [_r(m.value) for m, _ in items], "marker": {"color": THIS}}]
    with_ref = [(n, m) for n, (m, _) in zip(names, items) if m.ref is not None]
    if with_ref:
        data.append({"type": "bar", "name": "reference and bounds",
                     "x": [n for n, _ in with_ref], "y": [_r(m.ref) for _, m in with_ref],
                     "marker": {"color": REFERENCE},
                     "error_y": _bounds_bars([m for _, m in with_ref])})
    with_prev = [(n, p) for n, (_, p) in zip(names, items) if p is not None]
    if with_prev:
        data.append({"type": "bar", "name": "previous run", "x": [n for n, _ in with_prev],
                     "y": [_r(p) for _, p in with_prev], "marker": {"color": PREVIOUS}})
    title = f"{test} ({unit}) · {part} {env}"
    return test, title, {"data": data, "layout": _layout(title, unit, barmode="group")}


def _split(split: registry.Split,
           current: Sequence[V.Verdict]) -> list[tuple[str, str, dict[str, Any]]]:
    """A declared split of each test's run: one bar per group (Darshan's
    modules), the share of each part in their sum, the note as bytes."""
    wanted = [p for p, _ in split.parts] + ([split.note] if split.note else [])
    found: dict[tuple, dict[str, float]] = {}
    for v in current:
        m = v.measurement
        if m.value is None or not m.variable:
            continue
        for group in split.groups:
            for what in wanted:
                if m.variable == f"{group}_{what}":
                    key = (m.test, m.partition_fullname, m.environ, _params(m.params), group)
                    found.setdefault(key, {})[what] = m.value
    by_test: dict[tuple, list] = {}
    for (test, part, env, params, group), f in found.items():
        if all(p in f for p, _ in split.parts):
            by_test.setdefault((test, part, env), []).append((f"{params} {group}".strip(), f))
    out = []
    first = split.parts[0][0]
    for (test, part, env), rows in by_test.items():
        names = [n for n, _ in rows]
        totals = [sum(f[p] for p, _ in split.parts) or 1.0 for _, f in rows]
        data = [{"type": "bar", "orientation": "h", "name": label, "y": names,
                 "x": [_r(100 * f[what] / tot) for (_, f), tot in zip(rows, totals)],
                 "text": [_bytes(f.get(split.note)) if what == first else "" for _, f in rows],
                 "textposition": "inside", "marker": {"color": colour}}
                for (what, label), colour in zip(split.parts, PARTS)]
        title = f"{test}: {split.title} · {part} {env}"
        out.append((test, title, {"data": data, "layout": _layout(
            title, "", barmode="stack", height=max(180, 60 + 32 * len(rows)),
            xaxis={"title": {"text": split.axis}, "range": [0, 100]})}))
    return out


def _bytes(n: float | None) -> str:
    if n is None:
        return ""
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor:
            return f"{n / factor:.1f} {unit}"
    return f"{n:.0f} B"


def _heatmap(ms: Sequence[Any]) -> tuple[str, str, dict[str, Any]]:
    """Each node's figure as its deviation from the median of the nodes."""
    nodes = sorted({m.node for m in ms})
    rows: dict[str, dict[str, float]] = {}
    for m in ms:
        if m.value is not None:
            rows.setdefault(f"{m.check} {m.variable}", {})[m.node] = m.value
    names = sorted(rows)
    z, text = [], []
    for name in names:
        vals = sorted(rows[name].values())
        mid = vals[len(vals) // 2] if len(vals) % 2 else sum(vals[len(vals) // 2 - 1:][:2]) / 2
        z.append([None if n not in rows[name] or not mid else
                  _r(100 * (rows[name][n] - mid) / abs(mid)) for n in nodes])
        text.append([f"{rows[name][n]:.4g}" if n in rows[name] else "" for n in nodes])
    title = "per node: deviation from the median of the nodes (%)"
    return "per node", title, {"data": [{
        "type": "heatmap", "x": nodes, "y": names, "z": z, "text": text, "zmid": 0,
        "colorscale": "RdBu", "hovertemplate": "%{y} on %{x}: %{text} (%{z:+.1f} %)"
                                               "<extra></extra>"}],
        "layout": _layout(title, "", height=max(240, 80 + 22 * len(names)),
                          margin={"l": 320, "r": 16, "t": 40, "b": 60}, showlegend=False)}


# --- compare ------------------------------------------------------------------

def compare_intervals(rows: Sequence[Any], title: str) -> dict[str, Any]:
    """B against A for each figure of one check: the change and its 95 %
    interval, coloured by the comparison's word, with the MDC beside it."""
    colours = {"REGRESSED": WORSE, "IMPROVED": THIS, "SAME": REFERENCE,
               "INCONCLUSIVE": SHIFT}
    names = [f"{r.variable} · {r.partition_b}" for r in rows]
    data = [{"type": "scatter", "mode": "markers", "orientation": "h", "name": "change B vs A",
             "y": names, "x": [_r(100 * r.change) for r in rows],
             "marker": {"color": [colours.get(r.word, SHIFT) for r in rows], "size": 8},
             "text": [f"{r.word}; MDC {'-' if r.mdc is None else f'{100 * r.mdc:.0f} %'}"
                      for r in rows],
             "hovertemplate": "%{y}: %{x:+.1f} % (%{text})<extra></extra>",
             "error_x": {"type": "data", "symmetric": False, "thickness": 1.5,
                         "array": [None if r.high is None else _r(100 * (r.high - r.change))
                                   for r in rows],
                         "arrayminus": [None if r.low is None else _r(100 * (r.change - r.low))
                                        for r in rows]}}]
    return {"data": data, "layout": _layout(
        title, "", height=max(160, 70 + 26 * len(rows)), showlegend=False,
        margin={"l": 260, "r": 16, "t": 40, "b": 40},
        xaxis={"title": {"text": "change of B against A (%), 95 % interval"},
               "zeroline": True},
        shapes=[{"type": "line", "xref": "x", "yref": "paper", "x0": 0, "x1": 0, "y0": 0,
                 "y1": 1, "line": {"color": "#444", "width": 1}}])}
