"""A stored run judged as its night judged it: against the site's
references, with the nights stored before it (the gate's spread learns
from them) and the site's settings.  ``report``, the exports, ``push`` and
the HTML page read a run's verdicts through here, so each says what the
night said."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpc_health.errors import ConfigError
from hpc_health.judge import confirm, nights, verdicts
from hpc_health.model import results
from hpc_health.store import index, rundirs

if TYPE_CHECKING:
    from hpc_health.model.references import ReferenceSet
    from hpc_health.model.runs import Run


def past_nights(site_name: str, run_id: str,
                started: str | None) -> dict[tuple[Any, ...], list[nights.Night]]:
    """The stored nights before run *run_id* (:func:`nights.past`); none,
    said on stderr, when the store cannot be read across runs: the run is
    then judged on its references' baseline alone."""
    try:
        with index.open_index() as idx:
            return nights.past(idx, idx.listing(site_name).runs, run_id, started)
    except Exception as err:     # any: the night is judged all the same
        print(f"hpc-health: the nights before this one could not be read "
              f"({type(err).__name__}: {err}); judged on the baseline alone", file=sys.stderr)
        return {}


def verdicts_of(run: Run, refs: ReferenceSet | None,
                settings: Mapping[str, Any] | None = None,
                report: dict[str, Any] | None = None) -> list[verdicts.Verdict]:
    """The verdicts of stored run *run* (its report read unless given)."""
    if report is None:
        report = results.load_report(run.dir / "report.json")
    past = {} if run.meta.get("per_node") else \
        past_nights(run.site, run.run_id, run.meta.get("started"))
    first = verdicts.judge_all(results.measurements(report), refs, run.meta.get("hardware"),
                               past=past, settings=settings)
    if not run.meta.get("retest"):
        return first        # none was needed, or the site has none
    return with_retest(first, run.dir, refs, run.meta.get("hardware"), past, settings)


def with_retest(first: list[verdicts.Verdict], run_dir: Path, refs: ReferenceSet | None,
                hardware: Mapping[str, Any] | None, past: Mapping[Any, Any],
                settings: Mapping[str, Any] | None) -> list[verdicts.Verdict]:
    """A run's verdicts with its retest's say on its one-night failures
    (:mod:`hpc_health.judge.confirm`); a retest that measured nothing
    leaves each failure standing, and says so."""
    if not confirm.wanted(first):
        return first
    try:
        report = results.load_report(Path(run_dir) / rundirs.RETEST_DIR / "report.json")
    except ConfigError:
        return confirm.combine(first, [])
    again = verdicts.judge_all(results.measurements(report), refs, dict(hardware or {}),
                               past=past, settings=settings)
    return confirm.combine(first, again)
