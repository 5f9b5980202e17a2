"""``hpc-health nodes --html``: the per-node page.  A grid of node × night,
each cell coloured by the node's verdict that night (OUTLIER, healthy
among its peers, not in that run), marked where hpc-health drained or
resumed it, the evidence on hover; then each node's record as
``hpc-health nodes`` prints it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hpc_health.render import html_page as H

_STYLE = """<style>
table.nodes td.cell { text-align: center; min-width: 3.2em; border: 1px solid #fff; }
table.nodes th.run { writing-mode: vertical-rl; transform: rotate(180deg); font-weight: normal; }
</style>"""


def _cell(night: Any) -> str:
    if night is None:
        return '<td class="cell other" title="not in this run">·</td>'
    word = "OUTLIER" if night.outliers else "PASS"
    hover = [f"{night.node} in run {night.run_id}: {word}"]
    hover += [f"{c} {v} {100 * ch:+.0f}% vs peers" for c, v, ch in night.outliers]
    mark = ""
    if night.drained:
        hover.append(f"drained: {night.drained}")
        mark += " ⬇"
    if night.resumed:
        hover.append("resumed by hpc-health")
        mark += " ⬆"
    text = ("out" if night.outliers else "ok") + mark
    return (f'<td class="cell {H.verdict_class(word)}" title="{H.esc(chr(10).join(hover))}">'
            f"{H.esc(text)}</td>")


def page(site: str, runs: Sequence[Any], records: Sequence[Any], rows: Sequence[Sequence[str]]
         ) -> bytes:
    """The page for *records* (:func:`hpc_health.judge.noderecord.records`
    over *runs*, oldest first); *rows* the record table (header first)."""
    head = "".join(f'<th class="run" title="{H.esc(r.run_id)}">{H.esc(r.started[:16])}</th>'
                   for r in runs)
    grid = [f'<table class="nodes"><thead><tr><th>node</th>{head}</tr></thead><tbody>']
    for rec in records:
        nights = {n.run_id: n for n in rec.nights}
        grid.append(f"<tr><td>{H.esc(rec.node)}</td>"
                    + "".join(_cell(nights.get(r.run_id)) for r in runs) + "</tr>")
    grid.append("</tbody></table>")
    body = [_STYLE, f"<h1>hpc-health: {H.esc(site)}, node by node</h1>",
            f"<p class=\"note\">{len(runs)} per-node run(s), {H.esc(runs[0].run_id)} to "
            f"{H.esc(runs[-1].run_id)}.  Each cell is one node in one run: "
            "<span class=\"verdict bad\">out</span> named OUTLIER against its peers, "
            "<span class=\"verdict good\">ok</span> not, · not in that run; ⬇ drained and "
            "⬆ resumed by hpc-health.  Hover a cell for the checks, the change against the "
            "peers and the drain reason.</p>", *grid,
            "<h2>Each node's record</h2>", H.table(rows[0], rows[1:])]
    return H.page(f"hpc-health {site} nodes", "\n".join(body), {})
