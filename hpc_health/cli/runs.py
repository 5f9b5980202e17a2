"""Commands about runs: ``run``, ``validate``, ``report`` and ``runs``."""

import sys
from pathlib import Path

import click

from hpc_health.cli.common import Ticker, dated_ahead, say_note, site_option
from hpc_health.errors import ConfigError
from hpc_health.render import escape


@click.command(context_settings={"ignore_unknown_options": False})
@site_option
@click.option("--partition", "-p", help="Run on this partition only.")
@click.option("--tag", "-t", "run_tags", multiple=True, metavar="TAG",
              help="Label this run (repeatable): run sets select it as tag:TAG.")
@click.option("--note", default="", metavar="TEXT", help="A line kept with the run.")
@click.option("--only-tag", "-T", "tags", multiple=True, metavar="TAG",
              help="Only checks with this ReFrame tag (repeatable; ReFrame's -t).")
@click.option("--list", "list_only", is_flag=True, help="List the checks that would run.")
@click.option("--per-node", is_flag=True,
              help="Run single-node checks on every node of the partition and flag outlier nodes.")
@click.option("--drain", is_flag=True,
              help="With --per-node: drain each node named OUTLIER in Slurm (scontrol), with "
                   "a reason in numbers, within the guards of docs/per-node.md (site setting "
                   "per_node_drain).  Without it the run prints the command.")
@click.option("--resume-healthy", is_flag=True,
              help="With --per-node: test again the nodes hpc-health drained (under a "
                   "maintenance reservation) and resume those found healthy; never a node "
                   "drained by anyone else (site setting per_node_resume_healthy).")
@click.option("--rounds", type=click.IntRange(1, 100),
              help="Run the whole session N times and judge the pooled samples "
                   "(default: the site's per_node_rounds with --per-node, else its "
                   "rounds, else 1).")
@click.option("--tuning", is_flag=True,
              help="Also run the tuning sweeps (ReFrame tag `tuning`: MPI-IO hints, collective "
                   "algorithms, start-up against scale; docs/tuning.md).  Without it they run "
                   "only when selected: -T tuning, or by name after `--`.")
@click.option("--adopt-baseline", is_flag=True,
              help="When this run completes a baseline on hardware without references, "
                   "write them into reference/<site>.yaml at once.")
@click.argument("reframe_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def run(ctx, site, partition, run_tags, note, tags, list_only, per_node, drain,
        resume_healthy, rounds, tuning, adopt_baseline, reframe_args):
    """Run the health checks of a site and print the health table.

    Arguments after `--` go to ReFrame unchanged.
    """
    if (drain or resume_healthy) and not per_node:
        raise click.UsageError("--drain and --resume-healthy act on a --per-node run's "
                               "findings: add --per-node")
    from hpc_health.run import session
    sys.exit(session.run(site, partition, tags, reframe_args, list_only, per_node,
                        rounds=rounds, adopt_baseline=adopt_baseline,
                        chosen_because=ctx.meta.get("site_chosen_because", "--site"),
                        run_tags=run_tags, note=note, tuning=tuning, drain=drain,
                        resume_healthy=resume_healthy))


@click.command()
@site_option
def validate(site):
    """Validate a site's configuration and reference file without running."""
    from hpc_health.run import preflight
    s, refs = preflight.validate(site, figures=True)
    click.echo(f"{s.settings_file}: ok ({len(s.partitions)} partition(s))")
    if refs is not None:
        click.echo(f"{refs.path}: ok ({len(refs.tests)} test(s) with references)")
    else:
        click.echo(f"{s.reference_file}: absent (every figure will be NO-REFERENCE)")


@click.command()
@site_option
@click.argument("run_sets", metavar="[SET] [SET_B]", nargs=-1)
@click.option("--html", "html_file", metavar="FILE",
              help="Write one self-contained HTML page instead: the verdict table, each "
                   "figure's trend over the set (default: every stored run) and the latest run "
                   "by benchmark; with two sets, their comparison.")
@click.option("--markdown", is_flag=True,
              help="Markdown instead of the table: the verdict line, the DEGRADED/FAIL rows "
                   "and what of the software stack changed since the run before (job logs, "
                   "merge-request comments).")
@click.option("--junit", "junit_file", metavar="FILE",
              help="Also write JUnit XML: every judged figure a test case, DEGRADED/FAIL a "
                   "failure with its reason (CI test views).")
def report(site, run_sets, html_file, markdown, junit_file):
    """Print the health table of a stored run (default: the latest
    readable one), or of each run of a run set (tag:NAME, last:N, ...).

    With --html FILE, write the set's health report as one HTML file that
    opens from disk with no network; with two sets and --html, the page of
    their comparison (as `hpc-health compare`)."""
    if len(run_sets) > 2 or (len(run_sets) == 2 and not html_file):
        raise click.UsageError("give one run set, or two with --html FILE "
                               "(`hpc-health compare A B` prints two sets' comparison)")
    if html_file:
        if markdown or junit_file:
            raise click.UsageError("--html does not combine with --markdown or --junit")
        sys.exit(_html(site, run_sets, html_file))
    run_set = run_sets[0] if run_sets else None
    from hpc_health.judge import comparison, verdicts
    from hpc_health.model import results
    from hpc_health.render import summaries, table
    from hpc_health.run import preflight
    from hpc_health.site import sites
    from hpc_health.store import index, rundirs, runsets
    from hpc_health.store import judged as stored
    s, refs = preflight.validate(site)
    with index.open_index() as idx:
        listing = idx.listing(s.name)
        say_note(listing)
        damaged = {rid: why for _, rid, why in listing.damaged}
        if run_set in damaged:
            raise ConfigError(rundirs.runs_dir(s.name) / run_set,
                              f"damaged run: {damaged[run_set]}")
        if run_set:
            chosen = runsets.resolve(idx, run_set, s.name, sites.available())
            runs = chosen.runs
            if chosen.site != s.name:
                other = sites.load(chosen.site) if chosen.site in sites.available() else None
                refs = preflight.validate(other.name)[1] if other else None
        else:
            runs = runsets.latest(listing.runs)
    if not runs:
        raise ConfigError(rundirs.runs_dir(s.name), runsets.unreadable(listing, s.name))
    code = 0
    judged = []
    order = [x.run_id for x in listing.runs]
    for r in runs:
        rep = results.load_report(r.dir / "report.json")
        measured = results.measurements(rep)
        vs = stored.verdicts_of(r, refs, s.settings, rep)
        if r.meta.get("per_node"):
            vs = verdicts.node_outliers(vs, s.settings.get("per_node_min_change"))
        judged.append((r.run_id, vs))
        code = max(code, verdicts.exit_code(vs))
        if markdown:
            at = order.index(r.run_id) if r.run_id in order else 0
            prev = listing.runs[at - 1] if at > 0 else None
            stack, specs = ([], []) if prev is None else comparison.stack_diff(
                [prev], [r], [results.measurements(results.load_report(prev.dir / "report.json")),
                              measured])
            click.echo(summaries.markdown(r.site, r.run_id, vs, stack, specs,
                                          prev.run_id if prev else None, dated_ahead(r)))
            continue
        tags = f", tags {','.join(r.tags)}" if r.tags else ""
        ahead = f"; {dated_ahead(r)}" if dated_ahead(r) else ""
        click.echo(escape.one_line(f"run {r.run_id} on {r.meta.get('hostname')} started "
                                   f"{r.meta.get('started')}{tags}{ahead}"))
        click.echo(table.render(vs))
        # What the run found across nights, as it found it (not re-tested).
        for d in r.meta.get("drifting") or ():
            click.echo(escape.one_line(
                f"DRIFTING  {d['check']}  {d['variable']} on {d['partition']}: since run "
                f"{d['since']}: {100 * d['change']:+.1f} %, {d['runs']} runs (found by this run)"))
    if junit_file:
        ahead = {r.run_id: dated_ahead(r) for r in runs if dated_ahead(r)}
        written = summaries.write_atomically(junit_file, summaries.junit(s.name, judged, ahead))
        click.echo(f"wrote {written} ({sum(len(vs) for _, vs in judged)} test cases)", err=True)
        for rid, why in ahead.items():
            click.echo(f"hpc-health: run {escape.one_line(rid)} is {why}", err=True)
    sys.exit(code)



@click.command("runs")
@site_option
@click.argument("run_set", metavar="[SET]", required=False, default="since:0001-01-01")
@click.option("--ids", "ids_only", is_flag=True, help="Print only the run ids.")
def runs_cmd(site, run_set, ids_only):
    """List stored runs (of a run set: last:N, tag:NAME, since:DATE, A..B,
    ...) with their tags, notes and verdicts; exit 2 when the set is
    unknown or empty."""
    from hpc_health.store import index, runsets
    with index.open_index() as idx:
        rs = runsets.resolve(idx, run_set, site)
        say_note(idx.listing(rs.site))
    for r in rs.runs:
        if ids_only:
            click.echo(escape.one_line(r.run_id))
            continue
        m = r.meta
        tags = ",".join(r.tags)
        # Each field one line: a tag or a note from an imported run must
        # not forge a line of this listing, nor reach the terminal raw.
        click.echo(escape.one_line(
            f"{rs.site}:{r.run_id}  {m.get('started', '')}  exit {m.get('exit_code')}  "
            f"{m.get('verdicts', '')}" + (f"  tags {tags}" if tags else "")
            + (f"  note {m['note']!r}" if m.get("note") else "")
            + ("  (imported)" if m.get("imported") else "")
            + (f"  {dated_ahead(r)}" if dated_ahead(r) else "")))


def _html(site, run_sets, html_file):
    from hpc_health.judge import comparison
    from hpc_health.render import html_report, summaries
    from hpc_health.run import preflight
    from hpc_health.site import sites
    from hpc_health.store import index, rundirs, runsets
    s, refs = preflight.validate(site)
    out = Path(html_file)
    if not out.parent.is_dir():
        # Before minutes of work: a path that cannot be written.
        raise ConfigError(out, f"no directory {out.parent}: create it first")
    with index.open_index() as idx:
        known = sites.available()
        if len(run_sets) == 2:
            sets = [runsets.resolve(idx, text, site, known) for text in run_sets]
            for one in sets:
                say_note(idx.listing(one.site))
            res = comparison.compare(idx, *sets)
            written = summaries.write_atomically(out, html_report.compare(res))
            click.echo(f"wrote {written}: {res.counts()}; exit {res.exit_code}", err=True)
            return res.exit_code
        listing = idx.listing(s.name)
        say_note(listing)
        if run_sets:
            chosen = runsets.resolve(idx, run_sets[0], s.name, known)
            if chosen.site != s.name:
                raise ConfigError(run_sets[0], "--html draws one site's runs: give "
                                  f"--site {chosen.site}")
            runs = chosen.runs
        else:
            runs = listing.runs
        if not runs:
            raise ConfigError(rundirs.runs_dir(s.name), "no stored run with a readable report")
        damaged = [(rid, why) for _, rid, why in listing.damaged]
        page, code, summary = html_report.health(
            idx, s.name, runs, refs, damaged, s.settings.get("per_node_min_change"),
            s.settings, Ticker("report: trends", 0))
    written = summaries.write_atomically(out, page)
    click.echo(f"wrote {written} ({len(page) / 1e6:.1f} MB): {summary}", err=True)
    return code

