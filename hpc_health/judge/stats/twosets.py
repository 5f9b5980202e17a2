"""Two sets of runs of one figure: the change from one to the other, with
its interval, test and minimum detectable change (``hpc-health compare``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special as _sp

from hpc_health.judge.stats.constants import EPISODE_FLOOR, LOWER, MIN_SPREAD, POWER, _check_direction
from hpc_health.judge.stats.robust import _location_var_factor, _run_location_logs, clean, within_run_spread

#: The change a comparison must be able to see before it may say SAME.
COMPARE_MARGIN = 0.15
#: Two-sided level of a comparison's intervals and tests (Holm over the figures).
COMPARE_ALPHA = 0.05


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


def compare_runs(runs_a: Sequence[Sequence[float]], runs_b: Sequence[Sequence[float]],
                 direction: str, alpha: float = COMPARE_ALPHA,
                 floor: float = EPISODE_FLOOR) -> Comparison:
    """Change from set A to set B of one figure, each a list of runs' samples.

    The noise model of the verdicts: each run's figure is the location of its
    samples; runs differ by a night-to-night (episode) spread, never taken
    below *floor*, plus the within-run noise of their locations.  The centre
    of a set is the mean of its runs' log locations; the test is Student's t
    on the difference, the night-to-night spread pooled over the runs of
    both sets (df = runs - 2): with fewer than three runs in all that spread
    cannot be estimated, and the comparison is not testable.
    """
    _check_direction(direction)
    sets = []
    for runs in (runs_a, runs_b):
        cleaned = [c for c in (clean(r)[0] for r in runs) if c.size]
        if not cleaned:
            raise ValueError("a side has no finite sample")
        sets.append(cleaned)
    locs = [_run_location_logs(s) for s in sets]
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
    var_one = within ** 2 * _location_var_factor(int(round(m))) / m
    se = max(math.sqrt((between ** 2 + var_one) * (1.0 / ra + 1.0 / rb)), MIN_SPREAD)
    d = lb - la
    change = math.expm1(d)
    worse_by = change if direction == LOWER else -change
    low = high = p = mdc = None
    if df >= 1:
        t = float(_sp.stdtrit(df, 1.0 - alpha / 2.0))
        try:
            low, high = math.expm1(d - t * se), math.expm1(d + t * se)
            mdc = math.expm1((t + float(_sp.ndtri(POWER))) * se)
        except OverflowError:
            # Samples of 0 (an IOR close time below the timer's resolution)
            # sit at log(_TINY): a spread no interval can be given for.
            raise ValueError("its samples spread over hundreds of orders of magnitude "
                             "(zeros among them?)") from None
        p = float(2.0 * _sp.stdtr(df, -abs(d) / se))
    return Comparison(math.exp(la), math.exp(lb), change, low, high, p, mdc, worse_by,
                      ra, rb, between, within)
