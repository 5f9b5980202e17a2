"""Run sets: which stored runs a command is about.

::

    [SITE:]SELECTOR[@PARTITION]

    SELECTOR  RUN_ID | latest | last:N | tag:NAME | since:DATE | since:RUN_ID | A..B
    SITE      a site name (default: the command's site); a bare site name
              means its latest run

``latest`` is the run that finished most recently by this machine's clock:
a run dated after now (a clock that was wrong, an import from a machine
whose clock is) is never the latest, or it would stay so for years;
:func:`ahead` says which runs are.
``A..B`` is every run from A to B (by start time, both included);
``since:DATE`` every run started on or after DATE (``2026-11-01`` or
``2026-11-01T12:00``); ``since:RUN_ID`` that run and every later one.
``@PARTITION`` keeps only that partition's figures.
An unknown run id, tag or site is an error that lists the nearest
candidates.
"""

from __future__ import annotations

import calendar
import difflib
import re
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from hpc_health.errors import ConfigError
from hpc_health.model.runs import RunSet

if TYPE_CHECKING:
    from hpc_health.model.runs import Run
    from hpc_health.store.index import Index, Listing

_KEYWORDS = ("last", "tag", "since")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}(T\d{2}(:?\d{2}(:?\d{2})?)?Z?)?$")
SYNTAX = ("RUN_ID, latest, last:N, tag:NAME, since:DATE, since:RUN_ID or A..B, "
          "optionally SITE: and @PARTITION")


def split(text: str, default_site: str, sites: Iterable[str]) -> tuple[str, str, str | None]:
    """(site, selector, partition) of a run set's text."""
    body, _, partition = text.partition("@")
    head, sep, rest = body.partition(":")
    if sep and head not in _KEYWORDS:
        site, selector = head, rest
    else:
        site, selector = default_site, body
    if not sep and selector in sites and selector != "latest":
        site, selector = selector, "latest"
    if not selector:
        raise ConfigError(text, f"an empty run set: give {SYNTAX}")
    return site, selector, partition or None


def resolve(idx: Index, text: str, default_site: str,
            known_sites: Iterable[str] = ()) -> RunSet:
    """The :class:`RunSet` that *text* names, from the index *idx*."""
    site, selector, partition = split(text, default_site, set(known_sites) | set(idx.sites()))
    listing = idx.listing(site)
    runs = listing.runs
    if not runs:
        if listing.incomplete or listing.damaged:
            raise ConfigError(text, unreadable(listing, site))
        stored = idx.sites()
        raise ConfigError(text, f"no stored run of site {site!r}" +
                          (f" (sites with runs: {', '.join(stored)})" if stored else
                           " (the store is empty)"))
    chosen = select(runs, selector, text)
    if partition:
        parts = idx.partitions(chosen)
        if partition not in parts:
            raise ConfigError(text, f"no partition {partition!r} in these runs"
                              + _nearest(partition, sorted(parts)))
    return RunSet(text, site, partition, chosen)


def unreadable(listing: Listing, site: str) -> str:
    """What became of a site's stored runs when none has a readable report
    (a store that filled, a run killed, a configuration error)."""
    ended = listing.incomplete + listing.damaged
    if not ended:
        return f"no stored run of site {site!r}"
    _, last, why = max(ended, key=lambda e: e[1])
    return (f"no run of site {site!r} with a readable report: {len(ended)} stored run(s) "
            f"ended without one; the last, {last}: {why}")


def select(runs: list[Run], selector: str, text: str) -> list[Run]:
    ids = [r.run_id for r in runs]
    if selector == "latest":
        return latest(runs)
    kind, sep, arg = selector.partition(":")
    if sep and kind == "last":
        if not arg.isdigit() or int(arg) < 1:
            raise ConfigError(text, f"last:N needs a positive whole number, not {arg!r}")
        return runs[-int(arg):]
    if sep and kind == "tag":
        found = [r for r in runs if arg in r.tags]
        if not found:
            tags = sorted({t for r in runs for t in r.tags})
            raise ConfigError(text, f"no run tagged {arg!r}" + (_nearest(arg, tags) if tags
                                                                  else " (no run has a tag)"))
        return found
    if sep and kind == "since":
        if arg in ids:      # since:RUN_ID -- the run a DRIFTING line names, and after
            return runs[ids.index(arg):]
        if not _DATE.match(arg):
            raise ConfigError(text, f"since:DATE takes 2026-11-01, 2026-11-01T12:00 or a "
                              f"run id, not {arg!r}" + _nearest(arg, ids))
        found = [r for r in runs if r.started >= arg]
        if not found:
            raise ConfigError(text, f"no run started since {arg} (the latest started "
                              f"{runs[-1].started})")
        return found
    if ".." in selector:
        a, b = selector.split("..", 1)
        ia, ib = _position(ids, a, text), _position(ids, b, text)
        if ia > ib:
            raise ConfigError(text, f"{a} started after {b}: write {b}..{a}")
        return runs[ia:ib + 1]
    return [runs[_position(ids, selector, text)]]


def _position(ids, run_id, text):
    if run_id in ids:
        return ids.index(run_id)
    raise ConfigError(text, f"no run {run_id!r} (a run set is {SYNTAX})"
                      + _nearest(run_id, ids))


def _nearest(word, candidates):
    near = difflib.get_close_matches(word, candidates, n=3, cutoff=0.5)
    if not near:
        near = sorted(candidates)[-3:]
        return f"; the latest: {', '.join(near)}" if near else ""
    return f"; did you mean {', '.join(near)}?"


#: How a run's times are written: run.json's, and a run id's.
_STAMPS = ("%Y-%m-%dT%H:%M:%SZ", "%Y%m%dT%H%M%SZ")


def epoch(stamp: object) -> float | None:
    """Seconds since 1970 of a run's time (run.json's, or a run id's with
    or without its ``-N``), or None."""
    text = str(stamp or "")
    second = re.fullmatch(r"(\d{8}T\d{6}Z)-\d+", text)    # a second run in that second
    text = second.group(1) if second else text
    for form in _STAMPS:
        try:
            return float(calendar.timegm(time.strptime(text, form)))
        except ValueError:
            continue
    return None


def ahead(run: Run, now: float | None = None) -> str | None:
    """The first of the run's times (start, end, its id) that lies after
    *now* (this machine's clock), or None."""
    now = time.time() if now is None else now
    for stamp in (run.meta.get("started"), run.meta.get("finished"), run.run_id):
        at = epoch(stamp)
        if at is not None and at > now:
            return str(stamp)
    return None


def latest(runs: Sequence[Run], now: float | None = None) -> list[Run]:
    """[the run of *runs* that finished last by this machine's clock], runs
    dated after *now* left out unless every run is; [] for no runs."""
    now = time.time() if now is None else now
    past = [(i, r) for i, r in enumerate(runs) if ahead(r, now) is None] or \
        list(enumerate(runs))
    if not past:
        return []

    def when(item: tuple[int, Run]) -> tuple[float, int]:
        i, r = item
        at = epoch(r.meta.get("finished")) or epoch(r.meta.get("started")) or epoch(r.run_id)
        return (at if at is not None else float("-inf"), i)
    return [max(past, key=when)[1]]
