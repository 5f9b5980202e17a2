"""The nights before tonight, as the gate reads them: which fed each
figure's spread (healthy), and which may count towards a loss that stays
(the persistence rule).

A night is a stored run of the site that was judged whole: not a per-node
run (its figures are one node's), not stopped half-way, and not dated after
tonight.  Of its figures, one judged on a quiet node that the run did not
name DRIFTING feeds the figure's spread, and so does a night it failed on
once a later night came back: a healthy machine whose figure comes in
episodes (a latency at 2.6x for five runs, IOR between two levels 17 %
apart) must teach the gate its episodes, and only the nights it failed on
can; a loss that has not ended feeds nothing (each night's weight is
bounded too, :func:`hpc_health.stats.gate.learned_spread`).  A busy
night's figure never feeds the spread (the load it measured is not the
machine's); it counts towards a loss that stays only for a night that is
busy too (:func:`hpc_health.judge.gating.judge_night`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hpc_health.jobside.nodeload import BUSY
from hpc_health.stats.gate import LEARN_WINDOW, PERSIST_NIGHTS

if TYPE_CHECKING:
    from hpc_health.model.results import Measurement
    from hpc_health.model.runs import FigureIndex, Run

#: Verdicts of a night whose figure was judged against the reference.
_JUDGED = ("PASS", "DEGRADED", "IMPROVED", "XFAIL")


@dataclass
class Night:
    run_id: str
    started: str
    value: float
    healthy: bool        # may feed the figure's spread (quiet, not DRIFTING)
    counts: bool         # counts towards the persistence rule (False: busy)
    failed: bool = False    # DEGRADED that night


def figure_key(m: Measurement) -> tuple[Any, ...]:
    """A figure across runs: check, partition, environ, parameters, variable."""
    return (m.test, m.partition_fullname, m.environ,
            tuple(sorted((str(k), str(v)) for k, v in m.params.items())), m.variable)


def past(idx: FigureIndex, runs: Sequence[Run], tonight: str,
         started: str | None = None) -> dict[tuple[Any, ...], list[Night]]:
    """Each figure's nights before run *tonight* (oldest first) among the
    site's stored *runs*: the last :data:`LEARN_WINDOW` + persistence nights."""
    chosen = [r for r in runs if r.run_id != tonight and not r.meta.get("per_node")
              and not r.meta.get("stopped_by") and r.meta.get("exit_code") in (0, 1, 3)
              and (started is None or (r.started or "") < started)]
    chosen = chosen[-(LEARN_WINDOW + PERSIST_NIGHTS):]
    drifting = {r.run_id: {(d.get("check"), d.get("partition"), d.get("variable"))
                           for d in r.meta.get("drifting") or []} for r in chosen}
    out: dict[tuple[Any, ...], list[Night]] = {}
    for m in idx.figures(chosen, samples=False):
        verdict = getattr(m, "verdict", None)
        if m.value is None or verdict not in _JUDGED:
            continue
        run = m.run
        busy = BUSY in (getattr(m, "verdict_reason", "") or "")
        drift = (m.check, m.partition_fullname, m.variable) in drifting.get(run.run_id, ())
        out.setdefault(figure_key(m), []).append(
            Night(run.run_id, run.started or "", float(m.value),
                  healthy=not busy and not drift, counts=not busy,
                  failed=verdict == "DEGRADED"))
    return out
