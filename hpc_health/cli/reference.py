"""``hpc-health reference capture`` and ``reference show``."""

import click

from hpc_health.cli.common import site_option
from hpc_health.errors import ConfigError
from hpc_health.render import escape


@click.group()
def reference():
    """Capture and show a site's references."""


@reference.command("capture")
@site_option
@click.option("--partition", "-p", help="Capture this partition only.")
@click.option("--runs", "nruns", type=click.IntRange(1, 200), help="Measure N new runs.")
@click.option("--from", "from_runs", multiple=True, metavar="SET",
              help="Reuse stored runs instead of measuring: run sets (a run id, tag:NAME, "
                   "last:N, A..B, ...; repeatable, or comma-separated).")
@click.option("--only-tag", "-T", "tags", multiple=True,
              help="Only checks with this ReFrame tag (new runs).")
@click.option("--rounds", type=click.IntRange(1, 100),
              help="Rounds per new run, as `run --rounds` (default: the site's rounds, else 1); "
                   "capture with the rounds the nightly runs use.")
@click.option("--check", "checks", multiple=True, metavar="CHECK",
              help="Capture only this check's figures (repeatable; new runs measure it "
                   "alone): a re-baseline after a change you accept; the site's other "
                   "references stay as they are.")
@click.option("--write", is_flag=True, help="Write the proposal into reference/<site>.yaml.")
@click.argument("reframe_args", nargs=-1, type=click.UNPROCESSED)
def reference_capture(site, partition, nruns, from_runs, tags, rounds, checks, write,
                      reframe_args):
    """Propose references from N new runs or from stored runs.

    value = geometric mean of the runs' figures (each the Huber location of
    its samples); bound = the change the nightly gate fails one night on,
    from the runs' spread under the site's false_alarm_budget, at least 3 %
    (or the check's least change).  A figure in which the gate could catch
    only a tenfold change is left out, with its spread.  Prints a diff; writes
    only with --write.
    """
    import io
    import re

    from hpc_health.run import preflight, session
    from hpc_health.store import capture, capture_lines, references, rundirs
    s, old = preflight.validate(site, partition)
    if bool(nruns) == bool(from_runs):
        raise click.UsageError("give either --runs N or --from RUN ...")
    if from_runs:
        if reframe_args or tags or rounds:
            raise click.UsageError("stored runs are not re-run: unexpected "
                                   f"{' '.join(reframe_args or tags) or '--rounds'!r} "
                                   "(give several runs as --from A --from B or --from A,B)")
        chosen = capture.stored_runs(s.name, [r for item in from_runs
                                              for r in item.split(",") if r])
    else:
        # New runs measure the named checks alone (ReFrame's -n matches the
        # display name with its spaces taken out: "HaloExchange%dims=2...").
        reframe_args = (*reframe_args, *(arg for c in checks
                                         for arg in ("-n", f"^{re.escape(c)}(%|$)")))
        chosen = []
        for i in range(nruns):
            click.echo(f"capture: run {i + 1}/{nruns} ...", err=True)
            log = io.StringIO()
            code = session.run(s.name, partition, tags, reframe_args, out=log, rounds=rounds)
            run_dir, meta = rundirs.list_runs(s.name)[-1]
            click.echo(f"capture: run {i + 1}/{nruns}: {run_dir.name} exit {code} "
                       f"({meta.get('verdicts', '')})", err=True)
            if code >= session.EXIT_INTERRUPTED:
                raise SystemExit(code)
            chosen.append((run_dir, meta))
    found = capture.collect([d for d, _ in chosen], partition)
    if not found:
        raise ConfigError(rundirs.runs_dir(s.name), "the chosen runs hold no performance figures")
    if checks:
        found = _only(found, checks)
    proposals = capture.propose(found, [m.get("stack_hash") for _, m in chosen],
                                [m.get("rounds") or 1 for _, m in chosen],
                                s.settings.get("reference_max_mdc") or capture.MAX_MDC,
                                s.settings.get("false_alarm_budget") or capture.FALSE_ALARM_BUDGET,
                                s.settings.get("budget_weights"),
                                capture.kept_checks(old, found))
    for line in capture_lines.diff_lines(old, proposals):
        click.echo(escape.one_line(line))     # names from the stored runs
    click.echo(capture_lines.summary_line(proposals))
    note = capture_lines.span_note([str(m.get("started") or "") for _, m in chosen])
    if note:
        click.echo(note, err=True)
    if not capture.summary(proposals)[0]:
        click.echo("capture: no figure of these runs can be given a reference (reasons above); "
                   "nothing written", err=True)
        raise SystemExit(1)
    if write:
        data = references.merge(references.load_raw(s.reference_file), proposals,
                             capture.hardware_of([m for _, m in chosen], partition))
        references.write(s.reference_file, data)
        click.echo(f"wrote {s.reference_file}")
    else:
        click.echo("(not written: add --write)")


def _only(found, checks):
    """The figures of *checks* among those the chosen runs hold."""
    present = sorted({key[0] for key in found})
    missing = [c for c in checks if c not in present]
    if missing:
        raise click.UsageError(f"--check {missing[0]}: no figure of it in the chosen runs "
                               f"(they hold {', '.join(present)})")
    return {key: entry for key, entry in found.items() if key[0] in checks}


@reference.command("show")
@site_option
def reference_show(site):
    """Print a site's references with their provenance."""
    from hpc_health.run import preflight
    s, refs = preflight.validate(site)
    if refs is None:
        raise ConfigError(s.reference_file, "no reference file for this site")
    for test, (index, data) in refs.tests.items():
        click.echo(f"{test}  (index: {', '.join(index)})")
        for path, leaf in _leaves(data, len(index)):
            var = path[-1]
            key = "/".join(str(k) for k in path)
            prov = refs.provenance.get(test, {}).get(key, {})
            value, lower, upper = leaf[0], leaf[1], leaf[2]
            unit = leaf[3] if len(leaf) > 3 else ""
            bounds = f"[{'-inf' if lower is None else f'{100 * lower:+.0f}%'}, " \
                     f"{'+inf' if upper is None else f'{100 * upper:+.0f}%'}]"
            info = ", ".join(f"{k} {_shown(k, v)}"
                             for k, v in prov.items() if k in
                             ("captured", "runs", "samples", "night_spread", "night_df",
                              "prior_df", "effective", "check_figures", "check_correlation",
                              "spread", "between_run_spread", "stack",
                              "estimator", "mdc", "mdc_one_night", "levels", "level_runs"))
            click.echo(f"  {'/'.join(str(k) for k in path[:-1])}  {var} = {value:g} {unit} "
                       f"{bounds}  {info or 'no provenance'}")
            if prov.get("weak"):
                click.echo(f"      WEAK: {prov['weak']}")
    left = [(test, key, prov["no_reference"]) for test, entries in refs.provenance.items()
            for key, prov in entries.items() if prov.get("no_reference")]
    if left:
        click.echo(f"No reference ({len(left)}):")
        for test, key, why in left:
            click.echo(escape.one_line(f"  {test} {key}: {why}"))


def _leaves(node, depth, path=()):
    for key, val in node.items():
        if depth > 0:
            yield from _leaves(val, depth - 1, path + (key,))
        else:
            yield path + (key,), val


def _shown(key, value):
    """A provenance field as `reference show` lists it."""
    if key == "levels":
        return "/".join(f"{x:g}" for x in value)
    return len(value) if isinstance(value, list) else value
