"""``hpc-health history``: the series of a figure, with its change points."""

import sys

import click

from hpc_health.cli.common import say_note, site_option
from hpc_health.errors import ConfigError


@click.command()
@site_option
@click.option("--check", "-c", help="Test class or display name.")
@click.option("--var", "-v", "var", help="Performance variable.")
@click.option("--all", "scan_all", is_flag=True,
              help="Scan every figure of the latest run for sustained steps.")
@click.option("--partition", "-p")
@click.option("--runs", "run_set", metavar="SET",
              help="Only these runs (a run set: last:N, since:DATE, tag:NAME, A..B).")
def history(site, check, var, scan_all, partition, run_set):
    """The series of one figure over the stored runs, with change points.

    Exit 1 when a sustained step to worse is found (the nightly drift check).
    """
    from hpc_health.judge import history as hist
    from hpc_health.site import sites
    from hpc_health.store import index, references, runsets
    s = sites.load(site)
    # The stored reference is the healthy level and the noise a step is
    # measured against; without it the series is its own yardstick.
    refs = references.load(s.reference_file) if s.reference_file.exists() else None
    if scan_all == bool(check or var) or (not scan_all and not (check and var)):
        raise click.UsageError("give --check C --var V, or --all")
    with index.open_index() as idx:
        listing = idx.listing(s.name)
        runs = runsets.resolve(idx, run_set, s.name).runs if run_set else listing.runs
        if scan_all:
            latest = idx.figures(runs[-1:], partition=partition) if runs else []
            pairs = sorted({(m.check, m.variable) for m in latest})
        else:
            pairs = [(check, var)]
        worst = 0
        for chk, v in pairs:
            points = hist.series(idx, runs, chk, v, partition)
            if not points:
                say_note(listing)
                raise ConfigError(s.dir, f"no stored figure for {chk} {v}")
            worst |= _history_of(chk, v, points, refs, scan_all)
    if scan_all and not worst:
        click.echo(f"no sustained step in {len(pairs)} figure(s)")
    say_note(listing)
    sys.exit(worst)


def _history_of(chk, v, points, refs, scan_all):
    from hpc_health.judge import history as hist
    worst = 0
    by_check = {}
    for p in points:
        by_check.setdefault((p["check"], p["partition"]), []).append(p)
    for (name, part), pts in by_check.items():
        step = hist.drift(pts, refs)
        if not scan_all:
            start = hist.reference_start(refs, pts)
            click.echo(f"{name} {v} on {part}")
            click.echo(f"  steps looked for from run {pts[start]['run']}, where its reference's "
                       "baseline begins" if 0 < start < len(pts) else
                       "  no run since its reference was captured" if start else
                       "  steps looked for over all its runs")
            for i, p in enumerate(pts):
                click.echo(f"  {i:3d}  {p['run']}  {p['started']}  {p['value']:.4g} "
                           f"{p['unit']}  stack {p['stack'] or '-'}")
        if step:
            at = pts[step["index"]]
            click.echo(f"{'  ' if not scan_all else name + ' ' + v + ' on ' + part + ': '}"
                       f"DEGRADED since run {at['run']} ({at['started']}): "
                       f"{100 * step['magnitude']:+.1f}% worse, sustained over "
                       f"{step['nights']} run(s)")
            worst = 1
        elif not scan_all:
            click.echo("  no sustained step found")
    return worst
