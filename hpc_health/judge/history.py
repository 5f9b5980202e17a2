"""Reading the store across runs: the series of one figure, and drift in it.
Nothing here re-runs a benchmark."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from hpc_health import stats
from hpc_health.jobside.nodeload import BUSY
from hpc_health.judge import gating, verdicts
from hpc_health.site import hardware
from hpc_health.stats import stepscan

if TYPE_CHECKING:
    from hpc_health.model.references import ReferenceSet
    from hpc_health.model.runs import FigureIndex, Run


def _matches(m, check, var, partition):
    if m.variable != var or m.value is None:
        return False
    if partition and m.partition != partition:
        return False
    return check in (m.test, m.check) or m.check.startswith(check + " ")


def series(idx: FigureIndex, runs: Sequence[Run], check: str, var: str,
           partition: str | None = None) -> list[dict[str, Any]]:
    """The points of one figure over *runs* (:class:`hpc_health.model.runs.Run`,
    oldest first), read from the store's index *idx*."""
    return [point(m) for m in idx.figures(runs, variable=var, check=check)
            if _matches(m, check, var, partition)]


def point(m: Any) -> dict[str, Any]:
    """One series point of an index figure *m* (with its ``run``)."""
    meta = m.run.meta
    return {"run": m.run.run_id, "started": meta.get("started", ""),
            "check": m.check, "variable": m.variable, "partition": m.partition_fullname,
            "value": m.value, "unit": m.unit, "better": m.better,
            "samples": m.samples or [m.value], "stack": meta.get("stack_hash"),
            "measurement": m,
            "hardware": (meta.get("hardware") or {}).get(m.partition_fullname)}


def is_busy(point: dict[str, Any]) -> bool:
    """Whether the point was measured on a busy node (its verdict says so)."""
    return BUSY in (getattr(point["measurement"], "verdict_reason", "") or "")


def _speaks_for(refs: ReferenceSet | None, point: dict[str, Any]) -> bool:
    """Whether the reference file speaks for the point's hardware (a
    reference measured on other hardware says nothing about this machine)."""
    if refs is None:
        return False
    measured_on = refs.hardware.get(point["measurement"].partition_fullname)
    return not measured_on or hardware.same(measured_on, point.get("hardware"))


def _entry(refs: ReferenceSet | None, point: dict[str, Any]) -> Any:
    """The stored reference entry of a series point, or None: no reference
    file or entry, or one measured on other hardware than the point's run."""
    if refs is None or not _speaks_for(refs, point):
        return None
    return _lookup(refs, point)


def _lookup(refs: ReferenceSet, point: dict[str, Any]) -> Any:
    m = point["measurement"]
    return refs.lookup(m.test, m.partition_fullname, m.environ, m.params, m.variable, m.unit)


def _holding(refs: ReferenceSet | None, point: dict[str, Any]) -> Any:
    """The point's entry (:func:`_entry`) unless it is a known issue
    (``$xfail``: the level is known not to hold)."""
    r = _entry(refs, point)
    return None if r is None or r.xfail else r


def reference_for(refs: ReferenceSet | None, point: dict[str, Any]) -> stats.Reference | None:
    """The stored reference of a series point as drift detection uses it
    (value as the healthy level, its recorded noise as the yardstick), or
    None where no entry holds for it (:func:`_holding`)."""
    r = _holding(refs, point)
    if r is None:
        return None
    m = point["measurement"]
    # The noise fields travel in the provenance, as for the nightly verdict.
    return verdicts.stats_reference(
        dataclasses.replace(m, ref=r.value, lower=r.lower, upper=r.upper, unit=r.unit or m.unit),
        r.provenance)


def _capture_of(refs: ReferenceSet | None, point: dict[str, Any]) -> dict[str, Any]:
    """The provenance of the capture that speaks for the point's figure: its
    reference's, or, for a figure the capture left out, the left-out entry's
    (the same runs were looked at); {} without one, or on other hardware."""
    if refs is None or not _speaks_for(refs, point):
        return {}
    entry = _lookup(refs, point)
    return entry.provenance if entry is not None else \
        verdicts.captured_provenance(point["measurement"], refs)


def capture_bounds(refs: ReferenceSet | None,
                   points: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """(index of the first baseline run, index of the first night after the
    capture) in *points* (one figure, oldest first); without a baseline run
    among them, both are the first night after the capture; (0, 0) without a
    capture that speaks for them (none, or one of other hardware).

    Steps are looked for from the first: a step before a reference was
    re-captured is the level that reference adopted, not a drift from it.
    They begin at the second or later: the baseline's own levels, however
    they fell, are what the capture took as the figure's noise."""
    if not points:
        return 0, 0
    prov = _capture_of(refs, points[-1])
    baseline = set(prov.get("runs") or ())
    captured = str(prov.get("captured") or "")
    if not baseline and not captured:
        return 0, 0
    first = next((i for i, p in enumerate(points) if p["run"] in baseline), None)
    after = next((i for i, p in enumerate(points)
                  if p["run"] not in baseline and p["started"] >= captured
                  and (first is None or i > first)), len(points))
    return (after if first is None else first), after


def drift(points: Sequence[dict[str, Any]],
          refs: ReferenceSet | None = None) -> dict[str, Any] | None:
    """The sustained step to worse in one check's series, or None: the
    nightly test (:func:`hpc_health.stats.stepscan.scan`) over the points
    since their reference's baseline, beginning after its capture
    (:func:`capture_bounds`).  ``index`` in
    the answer is into *points*."""
    if not points:
        return None
    direction = points[-1]["better"]
    if direction not in stats.DIRECTIONS:
        return None     # undeclared direction: never guessed
    # A night on a busy node measured the load, not the machine: as capture
    # and the spread leave it out, so does the step (nor does it start one
    # the clean night after the load ends).
    # At the better of a two-level reference's levels a night is no loss
    # (the gate's view): the step is looked for in the worse level's nights,
    # so a node that stays a week in its other state is not DRIFTING.
    better = _at_better_level(refs, points[-1])
    start, after = capture_bounds(refs, points)
    kept = [i for i in range(start, len(points))
            if not is_busy(points[i]) and not better(points[i]["value"])]
    # A step begins after the capture: its baseline's levels, however they
    # fell (three runs low, two high), are what the reference took as the
    # figure's noise; a step inside them that the first night continues is
    # not a drift from it.
    found = stepscan.scan([points[i]["value"] for i in kept], direction,
                          earliest=sum(i < after for i in kept))
    if found:
        found["index"] = kept[found["index"]]
    return found


def _at_better_level(refs: ReferenceSet | None, point: dict[str, Any]) -> Callable[[float], bool]:
    """Whether a value of *point*'s figure sits at the better of its
    reference's two levels (nearer it than the worse one); never for a
    reference of one level."""
    entry = _holding(refs, point)
    gap = gating.level_gap(entry.provenance) if entry is not None else 0.0
    if entry is None or not gap:
        return lambda value: False
    level, direction = entry.value, point["better"]
    return lambda value: gating.worse_log(value, level, direction) < -gap / 2
