"""False failing nights of the gate on real clean series.

Each series is one figure measured again and again with nothing injected:
the recorded noise (``tests/data/noise``: 30 back-to-back runs of nine
figures) and the clean nights of the drift bench (``bench/drift/real.json``:
full ``hpc-health run`` nights of one check, seconds to minutes apart).
From every start, the next five runs are a baseline captured as
``reference capture`` does (:func:`hpc_health.judge.baselines.capture_family`,
a family of one: no prior is lent), and the runs after it are judged night
by night by the product's gate (:func:`hpc_health.judge.gating.judge_night`)
with the nights before each, healthy ones feeding the spread exactly as a
site's store does.  The levels are those a figure of the ``local`` site's
default suite gets: the budget shared by its gated checks, and the figure's
check counting ``effective`` independent figures.

A false failing night is a DEGRADED one.  Its rate per figure-night is set
against the level the budget allots that figure (one-night plus persistence
share): the site's false failing nights per month are at most the sum of its
figures' rates, so a rate at or under the allotment keeps the budget.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hpc_health.judge import baselines, gating, nights
from hpc_health.stats import gate

REPO = Path(__file__).resolve().parents[2]
RECORDED = REPO / "tests" / "data" / "noise"
DRIFT = REPO / "bench" / "drift" / "real.json"
BASELINE = 5


@dataclass
class Series:
    name: str
    values: list
    direction: str
    spacing: str         # how far apart its "nights" are


def recorded() -> list[Series]:
    better = {"MB/s": "higher", "MiB/s": "higher", "us": "lower", "s": "lower"}
    out = []
    for path in sorted(RECORDED.glob("*.csv")):
        with open(path) as fp:
            rows = list(csv.DictReader(fp))
        out.append(Series(f"recorded {path.stem}", [float(r["value"]) for r in rows],
                          better[rows[0]["unit"]], "back-to-back runs"))
    return out


def drift_clean() -> list[Series]:
    data = json.loads(DRIFT.read_text())
    out = []
    for i, part in enumerate(data["parts"]):
        vals = [n["value"] for n in part.get("clean", []) if n.get("value")]
        if len(vals) > BASELINE + 1:
            out.append(Series(f"drift part {i + 1} {part['check']} {part['figure']}", vals,
                              "higher" if part["higher_is_better"] else "lower",
                              "whole nights of one check, seconds to minutes apart"))
    return out


def judge_series(s: Series, checks: int, effective: float, budget: float,
                 start: int) -> tuple[int, int, int]:
    """(failing nights, failing before their retest, nights judged) after
    the baseline at *start*.  A one-night failure is retested as a run
    retests it (:mod:`hpc_health.judge.confirm`), by the series' next run:
    its runs are seconds to minutes apart, as a retest is from its night.
    The last run's failure has no retest, and stands."""
    logs = np.log(np.asarray(s.values[start:start + BASELINE], dtype=float))
    base = baselines.Baseline([f"r{k}" for k in range(BASELINE)], logs, s.direction)
    prov = dict(baselines.capture_family({"f": base})["f"])
    prov = {k: v for k, v in prov.items() if v is not None}
    prov["effective"] = effective
    prov["runs"] = BASELINE
    ref = float(np.exp(np.mean(logs)))
    past: list[nights.Night] = []
    failed = first = judged = 0
    later = s.values[start + BASELINE:]
    for k, v in enumerate(later):
        night = gating.judge_night(v, ref, s.direction, prov, past, checks, budget)
        assert night is not None
        bad = night.verdict == "DEGRADED"
        first += bad
        if bad and not night.tag and k + 1 < len(later):
            again = gating.judge_night(later[k + 1], ref, s.direction, prov, past, checks, budget)
            assert again is not None
            bad = again.verdict == "DEGRADED" and not gating.retest_shrank(
                night.deviation, again.deviation, s.direction, night.retest_shrink)
        judged += 1
        failed += bad
        past.append(nights.Night(str(k), str(k), v, healthy=True, counts=True, failed=bad))
    return failed, first, judged


def false_alarms(checks: int, effective: float, budget: float = gate.FALSE_ALARM_BUDGET,
                 stride: int = 1) -> list[dict]:
    """One row per series: failing nights over figure-nights, against the
    allotment."""
    lv = gate.levels(budget, checks, effective)
    allotted = lv.one_night + lv.persist
    rows = []
    for s in recorded() + drift_clean():
        failed = first = judged = 0
        # A long series: every start would judge its nights hundreds of
        # times over; 40 starts spread along it see all of them.
        step = max(stride, (len(s.values) - BASELINE) // 40)
        for start in range(0, len(s.values) - BASELINE - 1, step):
            f, f1, j = judge_series(s, checks, effective, budget, start)
            failed, first, judged = failed + f, first + f1, judged + j
        rows.append({"series": s.name, "spacing": s.spacing, "figure_nights": judged,
                     "failing": failed, "before_retest": first,
                     "rate": failed / judged if judged else 0.0,
                     "allotted": allotted})
    return rows
