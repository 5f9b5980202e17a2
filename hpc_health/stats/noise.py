"""The noise model of a reference and the test of one figure against it:
the verdict, and the smallest change it can catch."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hpc_health.stats.constants import (
    ALPHA,
    DEGRADED,
    EPISODE_FLOOR,
    ESTIMATOR,
    IMPROVED,
    LOWER,
    MIN_SPREAD,
    NO_REFERENCE,
    PASS,
    POWER,
    TINY,
    check_direction,
    from_log,
    to_log,
)
from hpc_health.stats.robust import clean, location, location_var_factor, special, worse_sign

if TYPE_CHECKING:   # only named in annotations: reference.py imports this module
    from hpc_health.stats.reference import Reference


def _variance(within: float, between: float, n_ref: int, runs: int, n_cur: int) -> float:
    """Variance of log(tonight's location) - log(reference).

    Tonight: one run's episode (between) plus the within-run noise of the
    location of n_cur samples.  Reference: the same averaged over its runs/samples.
    """
    return (between ** 2 * (1.0 + 1.0 / runs)
            + within ** 2 * (location_var_factor(n_cur) / n_cur
                             + location_var_factor(n_ref) / n_ref))


def noise_model(ref: Reference, n_cur: int, better: bool = False) -> tuple[float, float]:
    """(sigma of the log-ratio, degrees of freedom) for a reference with noise."""
    runs = max(1, int(ref.runs or 1))
    n_ref = max(runs, int(ref.n or runs))
    within, between, df = noise_components(ref, better)
    s = math.sqrt(_variance(within, between, n_ref, runs, n_cur))
    return max(s, MIN_SPREAD), df


def expected_spread(ref: Reference, n_cur: int = 1) -> float:
    """Log-scale sigma of (a run's location of ``n_cur`` samples vs the
    reference) for a healthy machine: episodes, within-run noise and the
    reference's own uncertainty.  The history code's yardstick for steps."""
    return noise_model(ref, max(1, int(n_cur)))[0]


def noise_components(ref: Reference, better: bool = False) -> tuple[float, float, float]:
    """(within-run spread, between-run episode spread, t degrees of freedom)
    the test uses for ``ref``: the inputs of :func:`minimum_detectable_change`.

    The episode floor applies to the spread of run medians, the quantity the
    recorded series showed shifting; the within-run share of that spread is
    then taken out so it is not counted twice (with factor 1, not pi/2, which
    errs to the wide side).
    """
    runs = max(1, int(ref.runs or 1))
    n_ref = max(runs, int(ref.n or runs))
    floor = EPISODE_FLOOR if ref.episode_floor is None else ref.episode_floor
    observed = ref.between_run_spread
    if better and ref.between_run_spread_better is not None:
        observed = ref.between_run_spread_better
    if observed is not None:
        within = ref.within_run_spread or 0.0
        df = runs - 1 if runs >= 2 else n_ref - 1
    else:
        # Only a pooled spread: it is all the within-run noise we know of;
        # episodes were not measured, only the floor stands for them.
        within, observed = ref.spread or 0.0, 0.0
        df = n_ref - 1
    m = n_ref / runs
    between_sq = max(max(observed, floor) ** 2 - within ** 2 / m, 0.0)
    return within, math.sqrt(between_sq), float(max(df, 1))


def minimum_detectable_change(spread: float, n_ref: int, n_cur: int, alpha: float,
                              power: float = POWER, between_run_spread: float = 0.0,
                              bound: float = 0.0, *, runs: int | None = None,
                              between_run_spread_better: float | None = None,
                              direction: str | None = None) -> float:
    """Smallest worsening (fraction) caught on >= ``power`` of nights with
    false-alarm rate ``alpha``, by the same test :func:`verdict` uses.

    ``spread``: within-run relative spread; ``between_run_spread``: the
    (floored) episode spread on the worse side; ``runs``: baseline runs
    (default ``n_ref``, i.e. one sample per run), which sets the t degrees of
    freedom.  A change is flagged when it clears both the bound and the
    critical value, so to be caught on 95 % of nights its true size must sit
    z_power sigmas above the larger of the two: the MDC is always larger than
    the bound.  Those z_power sigmas are of the *better*-side noise
    (``between_run_spread_better``, default the worse side's): what hides a
    real drop is a run that happens to be fast.  ``direction="higher"``
    reports the drop of a bandwidth, otherwise the rise of a latency (the
    larger fraction for the same log distance).
    """
    runs = int(runs or n_ref)
    n_ref = max(n_ref, runs)
    n_cur = max(n_cur, 1)
    s = max(math.sqrt(_variance(spread, between_run_spread, n_ref, runs, n_cur)), MIN_SPREAD)
    better = between_run_spread if between_run_spread_better is None else between_run_spread_better
    sb = max(math.sqrt(_variance(spread, better, n_ref, runs, n_cur)), MIN_SPREAD)
    df = float(max(runs - 1 if runs >= 2 else n_ref - 1, 1))
    return mdc_of(s, sb, df, alpha, power, to_log(bound, direction or LOWER), direction)


def critical_log(s: float, df: float, alpha: float) -> float:
    """The smallest log distance the one-sided test flags at ``alpha``."""
    return float(special.stdtrit(df, 1.0 - alpha)) * s


def mdc_of(s: float, s_better: float, df: float, alpha: float, power: float,
         bound_log: float, direction: str | None) -> float:
    # scipy.special rather than scipy.stats: same functions, ~100x less overhead
    # (the block-resampling test calls these tens of thousands of times).
    crit = float(special.stdtrit(df, 1.0 - alpha)) * s
    x = max(bound_log, crit) + float(special.ndtri(power)) * s_better
    return from_log(x, direction)


@dataclass
class VerdictResult:
    verdict: str
    value: float
    deviation: float | None      # (value - ref) / ref, signed, raw
    worse_by: float | None       # fraction, positive = worse
    p_value: float | None        # one-sided: worse side; better side if IMPROVED
    mdc: float | None            # minimum detectable worsening (fraction)
    n: int                          # finite samples tonight
    reason: str
    bound: float | None = None   # worse-side tolerance (fraction)
    dropped: int = 0                # non-finite samples dropped
    method: str = ""                # "noise" | "bound-only" | ""
    p_worse: float | None = None
    p_better: float | None = None
    better_bound: float | None = None
    sigma: float | None = None   # sigma of the log-ratio the test used
    sigma_better: float | None = None   # the same on the better side
    df: float | None = None


def evaluate(ref: Reference | None, samples: Iterable[float], direction: str) -> VerdictResult:
    """Everything but the decision (which needs alpha, maybe corrected)."""
    check_direction(direction)
    x, dropped = clean(samples)
    if x.size == 0:
        raise ValueError("no finite samples to judge (a sanity failure, not a verdict)")
    value = location(x)
    if ref is None:
        return VerdictResult(NO_REFERENCE, value, None, None, None, None, int(x.size),
                             "no reference for this variable", dropped=dropped)
    if not ref.value > 0:
        raise ValueError(f"reference value must be positive, got {ref.value}")
    deviation = (value - ref.value) / ref.value
    worse_by = deviation if direction == LOWER else -deviation
    if direction == LOWER:
        bound, better_bound = ref.upper, (None if ref.lower is None else -ref.lower)
    else:
        bound, better_bound = (None if ref.lower is None else -ref.lower), ref.upper
    res = VerdictResult(PASS, value, deviation, worse_by, None, None, int(x.size), "",
                        bound=bound, dropped=dropped, better_bound=better_bound)
    if not ref.has_noise:
        res.method = "bound-only"
        return res
    res.method = "noise"
    d = worse_sign(direction) * (math.log(max(value, TINY)) - math.log(ref.value))
    s, df = noise_model(ref, res.n)
    sb, _ = noise_model(ref, res.n, better=True)
    res.sigma, res.sigma_better, res.df = s, sb, df
    res.p_worse = float(special.stdtr(df, -d / s))
    res.p_better = float(special.stdtr(df, d / sb))
    return res


def decide(res: VerdictResult, ref: Reference | None, direction: str, alpha: float,
            sig_worse: bool | None = None, sig_better: bool | None = None,
            test: str = "") -> VerdictResult:
    """Turn an evaluation into PASS/DEGRADED/IMPROVED with its reason.

    ``sig_*`` override the per-variable ``p <= alpha`` (used for Holm/BH,
    described by ``test``); ``alpha`` is the level the MDC is reported at.
    """
    if res.verdict == NO_REFERENCE:
        return res
    beyond_worse = res.bound is not None and res.worse_by > res.bound
    beyond_better = res.better_bound is not None and -res.worse_by > res.better_bound
    pct = _pct
    where = (f"{pct(res.worse_by)} worse" if res.worse_by >= 0
             else f"{pct(-res.worse_by)} better")
    if res.method == "bound-only":
        res.p_value = None
        if beyond_worse:
            res.verdict = DEGRADED
        elif beyond_better:
            res.verdict = IMPROVED
        res.reason = (f"{where} than reference; bound-only comparison "
                      f"(reference has no noise information, significance not assessed)")
        return res

    if sig_worse is None:
        sig_worse = res.p_worse <= alpha
    if sig_better is None:
        sig_better = res.p_better <= alpha
    test = test or f"alpha {alpha:.2g}"
    res.mdc = None if res.bound is None else mdc_of(
        res.sigma, res.sigma_better, res.df, alpha, POWER, to_log(res.bound, direction),
        direction)
    tail = _notes(ref)
    mdc_txt = ("" if res.mdc is None
               else f"; only >= {pct(res.mdc)} worse is caught on {100 * POWER:.0f} % of nights")

    if beyond_worse and sig_worse:
        res.verdict, res.p_value = DEGRADED, res.p_worse
        res.reason = (f"{where} (bound {pct(res.bound)}), significant: "
                      f"p={res.p_worse:.2g} ({test}){tail}")
    elif beyond_better and sig_better:
        res.verdict, res.p_value = IMPROVED, res.p_better
        res.reason = (f"{where} (bound {pct(res.better_bound)}), significant: "
                      f"p={res.p_better:.2g} ({test}); re-baseline?{tail}")
    else:
        res.verdict, res.p_value = PASS, res.p_worse
        if beyond_worse:
            why = (f"beyond bound {pct(res.bound)} but within baseline noise "
                   f"(p={res.p_worse:.2g}, not significant at {test})")
        elif res.bound is not None:
            why = f"within bound {pct(res.bound)}"
        else:
            why = "worse side unbounded"
        res.reason = f"{where}, {why}{mdc_txt}{tail}"
    return res


def _notes(ref: Reference) -> str:
    """What a verdict says of its reference: assumed noise, too noisy,
    summarised another way."""
    notes = []
    if ref.between_run_spread is None:
        floor = EPISODE_FLOOR if ref.episode_floor is None else ref.episode_floor
        notes.append(f"between-run noise not measured, assumed {_pct(floor)}")
    if ref.too_noisy:
        notes.append("reference marked too noisy to gate")
    if ref.estimator is not None and ref.estimator != ESTIMATOR:
        notes.append(f"reference summarised by {ref.estimator}, tonight by {ESTIMATOR}: "
                     f"re-capture it")
    return ("; " + "; ".join(notes)) if notes else ""


def _pct(frac: float | None) -> str:
    if frac is None:
        return "n/a"
    return f"{100 * frac:.1f} %" if abs(frac) < 1 else f"{100 * frac:.0f} %"


def verdict(ref: Reference | None, samples: Sequence[float], direction: str,
            alpha: float = ALPHA) -> VerdictResult:
    """Verdict of tonight's samples of one variable against its reference.

    DEGRADED: beyond the worse-side bound *and* significant at ``alpha``
    (one-sided t-test on the log-ratio of tonight's :func:`location` to the reference,
    sigma from the reference's within- and between-run noise, df = baseline
    runs - 1).  IMPROVED symmetrically (a hint to re-baseline).  Without noise
    information in the reference: bounds only, said in ``reason``.  For the
    many variables of one run use :func:`decide_many` instead, which corrects
    for multiplicity.  Raises ValueError if no sample is finite.
    """
    return decide(evaluate(ref, samples, direction), ref, direction, alpha)

