"""The ``hpc-health`` command.

Exit codes (for CI): 0 healthy, 1 a performance degradation or a failed
check, 2 a usage or configuration error, 128 + the signal for a command
stopped by one (130 SIGINT, 143 SIGTERM, 129 SIGHUP).
"""

from hpc_health.cli import quiet_stops

# The first thing the console script runs, before the imports below.
_restore = quiet_stops()

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

import click  # noqa: E402

from hpc_health import __version__, parsers  # noqa: E402
from hpc_health.cli import (  # noqa: E402
    compare,
    export,
    history,
    nodes,
    push,
    reference,
    runs,
    spack,
)
from hpc_health.cli.common import ErrorGroup  # noqa: E402
from hpc_health.errors import ConfigError  # noqa: E402


@click.group(cls=ErrorGroup)
@click.version_option(__version__, prog_name="hpc-health")
def cli():
    """Nightly HPC health: ReFrame checks built through Spack, judged
    against per-site references."""
    # Nothing the suite writes (store, references, caches, ReFrame's output)
    # may be writable by everyone, whatever umask cron or a service gave it.
    os.umask(os.umask(0) | 0o002)


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


for command in (runs.run, runs.validate, runs.report, runs.runs_cmd, reference.reference,
                history.history, compare.compare, export.export_cmd, export.import_cmd,
                spack.spack, push.push, nodes.nodes, nodes.node_check):
    cli.add_command(command)

# Here, not after the imports: the decorators above import too (the
# parsers' names for `parse`).
_restore()


def tolerant_streams():
    """A character the locale cannot encode (`…`, `→`, a name from an
    imported run under ISO-8859-1 or ASCII, common in cron and on older
    clusters) is written as an escape: a table that cannot be printed must
    not end the night before its exit code is kept."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError):     # not a text file: leave it be
            pass


def main():
    # Quiet again until the command's own handling of a stop begins
    # (ErrorGroup.invoke): a stop while click parses is 128 + its number too.
    ErrorGroup.restore_stops = quiet_stops()
    tolerant_streams()
    cli(prog_name="hpc-health")
