"""The ``hpc-health`` command.

Exit codes (for CI): 0 healthy, 1 a performance degradation or a failed
check, 2 a usage or configuration error, 130 interrupted.
"""

import json
import sqlite3
import subprocess
import sys

import click

from hpc_health import __version__, parsers
from hpc_health.errors import ConfigError


class _Group(click.Group):
    """Turns configuration errors into one clear line and exit code 2."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except ConfigError as err:
            click.echo(f"hpc-health: error: {err}", err=True)
            ctx.exit(2)
        except sqlite3.Error as err:
            click.echo(f"hpc-health: error: the store's index: {err}: try again, or delete "
                       "index.sqlite in the store (it is rebuilt from the run directories)",
                       err=True)
            ctx.exit(2)
        except OSError as err:
            # A full or read-only file system, a directory we may not write:
            # one line naming the file, and nothing half-written (every
            # store write is atomic).
            where = err.filename or "?"
            click.echo(f"hpc-health: error: {where}: {err.strerror or err}: free space or "
                       "choose another directory (HPC_HEALTH_STORE)", err=True)
            ctx.exit(2)


def _resolve_site(ctx, param, value):
    from hpc_health.site import sites
    name, why = sites.choose(value)
    ctx.meta["site_chosen_because"] = why
    return name


def site_option(f):
    return click.option(
        "--site", callback=_resolve_site, metavar="SITE",
        help="Site folder under site_configs/ (default: $HPC_HEALTH_SITE, else the site "
             "whose ReFrame hostnames match this host, else local).")(f)


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="hpc-health")
def cli():
    """Nightly HPC health: ReFrame checks built through Spack, judged
    against per-site references."""


@cli.command(context_settings={"ignore_unknown_options": False})
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
@click.option("--rounds", type=click.IntRange(1, 100),
              help="Run the whole session N times and judge the pooled samples "
                   "(default: the site's per_node_rounds with --per-node, else its "
                   "rounds, else 1).")
@click.option("--adopt-baseline", is_flag=True,
              help="When this run completes a baseline on hardware without references, "
                   "write them into reference/<site>.yaml at once.")
@click.argument("reframe_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def run(ctx, site, partition, run_tags, note, tags, list_only, per_node, rounds, adopt_baseline,
        reframe_args):
    """Run the health checks of a site and print the health table.

    Arguments after `--` go to ReFrame unchanged.
    """
    from hpc_health.run import session
    sys.exit(session.run(site, partition, tags, reframe_args, list_only, per_node,
                        rounds=rounds, adopt_baseline=adopt_baseline,
                        chosen_because=ctx.meta.get("site_chosen_because", "--site"),
                        run_tags=run_tags, note=note))


@cli.command()
@site_option
def validate(site):
    """Validate a site's configuration and reference file without running."""
    from hpc_health.run import preflight
    s, refs = preflight.validate(site)
    click.echo(f"{s.settings_file}: ok ({len(s.partitions)} partition(s))")
    if refs is not None:
        click.echo(f"{refs.path}: ok ({len(refs.tests)} test(s) with references)")
    else:
        click.echo(f"{s.reference_file}: absent (every figure will be NO-REFERENCE)")


@cli.command()
@site_option
@click.argument("run_set", metavar="[SET]", required=False)
def report(site, run_set):
    """Print the health table of a stored run (default: the latest
    readable one), or of each run of a run set (tag:NAME, last:N, ...)."""
    from hpc_health.cli import table
    from hpc_health.judge import results, verdicts
    from hpc_health.run import preflight, session
    from hpc_health.site import sites
    from hpc_health.store import index, rundirs, runsets
    s, refs = preflight.validate(site)
    with index.open_index() as idx:
        listing = idx.listing(s.name)
        _say_note(listing)
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
            runs = listing.runs[-1:]
    if not runs:
        raise ConfigError(rundirs.runs_dir(s.name), "no stored run with a readable report"
                          + (f" ({listing.note()})" if listing.damaged else ""))
    code = 0
    for r in runs:
        rep = results.load_report(r.dir / "report.json")
        vs = session.judge_report(rep, refs, r.meta.get("hardware"))
        if r.meta.get("per_node"):
            vs = verdicts.node_outliers(vs, s.settings.get("per_node_min_change"))
        tags = f", tags {','.join(r.tags)}" if r.tags else ""
        click.echo(f"run {r.run_id} on {r.meta.get('hostname')} started "
                   f"{r.meta.get('started')}{tags}")
        click.echo(table.render(vs))
        code = max(code, verdicts.exit_code(vs))
    sys.exit(code)


@cli.group()
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
@click.option("--write", is_flag=True, help="Write the proposal into reference/<site>.yaml.")
@click.argument("reframe_args", nargs=-1, type=click.UNPROCESSED)
def reference_capture(site, partition, nruns, from_runs, tags, rounds, write, reframe_args):
    """Propose references from N new runs or from stored runs.

    value = location (Huber M-estimate) of all samples; bounds from the
    observed noise (episodes between runs included), at least 3 % and at
    most 50 %.  Prints a diff;
    writes only with --write.
    """
    import io

    from hpc_health.run import preflight, session
    from hpc_health.store import capture, rundirs
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
    proposals = capture.propose(found, [m.get("stack_hash") for _, m in chosen],
                                [m.get("rounds") or 1 for _, m in chosen])
    for line in capture.diff_lines(old, proposals):
        click.echo(line)
    if write:
        data = capture.merge(capture.load_raw(s.reference_file), proposals,
                             capture.hardware_of([m for _, m in chosen], partition))
        capture.write(s.reference_file, data)
        click.echo(f"wrote {s.reference_file}")
    else:
        click.echo("(not written: add --write)")


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
            info = ", ".join(f"{k} {len(v) if isinstance(v, list) else v}"
                             for k, v in prov.items() if k in
                             ("captured", "runs", "samples", "spread", "between_run_spread", "stack",
                              "estimator"))
            click.echo(f"  {'/'.join(str(k) for k in path[:-1])}  {var} = {value:g} {unit} "
                       f"{bounds}  {info or 'no provenance'}")


def _leaves(node, depth, path=()):
    for key, val in node.items():
        if depth > 0:
            yield from _leaves(val, depth - 1, path + (key,))
        else:
            yield path + (key,), val


@cli.command()
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
                _say_note(listing)
                raise ConfigError(s.dir, f"no stored figure for {chk} {v}")
            worst |= _history_of(chk, v, points, refs, scan_all)
    if scan_all and not worst:
        click.echo(f"no sustained step in {len(pairs)} figure(s)")
    _say_note(listing)
    sys.exit(worst)


def _history_of(chk, v, points, refs, scan_all):
    from hpc_health.judge import history as hist
    worst = 0
    by_check = {}
    for p in points:
        by_check.setdefault((p["check"], p["partition"]), []).append(p)
    for (name, part), pts in by_check.items():
        ref = hist.reference_for(refs, pts[-1])
        step = hist.drift(pts, reference=ref)
        if not scan_all:
            click.echo(f"{name} {v} on {part}")
            click.echo(f"  against reference {ref.value:.4g} {ref.unit}"
                       + (" (with its recorded noise)" if ref.has_noise else
                          " (no recorded noise: the series' own spread)")
                       if ref else "  no reference: the series is its own yardstick")
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


def _say_note(listing):
    if listing.damaged:
        click.echo(f"hpc-health: {listing.note()}", err=True)


@cli.command("runs")
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
        _say_note(idx.listing(rs.site))
    for r in rs.runs:
        if ids_only:
            click.echo(r.run_id)
            continue
        m = r.meta
        tags = ",".join(r.tags)
        click.echo(f"{rs.site}:{r.run_id}  {m.get('started', '')}  exit {m.get('exit_code')}  "
                   f"{m.get('verdicts', '')}" + (f"  tags {tags}" if tags else "")
                   + (f"  note {m['note']!r}" if m.get("note") else "")
                   + ("  (imported)" if m.get("imported") else ""))


def _partition_map(values):
    mapping = {}
    for item in values:
        a, sep, b = item.partition("=")
        if not (sep and a and b):
            raise click.BadParameter(f"{item!r}: write A_PART=B_PART", param_hint="--map")
        mapping[a] = b
    return mapping


@cli.command()
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
              help="Change that must be detectable before a figure is SAME "
                   "(fraction, default 0.15).")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
def compare(site, set_a, set_b, maps, normalise, margin, as_json):
    """Compare two run sets: before/after an upgrade on one site, or two sites.

    A run set is RUN_ID, latest, last:N, tag:NAME, since:DATE or A..B,
    optionally prefixed SITE: and suffixed @PARTITION (a bare site name: its
    latest run).  Each figure is judged on all samples of all runs of each
    set with the verdicts' noise model: REGRESSED, IMPROVED, SAME or
    INCONCLUSIVE (with why).  Exit 1 when any figure REGRESSED.
    """
    from hpc_health.judge import comparison, stats
    from hpc_health.site import sites
    from hpc_health.store import index, runsets
    with index.open_index() as idx:
        known = sites.available()
        sets = [runsets.resolve(idx, text, site, known) for text in (set_a, set_b)]
        for s in sets:
            _say_note(idx.listing(s.site))
        res = comparison.compare(idx, *sets, mapping=_partition_map(maps),
                                 margin=stats.COMPARE_MARGIN if margin is None else margin,
                                 normalise=normalise)
    if as_json:
        click.echo(json.dumps(comparison.to_json(res), indent=1, sort_keys=True))
    else:
        click.echo(comparison.render(res, normalise))
    sys.exit(res.exit_code)


@cli.command("export")
@site_option
@click.argument("run_sets", nargs=-1, required=True, metavar="SET [SET ...]")
@click.option("--output", "-o", "output", required=True, type=click.Path(dir_okay=False),
              metavar="FILE", help="The file to write (gzip-compressed JSON; plain JSON when "
                                   "FILE ends in .json).")
def export_cmd(site, run_sets, output):
    """Write stored runs to one portable file for another site's store.

    SET is a run set as for compare (RUN_ID, latest, last:N, tag:NAME,
    since:DATE, A..B, optionally SITE:); whole runs are exported.  The file
    holds each run's report, samples, verdicts and provenance with a
    checksum, and the declared capabilities of the sites known here.
    """
    from hpc_health.site import sites
    from hpc_health.store import index, portable, runsets
    with index.open_index() as idx:
        known = sites.available()
        runs = [r for text in run_sets for item in text.split(",") if item
                for r in runsets.resolve(idx, item, site, known).runs]
    written = portable.export(runs, output)
    per_site = ", ".join(f"{n} of {s}" for s, n in written.sites().items())
    click.echo(f"wrote {written.path}: {len(written.runs)} run"
               f"{'s' if len(written.runs) > 1 else ''} ({per_site}), {_size(written.size)}")


def _size(n):
    for unit in ("bytes", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024


@cli.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--wait", type=click.FloatRange(0, 86400), default=300, show_default=True,
              metavar="SECONDS", help="How long to wait for another import into this store.")
def import_cmd(file, wait):
    """Add the runs of an exported FILE to this store, under their own site.

    Everything is verified before anything is written: the format and its
    version, every run's checksum, and that no run id is already stored with
    other content (a stored run is never overwritten; such a conflict
    refuses the whole import).  Runs already here are skipped.
    """
    from hpc_health.store import portable
    done = portable.import_file(file, wait=wait,
                                say=lambda line: click.echo(f"hpc-health: {line}", err=True))
    for line in done.notes:
        click.echo(f"hpc-health: note: {line}", err=True)
    for e, _ in done.added:
        click.echo(f"imported {e.name}")
    n = len(done.present)
    already = f"{n} run{'s' if n != 1 else ''} already in the store"
    if not done.added:
        click.echo(f"nothing new: {already}")
    else:
        k = len(done.added)
        click.echo(f"imported {k} run{'s' if k > 1 else ''} from {file}"
                   + (f" ({already})" if n else ""))


@cli.group()
def spack():
    """Spack for the benchmarks: bootstrap it from an offline kit."""


@spack.command("setup")
@click.option("--kit", type=click.Path(file_okay=False), metavar="DIR",
              help="The offline kit (default: $HPC_HEALTH_SPACK_KIT, else the site's spack.kit).")
@site_option
def spack_setup(kit, site):
    """Bootstrap Spack from a kit into ~/.cache/hpc-health ($HPC_HEALTH_CACHE)
    unless a Spack is found; nothing to do when it is already there."""
    from hpc_health.site import sites, spack_kit
    s = sites.load(site)
    found, how, fix = spack_kit.status(s)
    source = spack_kit.kit_from(s, kit)
    if found and not (source and not spack_kit.record()):
        click.echo(f"spack setup: Spack {how}; nothing to do")
        return
    say = lambda line: click.echo(line, err=True)  # noqa: E731
    if source is None:
        # No kit: the pinned archives from the network, as a kit in the cache
        # (Spack then fetches the benchmarks' sources itself).
        try:
            source = spack_kit.make_kit(spack_kit.cache_root() / "kit-downloaded", say=say).path
        except OSError as err:
            raise ConfigError(s.settings_file, f"no Spack, no kit and no network ({err}): give "
                              "an offline kit with --kit DIR, $HPC_HEALTH_SPACK_KIT or "
                              "spack.kit (docs/spack.md)", keypath="spack.kit") from None
    try:
        spack_kit.setup(source, say=say)
    except (RuntimeError, subprocess.CalledProcessError) as err:
        click.echo(f"hpc-health: error: spack setup from {source}: {err}", err=True)
        sys.exit(1)


@spack.command("kit")
@click.argument("dest", type=click.Path(file_okay=False))
@click.option("--from", "base_url", metavar="URL",
              help="Fetch the archives from URL/<name> (another kit, a local web server) "
                   "instead of their public sources.")
def spack_kit_cmd(dest, base_url):
    """Make an offline kit in DEST on a connected host: the pinned Spack,
    spack-packages, STREAM and OSU archives, a source mirror for IOR and
    Darshan (made with a Spack found or bootstrapped here), SHA256SUMS.
    Carry DEST to the air-gapped machine and give it as HPC_HEALTH_SPACK_KIT."""
    from hpc_health.site import spack_kit
    say = lambda line: click.echo(line, err=True)  # noqa: E731
    kit = spack_kit.make_kit(dest, base_url, say=say)
    rec = spack_kit.record() or spack_kit.setup(kit.path, say=say)
    spack_kit.make_kit(dest, base_url, spack=rec, say=say)
    click.echo(f"kit ready: {dest} (HPC_HEALTH_SPACK_KIT={dest} bash ci/health.sh)")


@cli.command()
@click.argument("kind", type=click.Choice(parsers.names()))
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
def parse(kind, file):
    """Parse a benchmark output FILE and print its figures as JSON."""
    try:
        with click.open_file(file) as fp:
            text = fp.read()
    except OSError as err:
        raise ConfigError(file, f"cannot read: {err}") from None
    try:
        data = parsers.get(kind)(text)
    except parsers.ParseError as err:
        raise ConfigError(file, f"not a complete {kind} output: {err}") from None
    click.echo(json.dumps(data, indent=2, sort_keys=True))


def main():
    cli(prog_name="hpc-health")
