"""``hpc-health report --html``: the health report of a run set as one
self-contained HTML file, and ``report SET_A SET_B --html``, the compare
page.

Header (site, partitions, runs and time span, the latest run's verdict,
its software stack and what changed since the run before), the verdict
table with the worst rows first, each linked to its figure's trend, the
trends, and one run as each benchmark's users look at it."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from hpc_health.judge import verdicts as V
from hpc_health.render import html_page as H
from hpc_health.render import plots, summaries
from hpc_health.render import table as T
from hpc_health.render.table import broad_line
from hpc_health.store import judged, runsets


def _order(v: V.Verdict) -> int:
    return 0 if v.verdict in V.FAILING else 1 if v.verdict not in (V.PASS, V.IMPROVED) else 2


#: Characters of a reason the verdict table shows, the whole on hover.  A
#: reason's first clause can be all a reader needs ("+18.6 % on one night,
#: beyond the +13.1 % its noise allows") or nothing the row does not say
#: ("-59.1 %", before "2 nights in a row beyond -51.1 %"), and a cannot-gate
#: reason is one clause of some 170 characters, ten lines in the last column.
WHY_SHOWN = 90


def _why(reason: str) -> str:
    """The reason's first :data:`WHY_SHOWN` characters (cut at a word), the
    whole of it on hover: a year's table stays readable."""
    short = textwrap.shorten(reason, WHY_SHOWN + 1, placeholder="…")
    return f"<span class=\"why\" title=\"{H.esc(reason)}\">{H.esc(short)}</span>"


def _stack_lines(stack: Sequence[tuple], specs: Sequence[tuple]) -> str:
    if not (stack or specs):
        return "unchanged"
    items = [f"{H.esc(w)}: <code>{H.esc(a)}</code> → <code>{H.esc(b)}</code>"
             for w, a, b in stack]
    items += [f"Spack {H.esc(c)} {H.esc(n)}: <code>{H.esc(a)}</code> → <code>{H.esc(b)}</code>"
              for c, n, a, b in specs]
    return "<ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


def health(idx: Any, site: str, runs: Sequence[Any], refs: Any,
           damaged: Sequence[tuple[str, str]] = (), per_node_min_change: float | None = None,
           settings: Any = None, tick: Any = None) -> tuple[bytes, int, str]:
    """(the page, the latest run's exit code, a one-line summary) for
    *runs* (index runs, oldest first); the latest run's verdicts as its
    night judged them (:mod:`hpc_health.store.judged`), *tick* told of the
    trends' progress."""
    from hpc_health.judge import comparison, trends
    from hpc_health.model import results
    # The run that finished last by this machine's clock, not one dated ahead of it.
    latest = runsets.latest(runs)[0]
    at = list(runs).index(latest)
    previous = runs[at - 1] if at > 0 else None
    report = results.load_report(latest.dir / "report.json")
    measured = results.measurements(report)
    vs = judged.verdicts_of(latest, refs, settings, report)
    if latest.meta.get("per_node"):
        vs = V.node_outliers(vs, per_node_min_change)
    before = results.measurements(results.load_report(previous.dir / "report.json")) \
        if previous else []
    stack, specs = comparison.stack_diff([previous], [latest], [before, measured]) \
        if previous else ([], [])
    series = trends.trends(idx, runs, refs, tick) if tick else trends.trends(idx, runs, refs)
    marks = trends.stack_changes(runs)
    ids = {t.key: f"t{i}" for i, t in enumerate(series)}
    specs_js: dict[str, dict[str, Any]] = {}
    for t in series:
        specs_js[ids[t.key]] = plots.trend(t, marks)

    state = summaries.state(vs)
    code = V.exit_code(vs)
    parts = ", ".join(idx.partitions(runs))
    body = [f"<h1>hpc-health: {H.esc(site)} "
            f"<span class=\"verdict {H.verdict_class(state)}\">{state}</span></h1>",
            "<table class=\"meta\">",
            *(f"<tr><td>{H.esc(k)}</td><td>{v}</td></tr>" for k, v in (
                ("partitions", H.esc(parts)),
                ("runs", f"{len(runs)}: {H.esc(runs[0].meta.get('started'))} to "
                         f"{H.esc(latest.meta.get('started'))}"),
                ("latest run", f"{H.esc(latest.run_id)} on {H.esc(latest.meta.get('hostname'))}"
                               f" ({H.esc(T.summary(vs))})"),
                ("software stack", f"<code>{H.esc(latest.meta.get('stack_hash') or '-')}</code>"),
                (f"changed since {previous.run_id}" if previous else "changed",
                 _stack_lines(stack, specs) if previous else "no earlier run in the set"),
                ("left out", H.esc("; ".join(f"{rid} ({why})" for rid, why in damaged))
                 if damaged else "no damaged run"))),
            "</table>"]
    rows = []
    for v, cells in sorted(zip(vs, T.rows(vs)), key=lambda p: _order(p[0])):
        m = v.measurement
        key = (m.check, m.partition_fullname, m.environ, m.variable)
        verdict = (f"<span class=\"verdict {H.verdict_class(v.verdict)}\">"
                   f"{H.esc(cells[10])}</span>")
        name = (f"<a href=\"#{ids[key]}\">{H.esc(cells[3])}</a>" if key in ids
                else H.esc(cells[3]))
        rows.append([cells[0], cells[1], cells[2], name, *cells[4:10], verdict, _why(v.reason)])
    body += [f"<h2>Verdicts of run {H.esc(latest.run_id)}</h2>",
             H.table(["check", "partition", "environ", "figure", "value", "reference",
                      "bounds", "dev %", "MDC %", "noise (runs+nights, df)", "verdict",
                      "why (hover: all of it)"], rows,
                     numeric=(4, 5, 7, 8), raw=(3, 10, 11))]
    body.append(f"<h2>Trends over {len(runs)} run(s)</h2><p class=\"note\">One point per "
                "run (the median of its samples; the bar spans its samples), the reference "
                "and its bounds as the green band, level shifts dotted, a sustained step to "
                "worse in red, a change of the software stack dash-dotted.</p>")
    check = None
    for t in series:
        if t.check != check:
            body.append(("</div>" if check is not None else "")
                        + f"<h3>{H.esc(t.check)}</h3><div class=\"grid\">")
            check = t.check
        body.append(H.plot_div(ids[t.key]))
    if check is not None:
        body.append("</div>")
    body.append(f"<h2>Run {H.esc(latest.run_id)} by benchmark</h2><p class=\"note\">This "
                "run, its reference with the bounds as bars, and the run before it.</p>")
    bench = None
    for i, (name, _title, spec) in enumerate(plots.benchmark_views(vs, before)):
        if name != bench:
            body.append(("</div>" if bench is not None else "")
                        + f"<h3>{H.esc(name)}</h3><div class=\"grid\">")
            bench = name
        specs_js[f"b{i}"] = spec
        body.append(H.plot_div(f"b{i}", spec["layout"].get("height", 300)))
    if bench is not None:
        body.append("</div>")
    summary = f"{state} ({T.summary(vs)}); {len(series)} trend(s) over {len(runs)} run(s)"
    return H.page(f"hpc-health {site} {latest.run_id}", "\n".join(body), specs_js), code, summary


def compare(res: Any) -> bytes:
    """The compare page: the table, each check's intervals drawn, and the
    stack diff."""
    rank = {"REGRESSED": 0, "INCONCLUSIVE": 1, "IMPROVED": 2, "SAME": 3}
    rows = []
    for r in sorted(res.rows, key=lambda r: rank.get(r.word, 4)):
        ival = "-" if r.low is None else f"[{100 * r.low:+.1f}, {100 * r.high:+.1f}] %"
        rows.append([r.check, r.variable, r.partition_a if r.partition_a == r.partition_b
                     else f"{r.partition_a} = {r.partition_b}",
                     f"{T.fmt(r.centre_a)} {r.unit}", f"{T.fmt(r.centre_b)} {r.unit}",
                     f"{100 * r.change:+.1f} %", ival,
                     "-" if r.mdc is None else f"{100 * r.mdc:.0f} %",
                     f"<span class=\"verdict {H.verdict_class(r.word)}\">{H.esc(r.word)}</span>",
                     r.why])
    word = ("BROADLY WORSE" if res.broad is not None and res.broad.word == "BROADLY WORSE"
            else "REGRESSED") if res.exit_code else "no figure regressed"
    body = [f"<h1>hpc-health compare: <span class=\"verdict "
            f"{H.verdict_class('REGRESSED' if res.exit_code else 'SAME')}\">{H.esc(word)}"
            "</span></h1>", "<table class=\"meta\">",
            f"<tr><td>A</td><td>{H.esc(res.a.label)}</td></tr>",
            f"<tr><td>B</td><td>{H.esc(res.b.label)}</td></tr>",
            f"<tr><td>result</td><td>{H.esc(res.counts())}</td></tr>",
            f"<tr><td>all figures together</td><td>{H.esc(broad_line(res.broad))}</td></tr>",
            f"<tr><td>stack diff (A → B)</td><td>{_stack_lines(res.stack, res.specs)}</td></tr>",
            "</table>", "<h2>Figures</h2>",
            H.table(["check", "figure", "partition", "A", "B", "change", "interval (Holm)", "MDC",
                     "result", "why"], rows, numeric=(3, 4, 5, 6, 7), raw=(8,))]
    notes = [*res.notes] + [f"only in {side}: {', '.join(only)}"
                            for side, only in (("A", res.only_a), ("B", res.only_b)) if only]
    body += [f"<p class=\"note\">{H.esc(n)}</p>" for n in notes]
    body.append("<h2>Intervals by check</h2><div class=\"grid\">")
    specs: dict[str, dict[str, Any]] = {}
    by_check: dict[str, list] = {}
    for r in res.rows:
        by_check.setdefault(r.check, []).append(r)
    for i, (check, rs) in enumerate(by_check.items()):
        spec = plots.compare_intervals(rs, check)
        specs[f"c{i}"] = spec
        body.append(H.plot_div(f"c{i}", spec["layout"]["height"]))
    body.append("</div>")
    return H.page(f"hpc-health compare {res.a.label} / {res.b.label}", "\n".join(body), specs)
