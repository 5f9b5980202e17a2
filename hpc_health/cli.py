"""The ``hpc-health`` command.

Exit codes (for CI): 0 healthy, 1 a performance degradation or a failed
check, 2 a usage or configuration error, 130 interrupted.
"""

import json
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


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="hpc-health")
def cli():
    """Nightly HPC health: ReFrame checks built through Spack, judged
    against per-site references."""


@cli.command(context_settings={"ignore_unknown_options": False})
@click.option("--site", default="local", show_default=True,
              help="Site folder under site_configs/ (or a path to one).")
@click.option("--partition", "-p", help="Run on this partition only.")
@click.option("--tag", "-t", "tags", multiple=True, help="Only checks with this tag (repeatable).")
@click.option("--list", "list_only", is_flag=True, help="List the checks that would run.")
@click.option("--per-node", is_flag=True,
              help="Run single-node checks on every node of the partition and flag outlier nodes.")
@click.argument("reframe_args", nargs=-1, type=click.UNPROCESSED)
def run(site, partition, tags, list_only, per_node, reframe_args):
    """Run the health checks of a site and print the health table.

    Arguments after `--` go to ReFrame unchanged.
    """
    from hpc_health import runner
    sys.exit(runner.run(site, partition, tags, reframe_args, list_only, per_node))


@cli.command()
@click.option("--site", default="local", show_default=True)
def validate(site):
    """Validate a site's configuration and reference file without running."""
    from hpc_health import runner
    s, refs = runner.validate(site)
    click.echo(f"{s.settings_file}: ok ({len(s.partitions)} partition(s))")
    if refs is not None:
        click.echo(f"{refs.path}: ok ({len(refs.tests)} test(s) with references)")
    else:
        click.echo(f"{s.reference_file}: absent (every figure will be NO-REFERENCE)")


@cli.command()
@click.option("--site", default="local", show_default=True)
@click.argument("run_id", required=False)
def report(site, run_id):
    """Print the health table of a stored run (default: the latest)."""
    from hpc_health import references, results, runner, store, table, verdicts, sites
    runs = store.list_runs(sites.load(site).name)
    if run_id:
        runs = [r for r in runs if r[0].name == run_id]
    runs = [r for r in runs if (r[0] / "report.json").exists()]
    if not runs:
        raise ConfigError(store.runs_dir(site), f"no stored run{' ' + run_id if run_id else ''} with a report")
    run_dir, meta = runs[-1]
    s, refs = runner.validate(site)
    vs = runner.judge_report(results.load_report(run_dir / "report.json"), refs)
    click.echo(f"run {run_dir.name} on {meta.get('hostname')} started {meta.get('started')}")
    click.echo(table.render(vs))
    sys.exit(verdicts.exit_code(vs))


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
