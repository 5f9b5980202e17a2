"""False failing nights of the gate on real clean series.

Each series is one figure measured again and again with nothing injected:
the recorded noise (``tests/data/noise``: 30 back-to-back runs of nine
figures) and the clean nights of the drift bench (``bench/drift/real.json``:
full ``hpc-health run`` nights of one check, seconds to minutes apart).
Five runs are a baseline captured as ``reference capture`` does
(:func:`hpc_health.judge.baselines.capture_family`, a family of one: no
prior is lent), and other runs are judged night by night by the product's
gate (:func:`hpc_health.judge.gating.judge_night`) with the nights before
each, healthy ones feeding the spread exactly as a site's store does: the
runs after each start in their recorded order (:func:`judge_series`), and
runs drawn at random as nights a day apart (:func:`nights_apart`).  The
levels are those a figure of the ``local`` site's default suite gets: the
budget shared by its gated checks, and the figure's check counting
``effective`` independent figures.

A false failing night is a DEGRADED one.  Its rate per figure-night is set
against the level the budget allots that figure (one-night plus persistence
share): the site's false failing nights per month are at most the sum of its
figures' rates, so a rate at or under the allotment keeps the budget.
"""

from __future__ import annotations

import csv
import json
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hpc_health import stats
from hpc_health.judge import baselines, gating, nights
from hpc_health.stats import gate

REPO = Path(__file__).resolve().parents[2]
RECORDED = REPO / "tests" / "data" / "noise"
DRIFT = REPO / "bench" / "drift" / "real.json"
BASELINE = 5
#: Nights judged after each baseline drawn at random (:func:`nights_apart`).
APART_NIGHTS = 25


@dataclass
class Series:
    name: str
    values: list
    direction: str
    spacing: str         # how far apart its runs are


def recorded() -> list[Series]:
    better = {"MB/s": "higher", "MiB/s": "higher", "us": "lower", "s": "lower"}
    out = []
    for path in sorted(RECORDED.glob("*.csv")):
        with open(path) as fp:
            rows = list(csv.DictReader(fp))
        out.append(Series(f"recorded {path.stem}", [float(r["value"]) for r in rows],
                          better[rows[0]["unit"]], "back-to-back, 0.35 s apart"))
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
    """(failing nights, failing before their retest, nights judged) of the
    runs after a baseline of the five at *start*, taken as nights in the
    order they were recorded: an episode of the recording lasts as many
    nights as it lasted runs, the worst case of one that stays for days."""
    n = len(s.values)
    return judge_nights(s, range(start, start + BASELINE), range(start + BASELINE, n),
                        checks, effective, budget)


def nights_apart(s: Series, checks: int, effective: float, budget: float,
                 trials: int = 40, seed: int = 0) -> tuple[int, int, int]:
    """The same for nights a day apart: the recorded episodes last seconds
    (the runs of ``tests/data/noise`` are 0.35 s apart) or minutes, so
    nights a day apart fall in one as often as the recording does, each
    independently of the night before.  Each trial captures five runs drawn
    at random and judges up to :data:`APART_NIGHTS` of the others in a
    random order; a night's retest is still the run recorded after it
    (its own episode: a retest minutes later may share it)."""
    rng = random.Random(seed)
    failed = first = judged = 0
    for _ in range(trials):
        order = rng.sample(range(len(s.values)), len(s.values))
        f, f1, j = judge_nights(s, order[:BASELINE], order[BASELINE:BASELINE + APART_NIGHTS],
                                checks, effective, budget)
        failed, first, judged = failed + f, first + f1, judged + j
    return failed, first, judged


def judge_nights(s: Series, baseline: Iterable[int], night_runs: Iterable[int], checks: int,
                 effective: float, budget: float) -> tuple[int, int, int]:
    """(failing nights, failing before their retest, nights judged): the
    runs *baseline* captured as ``reference capture`` does (its printed
    step included), the runs *night_runs* judged in that order, night by
    night, by the product's gate with the nights before each.  A one-night
    failure is retested as a run retests it (:mod:`hpc_health.judge.confirm`),
    by the run recorded after it, seconds to minutes later as a run's
    retest is from its night; the recording's last run has no retest, and
    its failure stands."""
    values = [float(v) for v in s.values]
    picked = [values[i] for i in baseline]
    logs = np.log(np.asarray(picked))
    resolution = stats.printed_step(picked) / math.exp(float(np.mean(logs)))
    base = baselines.Baseline([f"r{k}" for k in range(len(picked))], logs, s.direction,
                              resolution=resolution)
    prov = {k: v for k, v in baselines.capture_family({"f": base})["f"].items() if v is not None}
    prov.update(effective=effective, runs=len(picked))
    if resolution:
        prov["resolution"] = resolution
    ref = float(np.exp(np.mean(logs)))
    past: list[nights.Night] = []
    failed = first = judged = 0
    for k, i in enumerate(night_runs):
        night = gating.judge_night(values[i], ref, s.direction, prov, past, checks, budget)
        assert night is not None
        bad = night.verdict == "DEGRADED"
        first += bad
        if bad and not night.tag and i + 1 < len(values):
            again = gating.judge_night(values[i + 1], ref, s.direction, prov, past, checks,
                                       budget)
            assert again is not None
            bad = again.verdict == "DEGRADED" and not gating.retest_shrank(
                night.deviation, again.deviation, s.direction, night.retest_shrink)
        judged += 1
        failed += bad
        past.append(nights.Night(str(k), str(k), values[i], healthy=True, counts=True,
                                 failed=bad))
    return failed, first, judged


def false_alarms(checks: int, effective: float, budget: float = gate.FALSE_ALARM_BUDGET,
                 stride: int = 1) -> list[dict]:
    """One row per series: failing nights over figure-nights, its runs
    taken as nights in their recorded order and as nights a day apart
    (:func:`nights_apart`), against the allotment."""
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
        a_failed, a_first, a_judged = nights_apart(s, checks, effective, budget)
        rows.append({"series": s.name, "spacing": s.spacing, "figure_nights": judged,
                     "failing": failed, "before_retest": first,
                     "rate": failed / judged if judged else 0.0,
                     "apart_nights": a_judged, "apart_failing": a_failed,
                     "apart_before_retest": a_first,
                     "apart_rate": a_failed / a_judged if a_judged else 0.0,
                     "allotted": allotted})
    return rows
