"""``hpc-health compare``: two run sets compared, printed as a table or as
JSON."""

import json
import sys
from collections import defaultdict
from dataclasses import asdict

import click

from hpc_health.cli.common import say_note, site_option
from hpc_health.render import escape, table
from hpc_health.render.table import broad_line


def _partition_map(values):
    mapping = {}
    for item in values:
        a, sep, b = item.partition("=")
        if not (sep and a and b):
            raise click.BadParameter(f"{item!r}: write A_PART=B_PART", param_hint="--map")
        mapping[a] = b
    return mapping


@click.command()
@site_option
@click.argument("set_a", metavar="SET_A")
@click.argument("set_b", metavar="SET_B")
@click.option("--map", "maps", multiple=True, metavar="A_PART=B_PART",
              help="Match partition A_PART of SET_A with B_PART of SET_B (default: by name, "
                   "or the two partitions when each side has one).")
@click.option("--normalise", "--normalize", "normalise", is_flag=True,
              help="Show each figure also as a fraction of its partition's declared "
                   "capability (site.yaml capabilities).")
@click.option("--margin", type=click.FloatRange(0.001, 10), default=None,
              help="SAME only when the figure's interval lies within +-MARGIN "
                   "(fraction, default 0.10).")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
def compare(site, set_a, set_b, maps, normalise, margin, as_json):
    """Compare two run sets: before/after an upgrade on one site, or two sites.

    A run set is RUN_ID, latest, last:N, tag:NAME, since:DATE or A..B,
    optionally prefixed SITE: and suffixed @PARTITION (a bare site name: its
    latest run).  Each figure is judged on all samples of all runs of each
    set with the verdicts' noise model: REGRESSED, IMPROVED, SAME or
    INCONCLUSIVE (with why).  Exit 1 when any figure REGRESSED.
    """
    from hpc_health import stats
    from hpc_health.judge import comparison
    from hpc_health.site import sites
    from hpc_health.store import index, runsets
    with index.open_index() as idx:
        known = sites.available()
        sets = [runsets.resolve(idx, text, site, known) for text in (set_a, set_b)]
        for s in sets:
            say_note(idx.listing(s.site))
        res = comparison.compare(idx, *sets, mapping=_partition_map(maps),
                                 margin=stats.COMPARE_MARGIN if margin is None else margin,
                                 normalise=normalise)
    if as_json:
        click.echo(json.dumps(to_json(res), indent=1, sort_keys=True))
    else:
        click.echo(render(res, normalise))
    sys.exit(res.exit_code)


# --- output -----------------------------------------------------------------------

def render(res, normalise=False):
    # Imported here, as every command imports what it judges with: numpy and
    # scipy are not loaded for commands that do not need them.
    from hpc_health.judge.comparison import IMPROVED, INCONCLUSIVE, REGRESSED
    lines = [f"A = {res.a.label}", f"B = {res.b.label}"]
    renamed = {a: b for a, b in res.partition_map.items() if a != b}
    if renamed:
        lines.append("partitions matched: " + ", ".join(f"A {a} = B {b}"
                                                        for a, b in renamed.items()))
    header = ["check", "partition", "variable", "A", "B", "change", "interval",
              "MDC", "runs", "result"]
    if normalise:
        header[5:5] = ["A/declared", "B/declared"]
    body = []
    for r in res.rows:
        ival = "-" if r.low is None else f"[{100 * r.low:+.1f}, {100 * r.high:+.1f}] %"
        cells = [r.check, r.partition_b if r.partition_a == r.partition_b
                 else f"{r.partition_a}={r.partition_b}", r.variable,
                 f"{table.fmt(r.centre_a)} {r.unit}", f"{table.fmt(r.centre_b)} {r.unit}",
                 f"{100 * r.change:+.1f} %", ival,
                 "-" if r.mdc is None else f"{100 * r.mdc:.0f} %",
                 f"{r.runs_a}/{r.runs_b}", r.word]
        if normalise:
            cells[5:5] = [_pct(r.norm_a), _pct(r.norm_b)]
        body.append(cells)
    lines += table.columns(header, body)
    for r in res.rows:
        if r.word in (REGRESSED, IMPROVED):
            lines.append(f"{r.word}: {r.check} {r.variable}: {100 * r.change:+.1f} %, {r.why}")
    undecided = defaultdict(int)
    for r in res.rows:
        if r.word == INCONCLUSIVE:
            undecided[r.why.split(":")[0] if r.p_value is None else "mdc"] += 1
    for r in res.rows:
        key = r.why.split(":")[0] if r.p_value is None else "mdc"
        if r.word == INCONCLUSIVE and undecided.pop(key, 0):
            lines.append(f"INCONCLUSIVE: {r.check} {r.variable}: {r.why}"
                         + (" (and similar for other figures)" if key == "mdc" else ""))
    for side, only in (("A", res.only_a), ("B", res.only_b)):
        if only:
            lines.append(f"only in {side} ({len(only)}): {', '.join(only[:8])}"
                         + (" …" if len(only) > 8 else ""))
    lines += res.notes
    if res.rows:
        lines.append("interval: the one each result was decided on, at the figure's level in "
                     f"Holm's procedure over {sum(r.level is not None for r in res.rows)} "
                     "figures (95 % before the correction); SAME: inside ±margin")
    lines.append(broad_line(res.broad))
    lines.append("")
    if res.stack or res.specs:
        lines.append("stack diff (A -> B):")
        for what, a, b in res.stack:
            lines.append(f"  {what}: {a} -> {b}")
        for change, name, a, b in res.specs:
            lines.append(f"  spack {change} {name}: {a} -> {b}")
    else:
        lines.append("stack diff: none (same Spack specs, compiler, MPI, kernel, versions "
                     "and nodes)")
    lines.append("")
    broad = f"; {res.broad.word}" if res.broad is not None else ""
    lines.append(f"hpc-health compare: {res.counts()}{broad}; exit {res.exit_code}")
    # Names, units, notes and the stack come from stored or imported runs.
    return "\n".join(escape.one_line(line) for line in lines)


def _pct(frac):
    return "-" if frac is None else f"{100 * frac:.0f} %"


def to_json(res):
    def side(s):
        return {"text": s.text, "site": s.site, "partition": s.partition,
                "runs": [r.run_id for r in s.runs]}
    rows = [asdict(r) for r in res.rows]
    return {"format": "hpc-health-compare/1", "a": side(res.a), "b": side(res.b),
            "partition_map": res.partition_map, "rows": rows,
            "only_a": res.only_a, "only_b": res.only_b,
            "stack": [{"what": w, "a": a, "b": b} for w, a, b in res.stack],
            "specs": [{"change": c, "name": n, "a": a, "b": b} for c, n, a, b in res.specs],
            "notes": res.notes, "exit_code": res.exit_code,
            "broad": asdict(res.broad) if res.broad is not None else None}
