"""What every command shares: one line and exit code 2 for a configuration
error, the --site option, the note on damaged runs."""

from __future__ import annotations

import sqlite3

import click

from hpc_health.errors import ConfigError
from hpc_health.paths import os_hint
from hpc_health.render import escape


class ErrorGroup(click.Group):
    """Turns configuration errors into one clear line and exit code 2."""

    #: Set by the command's ``main``: the quiet stops it armed
    #: (:func:`hpc_health.cli.quiet_stops`), kept until here, where a stop
    #: is caught; click would say "Aborted!" and exit 1 for one that came
    #: while it parsed the command line.
    restore_stops = None

    def invoke(self, ctx):
        try:
            restore, ErrorGroup.restore_stops = ErrorGroup.restore_stops, None
            if restore is not None:
                restore()
            return super().invoke(ctx)
        except KeyboardInterrupt:
            # Click would say "Aborted!" and exit 1: a stop is 128 + SIGINT.
            click.echo("hpc-health: stopped by SIGINT", err=True)
            ctx.exit(130)
        except ConfigError as err:
            # The message may quote stored data (a tag, a run id): no escapes.
            click.echo(f"hpc-health: error: {escape.lines(err)}", err=True)
            ctx.exit(2)
        except sqlite3.Error as err:
            click.echo(f"hpc-health: error: the store's index: {escape.one_line(err)}: try "
                       "again, or delete "
                       "index.sqlite in the store (it is rebuilt from the run directories)",
                       err=True)
            ctx.exit(2)
        except OSError as err:
            # A full or read-only file system, a directory we may not write:
            # one line naming the file, and nothing half-written (every
            # store write is atomic).
            where = err.filename or "?"
            click.echo(escape.lines(f"hpc-health: error: {where}: {err.strerror or err}: "
                                       f"{os_hint(err)}"), err=True)
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



def dated_ahead(run) -> str:
    """What to say of a stored run dated after this machine's clock, or ''."""
    import time

    from hpc_health.store import runsets
    stamp = runsets.ahead(run)
    if stamp is None:
        return ""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return (f"DATED IN THE FUTURE ({escape.one_line(stamp)}; this machine's clock says {now}): "
            "a clock that was wrong, or an import from one; never taken as the latest run")


def say_note(listing):
    if listing.damaged:
        click.echo(f"hpc-health: {escape.one_line(listing.note())}", err=True)


class Ticker:
    """Progress of long work on a terminal: one line on stderr at most every
    two seconds (the first after two), nothing in a pipe or a CI log."""

    def __init__(self, what: str, total: int):
        import time
        self.what, self.total, self.done = what, total, 0
        self._clock = time.monotonic
        self._shown = self._clock()
        self._tty = click.get_text_stream("stderr").isatty()

    def __call__(self, step: int = 1, total: int | None = None) -> None:
        self.done += step
        self.total = total if total is not None else self.total
        if self._tty and self._clock() - self._shown > 2:
            click.echo(f"hpc-health: {self.what}: {self.done}/{self.total}", err=True)
            self._shown = self._clock()
