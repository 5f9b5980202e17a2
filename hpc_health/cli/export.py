"""``hpc-health export`` and ``import``: runs carried between stores."""

import click

from hpc_health.cli.common import Ticker, dated_ahead, site_option
from hpc_health.render import escape


@click.command("export")
@site_option
@click.argument("run_sets", nargs=-1, metavar="SET [SET ...]")
@click.option("--output", "-o", "output", type=click.Path(dir_okay=False),
              metavar="FILE", help="The file to write (gzip-compressed JSON; plain JSON when "
                                   "FILE ends in .json).")
@click.option("--prometheus", "prom", type=click.Path(dir_okay=False), metavar="FILE.prom",
              help="Instead: the figures and verdicts of the latest run (of SET, if given) "
                   "for node_exporter's textfile collector, written atomically.")
def export_cmd(site, run_sets, output, prom):
    """Write stored runs to one portable file for another site's store.

    SET is a run set as for compare (RUN_ID, latest, last:N, tag:NAME,
    since:DATE, A..B, optionally SITE:); whole runs are exported.  The file
    holds each run's report, samples, verdicts and provenance with a
    checksum, and the declared capabilities of the sites known here.
    """
    from hpc_health.site import sites
    from hpc_health.store import index, portable, runsets
    if bool(output) == bool(prom):
        raise click.UsageError("give either -o FILE (with SET ...) or --prometheus FILE.prom")
    if output and not run_sets:
        raise click.UsageError("-o FILE exports run sets: give at least one SET")
    with index.open_index() as idx:
        known = sites.available()
        runs = [r for text in (run_sets or ("latest",)) for item in text.split(",") if item
                for r in runsets.resolve(idx, item, site, known).runs]
    if prom:
        _prometheus(runsets.latest(runs)[0], prom)
        return
    written = portable.export(runs, output, Ticker("export: runs", len(runs)))
    per_site = ", ".join(f"{n} of {s}" for s, n in written.sites().items())
    click.echo(f"wrote {written.path}: {len(written.runs)} run"
               f"{'s' if len(written.runs) > 1 else ''} ({per_site}), {_size(written.size)}")


def _prometheus(run, path):
    """The run judged as ``report`` judges it, in the text format."""
    from hpc_health.render import prometheus, summaries
    from hpc_health.run import preflight
    from hpc_health.store import judged, runsets
    site, refs = preflight.validate(run.site)
    vs = judged.verdicts_of(run, refs, site.settings)
    started = runsets.epoch(run.meta.get("started"))
    ahead = dated_ahead(run)
    text = prometheus.render(run.site, run.run_id, started, vs, ahead)
    written = summaries.write_atomically(path, text.encode())
    click.echo(f"wrote {written}: run {escape.one_line(run.run_id)}, {len(vs)} figures"
               + (f"; the run is {ahead}" if ahead else ""), err=True)


def _size(n):
    for unit in ("bytes", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024


@click.command("import")
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
    from hpc_health.store import importer
    done = importer.import_file(file, wait=wait,
                                say=lambda line: click.echo(f"hpc-health: {line}", err=True))
    for line in done.notes:
        click.echo(f"hpc-health: note: {escape.one_line(line)}", err=True)
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
