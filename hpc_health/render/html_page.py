"""One self-contained HTML page: plotly.js inlined once, every picture's
specification as JSON beside it, drawn when it scrolls into view (a year of
runs is ~140 trends: drawn at once they would hold the first paint for
many seconds).  Opens from disk with no network; SVG traces only (headless
browsers allow about 16 WebGL contexts a page)."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

from hpc_health.render import escape

#: In the page: how many plots are drawn, the time of the first screenful
#: (ms since navigation), and errors caught; the browser test reads them.
_LOADER = """
(function () {
  const specs = JSON.parse(document.getElementById('hh-specs').textContent);
  const body = document.body;
  body.dataset.drawn = 0;
  window.addEventListener('error', function (e) {
    body.dataset.errors = (body.dataset.errors || '') + e.message + '\\n';
  });
  function draw(div) {
    if (div.dataset.state) return Promise.resolve();
    div.dataset.state = 'drawing';
    const s = specs[div.id];
    return Plotly.newPlot(div, s.data, s.layout,
                          {displaylogo: false, responsive: true}).then(function () {
      div.dataset.state = 'drawn';
      body.dataset.drawn = Number(body.dataset.drawn) + 1;
    });
  }
  const plots = Array.from(document.querySelectorAll('div.hh-plot'));
  const everything = location.hash === '#all';
  function firstPaint() {
    body.dataset.firstPaintMs = Math.round(performance.now());
  }
  if (everything || !('IntersectionObserver' in window)) {
    plots.reduce(function (p, div) { return p.then(function () { return draw(div); }); },
                 Promise.resolve()).then(function () { firstPaint(); body.dataset.done = 1; });
    return;
  }
  let first = true;
  const seen = new IntersectionObserver(function (entries) {
    const batch = entries.filter(function (e) { return e.isIntersecting; })
                         .map(function (e) { seen.unobserve(e.target); return draw(e.target); });
    if (first) { first = false; Promise.all(batch).then(firstPaint); }
  }, {rootMargin: '600px'});
  plots.forEach(function (div) { seen.observe(div); });
  window.addEventListener('beforeprint', function () { plots.forEach(draw); });
})();
"""

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.2em 2em; color: #222; }
h1 { font-size: 1.5em; margin-bottom: .2em; } h2 { margin-top: 1.6em; }
.verdict { font-weight: bold; padding: .1em .5em; border-radius: 3px; }
.bad { background: #f6d5d1; color: #8b1a10; } .good { background: #d8efe0; color: #1d5e36; }
.other { background: #eee; color: #444; }
table { border-collapse: collapse; font-size: 12.5px; }
td, th { border-bottom: 1px solid #ddd; padding: 2px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 10px; }
div.hh-plot { min-height: 300px; border: 1px solid #eee; }
.meta td:first-child { color: #666; } .note { color: #666; } code { font-size: 12px; }
"""


def esc(x: Any) -> str:
    """Text for HTML: markup escaped, control characters shown as escapes."""
    return html.escape(escape.lines("" if x is None else str(x)))


def verdict_class(verdict: str) -> str:
    if verdict in ("DEGRADED", "FAIL", "OUTLIER", "REGRESSED", "UNHEALTHY"):
        return "bad"
    return "good" if verdict in ("PASS", "IMPROVED", "SAME", "HEALTHY") else "other"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[int] = (),
          raw: Sequence[int] = ()) -> str:
    """An HTML table; cells escaped except the columns in *raw* (markup
    built here)."""
    out = ["<table><thead><tr>", *(f"<th>{esc(h)}</th>" for h in header),
           "</tr></thead><tbody>"]
    for row in rows:
        out.append("<tr>")
        for i, cell in enumerate(row):
            cls = ' class="num"' if i in numeric else ""
            out.append(f"<td{cls}>{cell if i in raw else esc(cell)}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def plot_div(plot_id: str, height: int = 300) -> str:
    return f'<div class="hh-plot" id="{esc(plot_id)}" style="min-height:{height}px"></div>'


def page(title: str, body: str, specs: dict[str, dict[str, Any]]) -> bytes:
    """The whole document.  *specs* maps each plot div's id to its plotly
    figure; plotly.js is read from the installed plotly package."""
    from plotly.offline import get_plotlyjs
    data = json.dumps(specs, separators=(",", ":"), allow_nan=False)
    # JSON in a <script> element: only "</" can end it early.
    data = data.replace("</", "<\\/")
    doc = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
           f"<title>{esc(title)}</title><style>{_STYLE}</style></head><body>\n{body}\n"
           f"<script>{get_plotlyjs()}</script>\n"
           f"<script type=\"application/json\" id=\"hh-specs\">{data}</script>\n"
           f"<script>{_LOADER}</script>\n</body></html>\n")
    return doc.encode("utf-8")
