"""DRIFTING: the nightly run's look across nights.

Tonight's verdict compares one night with the reference; a step of a few
per cent stays inside the bounds every night.  After judging the night, the
run asks of every figure it measured whether the recent nights in the store
have stayed worse since some run R: the test of ``hpc-health history``
(:func:`hpc_health.stats.stepscan.scan`, via :mod:`hpc_health.judge.trends`),
so the two never disagree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hpc_health.judge import broad
from hpc_health.judge import trends as trend_mod
from hpc_health.model.figures import as_read
from hpc_health.stats.constants import MEDIAN_EFFICIENCY
from hpc_health.stats.gate import FALSE_ALARM_BUDGET

if TYPE_CHECKING:
    from hpc_health.model.references import ReferenceSet
    from hpc_health.model.runs import FigureIndex, Run

#: Nights the drift test reads: two months of nightly runs.  A step older
#: than that has been the machine's level for two months (re-baseline or
#: fix it); the window also keeps the test under two seconds a night.
DRIFT_NIGHTS = 60
#: A stack change this many nights either side of R is named with the drift.
STACK_NEAR = 2
#: Two-sided 95 % for the level since R.
_Z95 = 1.96


@dataclass
class Drift:
    """A figure that has stayed worse since run ``run``."""
    trend: trend_mod.Trend
    run: str
    started: str
    change: float           # signed fraction (a drop of a bandwidth is negative)
    half_width: float       # 95 % half-width of that fraction
    nights: int
    stack_changed_at: str | None


def drifting(idx: FigureIndex, runs: Sequence[Run], refs: ReferenceSet | None,
             tonight: str) -> list[Drift]:
    """Figures of run *tonight* that have stayed worse over the last
    :data:`DRIFT_NIGHTS` of *runs* (oldest first, tonight's included)."""
    return across_nights(idx, runs, refs, tonight)[0]


def across_nights(idx: FigureIndex, runs: Sequence[Run], refs: ReferenceSet | None,
                  tonight: str, budget: float = FALSE_ALARM_BUDGET
                  ) -> tuple[list[Drift], broad.BroadNight | None]:
    """What the last :data:`DRIFT_NIGHTS` of *runs* say about run *tonight*:
    the figures that have stayed worse, and the night as a whole against the
    recent nights (:func:`hpc_health.judge.broad.tonight`)."""
    window = list(runs)[-DRIFT_NIGHTS:]
    stacks = {r.run_id: r.meta.get("stack_hash") for r in window}
    found = []
    series = trend_mod.trends(idx, window, refs, level_shifts=False, samples=False)
    for t in series:
        step = t.worse_since
        if not step or t.runs[-1] != tonight:
            continue
        i = step["index"]
        found.append(Drift(t, step["run"], t.started[i], _signed(step["magnitude"], t.better),
                           _half_width(step), step["nights"], _stack_change(t.runs, i, stacks)))
    return found, broad.tonight(series, tonight, budget)


def _signed(worse: float, better: str | None) -> float:
    return as_read(worse, better)


def _half_width(step: dict) -> float:
    """95 % half-width of the change since R (median since against median
    before): the nightly spread over both sides' nights, with the median's
    efficiency (stats' MEDIAN_EFFICIENCY)."""
    sigma = step.get("sigma") or 0.0
    since, before = max(int(step["nights"]), 1), max(int(step.get("nights_before") or 1), 1)
    return math.expm1(_Z95 * sigma * math.sqrt(MEDIAN_EFFICIENCY * (1 / since + 1 / before)))


def _stack_change(run_ids: Sequence[str], i: int, stacks: dict) -> str | None:
    """The run within :data:`STACK_NEAR` nights of index *i* whose stack
    differs from the run before it, nearest first; None if none did."""
    near = sorted(range(max(i - STACK_NEAR, 1), min(i + STACK_NEAR + 1, len(run_ids))),
                  key=lambda j: abs(j - i))
    for j in near:
        before, now = stacks.get(run_ids[j - 1]), stacks.get(run_ids[j])
        if before and now and before != now:
            return run_ids[j]
    return None
