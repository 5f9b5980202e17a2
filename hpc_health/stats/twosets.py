"""Two sets of runs of one figure: the change from one to the other, with
its interval, test and minimum detectable change (``hpc-health compare``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hpc_health.stats.constants import LOWER, MIN_SPREAD, POWER, check_direction
from hpc_health.stats.robust import (
    clean,
    location_var_factor,
    run_location_logs,
    special,
    within_run_spread,
)

#: SAME claims the change lies within +-COMPARE_MARGIN (an equivalence test
#: at the decision's level).  Below 10 %: an upgrade that slowed every
#: figure by 10 % must never be called SAME on any of them.
COMPARE_MARGIN = 0.10
#: Two-sided level of a comparison's intervals and tests (Holm over the figures).
COMPARE_ALPHA = 0.05
#: Consecutive nights share episodes (on the recorded 30-run series, the
#: difference between the means of two sets of 10 consecutive runs spread
#: up to 3.1 times as much as independent runs would make it): a set of n
#: runs counts as n (1 - rho) / (1 + rho) independent ones, rho its runs'
#: lag-one autocorrelation, estimated from this many runs on, never below 0.
AUTOCORRELATION_RUNS = 6
#: The typical change over all figures a broad-shift verdict needs: the
#: smallest change any verdict here acts on (BOUND_FLOOR).
BROAD_MIN_CHANGE = 0.03
#: Why a figure with samples of 0 is not compared.
UNMEASURABLE = ("unmeasurable: samples of 0 (a time below its timer's resolution, or a share "
                "of none): the change of a figure that measures nothing cannot be given")


@dataclass
class Comparison:
    centre_a: float
    centre_b: float
    change: float                   # (b - a) / a of the centres
    low: float | None            # 95 % interval of the change, None: not estimable
    high: float | None
    p_value: float | None        # two-sided; None: not testable
    mdc: float | None            # smallest change caught on POWER of occasions
    worse_by: float                 # the change, positive when B is worse
    runs_a: int
    runs_b: int
    between: float                  # night-to-night spread used (floored)
    within: float
    log_change: float = 0.0         # log(b / a) of the centres
    se: float = 0.0                 # its standard error
    df: int = 0                     # the t test's degrees of freedom



def change_interval(log_change: float, se: float, df: int,
                    level: float) -> tuple[float, float]:
    """A change's two-sided interval at *level* (0.05: 95 %), from its log
    and standard error (Student's t, *df*)."""
    t = float(special.stdtrit(df, 1.0 - level / 2.0))
    return math.expm1(log_change - t * se), math.expm1(log_change + t * se)


def detectable_change(se: float, df: int, level: float) -> float:
    """The smallest change a two-sided test at *level* catches on POWER of
    occasions."""
    return math.expm1((float(special.stdtrit(df, 1.0 - level / 2.0)) + float(special.ndtri(POWER))) * se)


def effective_runs(logs: np.ndarray) -> float:
    """How many independent runs a set of runs (in run order) is worth:
    n (1 - rho) / (1 + rho), rho the lag-one autocorrelation of their
    deviations (0 below :data:`AUTOCORRELATION_RUNS` runs, where it cannot
    be told)."""
    x = np.asarray(logs, dtype=float)
    n = x.size
    if n < AUTOCORRELATION_RUNS:
        return float(n)
    r = x - x.mean()
    denom = float(np.sum(r * r))
    rho = float(np.sum(r[1:] * r[:-1])) / denom if denom > 0 else 0.0
    rho = min(max(rho, 0.0), 0.9)
    return max(n * (1 - rho) / (1 + rho), 1.0)


def compare_runs(runs_a: Sequence[Sequence[float]], runs_b: Sequence[Sequence[float]],
                 direction: str, alpha: float = COMPARE_ALPHA,
                 floor: float = 0.0) -> Comparison:
    """Change from set A to set B of one figure, each a list of runs' samples.

    The noise model of the verdicts: each run's figure is the location of its
    samples; runs differ by a night-to-night (episode) spread (never below
    *floor*; by default only what the runs show), plus the within-run noise
    of their locations.  The centre of a set is the mean of its runs' log
    locations; the test is Student's t on the difference, the night-to-night
    spread pooled over both sets, each set counting as many runs as its
    autocorrelation leaves independent (:func:`effective_runs`), and the
    degrees of freedom those effective runs less two: with fewer than three
    runs in all that spread cannot be estimated, and the comparison is not
    testable.
    """
    check_direction(direction)
    sets = []
    for runs in (runs_a, runs_b):
        if any(v <= 0 for r in runs for v in r if v is not None and math.isfinite(v)):
            raise ValueError(UNMEASURABLE)
        cleaned = [c for c in (clean(r)[0] for r in runs) if c.size]
        if not cleaned:
            raise ValueError("a side has no finite sample")
        sets.append(cleaned)
    locs = [run_location_logs(s) for s in sets]
    ra, rb = len(sets[0]), len(sets[1])
    la, lb = float(np.mean(locs[0])), float(np.mean(locs[1]))
    within = within_run_spread(sets[0] + sets[1]) or 0.0
    m = float(np.mean([c.size for s in sets for c in s]))
    df = ra + rb - 2
    observed = 0.0
    if df >= 1:
        resid = np.concatenate([locs[0] - la, locs[1] - lb])
        observed = math.sqrt(float(np.sum(resid ** 2)) / df)
    # As for a reference: the floor stands for the episodes no run sampled;
    # the within-run share of the run-to-run spread is not counted twice.
    between = math.sqrt(max(max(observed, floor) ** 2 - within ** 2 / m, 0.0))
    var_one = within ** 2 * location_var_factor(int(round(m))) / m
    ea, eb = effective_runs(locs[0]), effective_runs(locs[1])
    se = max(math.sqrt((between ** 2 + var_one) * (1.0 / ea + 1.0 / eb)), MIN_SPREAD)
    df = max(int(round(ea + eb)) - 2, 1) if df >= 1 else df
    d = lb - la
    change = math.expm1(d)
    worse_by = change if direction == LOWER else -change
    low = high = p = mdc = None
    if df >= 1:
        t = float(special.stdtrit(df, 1.0 - alpha / 2.0))
        try:
            low, high = math.expm1(d - t * se), math.expm1(d + t * se)
            mdc = math.expm1((t + float(special.ndtri(POWER))) * se)
        except OverflowError:
            # Samples of 0 (an IOR close time below the timer's resolution)
            # sit at log(TINY): a spread no interval can be given for.
            raise ValueError("its samples spread over hundreds of orders of magnitude "
                             "(zeros among them?)") from None
        p = float(2.0 * special.stdtr(df, -abs(d) / se))
    return Comparison(math.exp(la), math.exp(lb), change, low, high, p, mdc, worse_by,
                      ra, rb, between, within, d, se, df)


@dataclass
class BroadShift:
    """Many figures moved the same way between two sets of runs."""
    word: str                       # BROADLY WORSE | BROADLY BETTER | NO BROAD SHIFT
    figures: int
    worse: int                      # figures whose centre moved to worse
    better: int
    change: float                   # the typical figure's change, positive when worse
    low: float                      # its interval at alpha
    high: float
    p_value: float
    runs_a: int
    runs_b: int


def broad_shift(figures: Sequence[tuple[str, dict, dict]], alpha: float = COMPARE_ALPHA,
                min_change: float = BROAD_MIN_CHANGE) -> BroadShift | None:
    """Whether the figures of set B are, taken together, worse (or better)
    than those of set A; None when fewer than three runs in all.

    *figures*: (direction, {run: samples} of A, {run: samples} of B).  Each
    figure's runs are put on one scale (the log location of each run,
    centred on the figure's mean over both sets, signed so that worse is
    positive); each run's index is the median of its figures there.  The
    runs, not the figures, are the independent units -- a night's episode
    moves many figures at once -- so the test is Student's t on the run
    indices of A against B.  The word needs the test at *alpha*, a typical
    change of at least *min_change*, and most figures moving that way.
    """
    per_run: dict[tuple[int, Any], list[float]] = {}
    worse = better = used = 0
    for direction, a, b in figures:
        check_direction(direction)
        sign = 1.0 if direction == LOWER else -1.0
        keys, kept = [], []
        for side, runs in ((0, a), (1, b)):
            for run, samples in runs.items():
                c = clean(samples)[0]
                if c.size and bool(np.all(c > 0)):
                    keys.append((side, run))
                    kept.append(c)
        locs = dict(zip(keys, run_location_logs(kept).tolist())) if kept else {}
        sides = [[v for (k, _), v in locs.items() if k == side] for side in (0, 1)]
        if not (sides[0] and sides[1]):
            continue
        used += 1
        moved = sign * (float(np.mean(sides[1])) - float(np.mean(sides[0])))
        worse += moved > 0
        better += moved < 0
        centre = float(np.mean(sides[0] + sides[1]))
        for key, v in locs.items():
            per_run.setdefault(key, []).append(sign * (v - centre))
    idx = [[float(np.median(v)) for (side, _), v in per_run.items() if side == s] for s in (0, 1)]
    ra, rb = len(idx[0]), len(idx[1])
    if not used or ra < 1 or rb < 1 or ra + rb < 3:
        return None
    d = float(np.mean(idx[1]) - np.mean(idx[0]))
    df = ra + rb - 2
    resid = np.concatenate([np.asarray(idx[0]) - np.mean(idx[0]),
                            np.asarray(idx[1]) - np.mean(idx[1])])
    ea, eb = effective_runs(np.asarray(idx[0])), effective_runs(np.asarray(idx[1]))
    se = max(math.sqrt(float(np.sum(resid ** 2)) / df * (1.0 / ea + 1.0 / eb)), MIN_SPREAD)
    df = max(int(round(ea + eb)) - 2, 1)
    t = float(special.stdtrit(df, 1.0 - alpha / 2.0))
    p = float(2.0 * special.stdtr(df, -abs(d) / se))
    change = math.expm1(d)
    word = "NO BROAD SHIFT"
    if p <= alpha and abs(change) >= min_change:
        if d > 0 and worse > used / 2:
            word = "BROADLY WORSE"
        elif d < 0 and better > used / 2:
            word = "BROADLY BETTER"
    return BroadShift(word, used, worse, better, change, math.expm1(d - t * se),
                      math.expm1(d + t * se), p, ra, rb)
