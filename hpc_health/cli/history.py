"""``hpc-health history``: the series of a figure, with its change points."""

import sys

import click

from hpc_health.cli.common import say_note, site_option
from hpc_health.errors import ConfigError
from hpc_health.model.figures import as_read
from hpc_health.render import escape


@click.command()
@site_option
@click.option("--check", "-c", help="Test class or display name.")
@click.option("--var", "-v", "var", help="Performance variable.")
@click.option("--all", "scan_all", is_flag=True,
              help="Scan every figure of the latest run for sustained steps over the last "
                   "60 runs, as the nightly run's drift test does (--runs for others).")
@click.option("--partition", "-p")
@click.option("--runs", "run_set", metavar="SET",
              help="Only these runs (a run set: last:N, since:DATE, tag:NAME, A..B).")
def history(site, check, var, scan_all, partition, run_set):
    """The series of one figure over the stored runs, with change points.

    Exit 1 when a sustained step to worse is found (the nightly drift check).
    """
    from hpc_health.judge import history as hist
    from hpc_health.judge.drift import DRIFT_NIGHTS
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
            # The nightly test's window unless a run set says otherwise: the
            # same nights (a run dated in the future is none), the same
            # answer as the night's DRIFTING.
            nights = runs if run_set else \
                [r for r in runs if runsets.ahead(r) is None][-DRIFT_NIGHTS:]
            worst = _scan_all(idx, nights, refs, partition)
        else:
            points = hist.series(idx, runs, check, var, partition)
            if not points:
                say_note(listing)
                raise ConfigError(s.dir, f"no stored figure for {check} {var}")
            worst = _history_of(var, points, refs)
    say_note(listing)
    sys.exit(worst)


def _scan_all(idx, runs, refs, partition):
    """Every figure of the latest run, each series in one read of the index
    (the nightly drift test's: :func:`hpc_health.judge.trends.trends`)."""
    from hpc_health.judge import trends
    latest = runs[-1].run_id if runs else None
    found = [t for t in trends.trends(idx, runs, refs, level_shifts=False, samples=False)
             if t.runs[-1] == latest
             and (not partition or partition in (t.partition, t.partition.split(":")[-1]))]
    found.sort(key=lambda t: (t.check, t.variable, t.partition))
    for t in found:
        step = t.worse_since
        if step:
            click.echo(escape.one_line(f"{t.check} {t.variable} on {t.partition}: "
                                       + _degraded(step["run"], t.started[step["index"]], step,
                                                         t.better)))
    if not any(t.worse_since for t in found):
        click.echo(f"no sustained step in {len(found)} figure(s)")
        return 0
    return 1


def _degraded(run, started, step, better=None):
    return (f"DEGRADED since run {run} ({started}): "
            f"{100 * as_read(step['magnitude'], better):+.1f} %, "
            f"sustained over {step['nights']} run(s)")


def _looked_for(pts, start, after):
    if start >= len(pts):
        return "  no run since its reference was captured"
    if not after:
        return "  steps looked for over all its runs"
    since = (f"run {escape.one_line(pts[after]['run'])} on" if after < len(pts)
             else "none yet")
    return (f"  steps looked for from run {escape.one_line(pts[start]['run'])}, where its "
            f"reference's baseline begins, starting after its capture ({since})")


def _history_of(v, points, refs):
    from hpc_health.judge import history as hist
    worst = 0
    by_check = {}
    for p in points:
        by_check.setdefault((p["check"], p["partition"]), []).append(p)
    for (name, part), pts in by_check.items():
        step = hist.drift(pts, refs)
        start, after = hist.capture_bounds(refs, pts)
        click.echo(escape.one_line(f"{name} {v} on {part}"))
        click.echo(_looked_for(pts, start, after))
        for i, p in enumerate(pts):
            click.echo(escape.one_line(f"  {i:3d}  {p['run']}  {p['started']}  {p['value']:.4g} "
                                       f"{p['unit']}  stack {p['stack'] or '-'}"))
        if step:
            at = pts[step["index"]]
            click.echo("  " + escape.one_line(_degraded(at["run"], at["started"], step,
                                                                at.get("better"))))
            worst = 1
        else:
            click.echo("  no sustained step found")
    return worst
