"""What every command shares: one line and exit code 2 for a configuration
error, the --site option, the note on damaged runs."""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

import click

from hpc_health.errors import ConfigError


class ErrorGroup(click.Group):
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
            click.echo(f"hpc-health: error: {where}: {err.strerror or err}: {os_hint(err)}",
                       err=True)
            ctx.exit(2)


def _setting_of(path) -> str:
    """The variable that moves *path* elsewhere."""
    from hpc_health import paths
    from hpc_health.site import spack_kit
    try:
        p = Path(os.path.abspath(path))
    except (TypeError, ValueError):
        return "HPC_HEALTH_STORE or HPC_HEALTH_CACHE"
    for var, root in (("HPC_HEALTH_CACHE", spack_kit.cache_root()),
                      ("HPC_HEALTH_STORE", paths.store_root())):
        if p == Path(root) or Path(root) in p.parents:
            return var
    return "HPC_HEALTH_STORE or HPC_HEALTH_CACHE"


def os_hint(err: OSError) -> str:
    """What to do about a failed file operation, by what failed."""
    var = _setting_of(err.filename) if err.filename else "HPC_HEALTH_STORE"
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"free space (or quota), or point {var} elsewhere"
    if err.errno == errno.ENAMETOOLONG:
        return (f"a name in this path is too long (255 bytes a name, 4096 a path): point {var} "
                "at a shorter directory")
    if err.errno == errno.E2BIG:
        return "a command line grew too long: a shorter --note or fewer options"
    if err.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return f"choose a directory you may write ({var})"
    return f"check the directory, or point {var} elsewhere"


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



def say_note(listing):
    if listing.damaged:
        click.echo(f"hpc-health: {listing.note()}", err=True)


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
