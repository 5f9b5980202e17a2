"""Statistics behind the verdicts: is tonight's figure worse than the reference
by more than the machine's own noise can explain?

The noise this has to live with (30 back-to-back runs per series on a KVM
guest, see ``tests/data/noise``) is not a cloud of independent draws: it comes
in *episodes*, several runs in a row shifted together (8 B latency at 2.6x for
five runs, 2-thread STREAM at +75 % for three), and the median of one series
can sit 4-12 % away from the median of the same series taken minutes later.
The consequences, and how each is handled here:

* Averaging more samples *within* one run does not average an episode away.
  The noise model therefore has two parts, a within-run spread and a
  between-run (episode) spread, and only the first shrinks with the number of
  samples tonight.  A baseline is only as good as the number of *runs* it
  contains, so the test's degrees of freedom come from the run count.
* Ordinary robust scales (MAD) treat an episode that covers 15 % of the runs
  as an outlier and ignore it; then every night that falls into such an
  episode would be a false alarm.  The between-run spread is therefore the
  larger of the MAD scale of the run medians and the scale that makes the
  *worst* baseline run (on the worse side) an ordinary worst-of-R draw.  A
  baseline that contains an episode is told about it.  Robustness to a wild
  sample comes from the location estimate within each run instead.
* A run's figure is not the plain median of its samples.  Here a launch
  often picks one of two levels (halo 4 KiB at ~9 or ~13 us, barrier at
  0.35 or 1.0 us; STREAM and 4 KiB latency less sharply) and keeps it for all its
  repetitions; the median of such samples jumps from one level to the other
  as the share of launches at each crosses one half, so more launches barely
  steady it.  :func:`location` is Huber's M-estimate instead: samples within
  1.5 robust sigmas of the centre count fully, as in a mean, so two nearby
  levels are averaged and a shift in either moves the figure; samples
  further out count as if they sat at 1.5 sigmas, so an episode or a wild
  sample moves it by a bounded amount (a third of 8 B latencies at 2.6x
  moves it 7 %, the mean 43 %).  On normal noise it is 96 % as efficient
  as the mean (the median: 64 %).
* A baseline cannot see a shift it never sampled (all its runs taken within
  one episode).  The between-run spread is never taken below
  :data:`EPISODE_FLOOR`, measured from the recorded series; sites whose
  baselines span many nights on quiet hardware may lower it.

Everything is done on the log scale: the noise is multiplicative (a 5 %
wobble on 40 GB/s is 2 GB/s) and "worse by x %" means the same thing for a
bandwidth falling and a latency rising.  Spreads stored in a
:class:`Reference` are log-scale, i.e. close to fractions for small values.

A verdict is DEGRADED only if the change is both beyond the reference's bound
in the worse direction (practically relevant) *and* statistically
significant given the baseline noise and the sample count (not noise); across
the many variables of one run the significance is corrected with Holm
(:func:`decide_many`).  :func:`minimum_detectable_change` says, with the same
test, how large a change has to be before it is caught reliably, so a PASS can
be read for what it is.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Iterable, Optional, Sequence

import numpy as np
from scipy import special as _sp

from hpc_health.judge.figures import DIRECTIONS, HIGHER, LOWER  # noqa: F401 - re-exported

Direction = str

PASS, DEGRADED, IMPROVED, NO_REFERENCE = "PASS", "DEGRADED", "IMPROVED", "NO-REFERENCE"

# --- constants (each is a decision; the reason is next to it) ---------------

#: 1 / Phi^-1(0.75): makes the median absolute deviation estimate the standard
#: deviation of normal data, so it compares with the other sigma estimates.
MAD_TO_SIGMA = 1.4826
#: The interquartile range of normal data is 1.349 sigma.
IQR_TO_SIGMA = 1.0 / 1.349
#: Median |x_i - x_j| of two normal draws is Phi^-1(0.75) * sqrt(2) sigma;
#: used for the within-run spread, where run medians fitted to 2-3 samples
#: would bias residual-based scales low.
PAIR_TO_SIGMA = 1.0 / (0.67449 * math.sqrt(2.0))

#: Default false-alarm rate: for one variable in :func:`verdict`, for the whole
#: run (family-wise, Holm) in :func:`decide_many`.  1 % of nights with a false
#: DEGRADED somewhere is three or four a year per system, few enough that
#: engineers still read them rather than learn to ignore them.
ALPHA = 0.01
#: Power that :func:`minimum_detectable_change` promises: a change of the
#: reported size is caught on at least 95 % of nights.
POWER = 0.95

#: Smallest tolerance a proposed reference gets.  Below 3 % are print
#: resolution (0.01 us of a 0.3 us latency is 3 %), timer granularity and
#: compiler/firmware noise: not health issues.
BOUND_FLOOR = 0.03
#: Largest tolerance a proposed reference gets.  A metric that needs more than
#: +-50 % to cover its healthy runs is too noisy to gate on; its reference is
#: capped here and marked ``too_noisy`` (the significance test still protects
#: it: a DEGRADED then needs a change far beyond the noise).
BOUND_CAP = 0.50
#: Tolerance = this many between-run sigmas of a single future run (reference
#: uncertainty included).  3 sigma leaves ~0.1 % of healthy runs outside one
#: side for normal noise, so the bounds are also safe when ReFrame applies
#: them on its own, without the significance test.
BOUND_SIGMAS = 3.0
#: Lower limit of the between-run (episode) spread.  The recorded 1-thread
#: STREAM series has two halves each quiet to ~2 % whose medians are 12.5 %
#: apart; nothing inside either half predicts that.  At 5 %, a 12 % shift is
#: a 2.7-sigma event (inside the 3-sigma bound) instead of a 6-sigma one.
#: The price: bounds are never tighter than ~+-15 %; the history check
#: (changepoint.py) is what sees smaller sustained steps.
EPISODE_FLOOR = 0.05
#: Runs a baseline should have.  An episode that hits one run in six (8 B
#: latency here) is absent from R runs with probability (5/6)^R: 16 % for 10
#: runs, 2.6 % for 20; a baseline that never saw it calls it DEGRADED.
RECOMMENDED_RUNS = 20
#: Samples per run a baseline should have: the run median of 3 absorbs one
#: wild sample; with 1 sample per run a wild sample *is* the run (the
#: recorded series have single samples 20-60 % off their median).
RECOMMENDED_SAMPLES = 3
#: Variance of the median of n >= 3 normal samples relative to the mean's
#: (asymptotically pi/2); for n <= 2 the median is the mean.
MEDIAN_EFFICIENCY = math.pi / 2.0
#: Huber's clipping point in robust sigmas: his own choice, 96 % efficient
#: on normal noise while a far sample's pull stays bounded.
HUBER_K = 1.5
#: The same variance factor for the Huber estimate (1 / 0.964).
HUBER_EFFICIENCY = 1.0 / 0.964
#: Name of the estimate :func:`location` makes; recorded with every captured
#: reference, because a reference only compares with figures summarised the
#: same way.
ESTIMATOR = "huber-1.5"
#: Fewer samples than this are summarised by their median: with 3 the robust
#: sigma rests on the closest pair alone and says little.
HUBER_MIN_SAMPLES = 4
#: Smallest relative spread the test divides by.  No benchmark here repeats to
#: better than 0.1 %; this keeps a constant series (spread 0) from producing
#: infinite significance or a division by zero when every floor is disabled.
MIN_SPREAD = 1e-3

_TINY = 1e-300


# --- direction ----------------------------------------------------------------

def _check_direction(direction: str) -> str:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be 'higher' or 'lower', not {direction!r}")
    return direction


# --- robust summaries ---------------------------------------------------------

def clean(samples: Iterable[float]) -> tuple[np.ndarray, int]:
    """Finite samples and how many were dropped (NaN, +-inf, None).

    STREAM prints ``inf`` for arrays too small for its timer; such a sample
    says nothing about the machine and must not reach a median.
    """
    arr = np.asarray(list(samples) if not isinstance(samples, np.ndarray) else samples,
                     dtype=float).ravel()
    ok = np.isfinite(arr)
    return arr[ok], int(arr.size - ok.sum())


def quantisation_step(samples: Iterable[float]) -> float:
    """Smallest gap between distinct values (0.0 if all values are equal).

    Benchmarks print a fixed number of decimals (osu_latency: 0.01 us), so on
    fast paths the values sit on a coarse grid and the MAD can be exactly 0.
    """
    x, _ = clean(samples)
    u = np.unique(x)
    return float(np.min(np.diff(u))) if u.size > 1 else 0.0


def robust_spread(samples: Iterable[float]) -> float:
    """Scale of the samples in their own unit, estimating sigma.

    1.4826 x MAD; when the MAD is 0 (more than half the samples identical,
    typical of values quantised to 0.01 us) the IQR/1.349; when that is 0 too,
    half the quantisation step, the largest error rounding can hide.  0.0 for
    a constant series: callers apply their floors.
    """
    x, _ = clean(samples)
    if x.size < 2:
        return 0.0
    mad = MAD_TO_SIGMA * float(np.median(np.abs(x - np.median(x))))
    if mad > 0:
        return mad
    q1, q3 = np.percentile(x, [25, 75])
    iqr = IQR_TO_SIGMA * float(q3 - q1)
    if iqr > 0:
        return iqr
    return 0.5 * quantisation_step(x)


def relative_spread(samples: Iterable[float]) -> float:
    """:func:`robust_spread` as a fraction of the median (0.0 if median is 0)."""
    x, _ = clean(samples)
    if x.size == 0:
        return 0.0
    med = float(np.median(x))
    return robust_spread(x) / abs(med) if med else 0.0


def location(samples: Iterable[float]) -> float:
    """The figure a set of samples stands for: Huber's M-estimate of location
    on the log scale (scale: :func:`robust_spread`, clipping at
    :data:`HUBER_K` of it), the median for fewer than
    :data:`HUBER_MIN_SAMPLES`.  Non-finite samples are dropped; raises
    ValueError if none is left."""
    x, _ = clean(samples)
    if x.size == 0:
        raise ValueError("no finite samples")
    if x.size < HUBER_MIN_SAMPLES:
        return float(np.median(x))
    if np.all(x > 0):
        return float(np.exp(_log_location(np.log(x))))
    return _log_location(x)   # not a rate or a time; the same estimate, unlogged


def _log_location(lx: np.ndarray) -> float:
    """Huber location of (log) values by iteratively re-weighted means."""
    mu = float(np.median(lx))
    if lx.size < HUBER_MIN_SAMPLES:
        return mu
    scale = robust_spread(lx)
    if not scale > 0:
        return mu
    for _ in range(100):
        step = scale * float(np.mean(np.clip((lx - mu) / scale, -HUBER_K, HUBER_K)))
        mu += step
        if abs(step) <= 1e-12 * max(1.0, abs(mu)):
            break
    return mu


def _logs(x: np.ndarray) -> np.ndarray:
    # A latency printed as 0.00 is "below resolution", not -inf.
    return np.log(np.maximum(x, _TINY))


def _log_spread(x: np.ndarray) -> float:
    """Robust spread of log values, with the quantisation fallback applied in
    the original unit (the grid is even there, not in logs)."""
    if x.size < 2:
        return 0.0
    s = robust_spread(_logs(x))
    if s > 0:
        return s
    med = float(np.median(x))
    return robust_spread(x) / med if med > 0 else 0.0


def within_run_spread(samples_by_run: Sequence[Sequence[float]]) -> Optional[float]:
    """Pooled within-run relative spread, or None if no run has two samples.

    Median of all within-run pairwise |log x_i - log x_j|, scaled to sigma:
    unbiased for runs of 2-3 samples (residuals from a fitted run median are
    not) and robust to a wild sample.
    """
    by_size: dict[int, list[np.ndarray]] = {}
    for run in samples_by_run:
        x, _ = clean(run)
        if x.size >= 2:
            by_size.setdefault(x.size, []).append(_logs(x))
    if not by_size:
        return None
    diffs = []
    for size, group in by_size.items():
        lx = np.vstack(group)
        i, j = np.triu_indices(size, k=1)
        diffs.append(np.abs(lx[:, i] - lx[:, j]).ravel())
    d = np.concatenate(diffs)
    s = PAIR_TO_SIGMA * float(np.median(d))
    if s == 0 and np.any(d > 0):
        s = 0.5 * float(np.min(d[d > 0]))   # quantised: half a grid step
    return s


def _run_location_logs(runs: list[np.ndarray]) -> np.ndarray:
    """:func:`location` of each run's log samples, in input order
    (equal-sized runs at once)."""
    out = np.empty(len(runs))
    by_size: dict[int, list[int]] = {}
    for k, c in enumerate(runs):
        by_size.setdefault(c.size, []).append(k)
    for idx in by_size.values():
        out[idx] = [_log_location(_logs(runs[k])) for k in idx]
    return out


def _location_var_factor(n: int) -> float:
    # A median of 1 or 2 samples is their mean; beyond that the location pays
    # for its robustness with variance (the large-n price, an upper bound).
    if n <= 2:
        return 1.0
    return MEDIAN_EFFICIENCY if n < HUBER_MIN_SAMPLES else HUBER_EFFICIENCY


def _worse_sign(direction: str) -> float:
    # Log-ratio times this is positive when the value is worse.
    return 1.0 if direction == LOWER else -1.0


def _expected_max_z(r: int) -> float:
    """Expected largest of r standard normal draws (Blom's approximation)."""
    return float(_sp.ndtri((r - 0.375) / (r + 0.25)))


def _tail_scale(worse_devs: np.ndarray) -> float:
    """Sigma that makes the worst baseline run an ordinary worst-of-R.

    Deliberately not robust: the worst healthy run is information, not
    contamination.  A run median only goes wild if most of the run's samples
    did, i.e. in an episode; a single wild sample is absorbed by the location
    of a run of 3+ samples.  With one sample per run a wild sample widens the
    tolerance: the safe side, and the truth about single-sample runs.
    """
    r = worse_devs.size
    if r < 2:
        return 0.0
    return max(float(np.max(worse_devs)), 0.0) / _expected_max_z(r)


# --- references ---------------------------------------------------------------

@dataclass
class Reference:
    """What to expect of one variable, ReFrame-style plus the noise behind it.

    ``lower``/``upper`` are fractions of ``value`` (``lower <= 0 <= upper``);
    None means unbounded on that side, as in ReFrame, and that side never
    raises a verdict.  The noise fields are log-scale relative spreads
    (~fractions); all None means a plain ReFrame reference, judged on its
    bounds only.
    """
    value: float
    lower: Optional[float] = None
    upper: Optional[float] = None
    unit: str = ""
    #: robust relative spread of all baseline samples pooled
    spread: Optional[float] = None
    #: number of baseline samples
    n: Optional[int] = None
    #: number of baseline runs
    runs: Optional[int] = None
    #: relative spread of the per-run medians on the *worse* side, as observed
    #: (max of the MAD scale and the tail scale); this is what sees episodes
    between_run_spread: Optional[float] = None
    #: the same on the better side (for IMPROVED hints); None: as worse side
    between_run_spread_better: Optional[float] = None
    #: pooled within-run spread; None if the runs had one sample each (then
    #: all noise is in between_run_spread)
    within_run_spread: Optional[float] = None
    #: lower limit applied to the between-run spread (None: EPISODE_FLOOR)
    episode_floor: Optional[float] = None
    #: the bound hit BOUND_CAP: healthy runs alone need more than the cap
    too_noisy: bool = False
    #: how the value summarised its samples (:data:`ESTIMATOR`); None: not recorded
    estimator: Optional[str] = None
    note: str = ""

    def __post_init__(self):
        if self.lower is not None and self.lower > 0:
            raise ValueError(f"lower bound must be <= 0, got {self.lower}")
        if self.upper is not None and self.upper < 0:
            raise ValueError(f"upper bound must be >= 0, got {self.upper}")

    @property
    def has_noise(self) -> bool:
        return self.spread is not None or self.between_run_spread is not None

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: dict) -> "Reference":
        """Tolerant of unknown keys (older/newer files) and missing noise fields."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def propose_reference(samples_by_run: Sequence[Sequence[float]], unit: str,
                      direction: str, floor: float = BOUND_FLOOR,
                      cap: float = BOUND_CAP, *,
                      episode_floor: float = EPISODE_FLOOR,
                      sigmas: float = BOUND_SIGMAS) -> Reference:
    """Reference from a baseline: one list of samples per run.

    value: :func:`location` of all samples (on the log scale).  Bounds: ``sigmas`` x the spread a single
    future run (of the baseline's typical sample count) is expected to show
    around the reference, between-run episodes and the reference's own
    uncertainty included, clamped to [floor, cap]; the same magnitude on both
    sides (only the worse side fails), never below one step of the printed
    resolution.  Give it many runs, ideally from
    different nights: it can only know about episodes it has sampled.
    """
    _check_direction(direction)
    runs = [c for c in (clean(r)[0] for r in samples_by_run) if c.size]
    if not runs:
        raise ValueError("no finite baseline samples")
    allx = np.concatenate(runs)
    value = location(allx)
    if not value > 0:
        raise ValueError(f"reference value must be positive, got {value}")
    n, r = int(allx.size), len(runs)
    ref_log = math.log(value)
    sign = _worse_sign(direction)

    between = between_better = None
    if r >= 2:
        med_logs = _run_location_logs(runs)
        dev = sign * (med_logs - ref_log)
        mad = _log_spread(np.exp(med_logs))
        between = max(mad, _tail_scale(dev))
        between_better = max(mad, _tail_scale(-dev))
    ref = Reference(value=value, unit=unit, spread=_log_spread(allx), n=n, runs=r,
                    estimator=ESTIMATOR,
                    between_run_spread=between,
                    between_run_spread_better=between_better,
                    within_run_spread=within_run_spread(runs),
                    episode_floor=episode_floor)
    m = max(1, int(round(n / r)))
    s, _ = _noise_model(ref, m)
    raw = sigmas * s
    # One step of the printed resolution (0.01 us of 0.16 us is 6 %) is not a
    # measurable change, whatever the floor says.
    resolution = quantisation_step(allx) / value
    floor = max(floor, resolution)
    bound_log = min(max(raw, _to_log(floor, direction)), _to_log(cap, direction))
    b = _from_log(bound_log, direction)
    ref.lower, ref.upper = -b, b
    notes = []
    if raw > _to_log(cap, direction):
        ref.too_noisy = True
        notes.append(f"too noisy to gate: healthy runs need +-{_from_log(raw, direction):.0%} "
                     f"(bound capped at {cap:.0%})")
    if resolution > BOUND_FLOOR:
        notes.append(f"printed resolution is {resolution:.1%} of the value: "
                     f"smaller changes cannot be seen")
    if r < RECOMMENDED_RUNS:
        notes.append(f"only {r} runs: an episode hitting 1 run in 6 would be missing "
                     f"{(5 / 6) ** r:.0%} of the time")
    if n / r < RECOMMENDED_SAMPLES:
        notes.append(f"{n / r:.1f} samples per run: one wild sample cannot be told "
                     f"from a degradation; take >= {RECOMMENDED_SAMPLES}")
    ref.note = "; ".join(notes)
    return ref


def _to_log(frac: float, direction: str) -> float:
    """Fraction worse -> log distance in the worse direction."""
    if direction == HIGHER:
        return -math.log(max(1.0 - frac, _TINY))
    return math.log1p(frac)


def _from_log(x: float, direction: Optional[str]) -> float:
    """Log distance in the worse direction -> fraction worse."""
    if direction == HIGHER:
        return -math.expm1(-x)
    return math.expm1(x)


# --- the noise model and test -------------------------------------------------

def _variance(within: float, between: float, n_ref: int, runs: int, n_cur: int) -> float:
    """Variance of log(tonight's location) - log(reference).

    Tonight: one run's episode (between) plus the within-run noise of the
    location of n_cur samples.  Reference: the same averaged over its runs/samples.
    """
    return (between ** 2 * (1.0 + 1.0 / runs)
            + within ** 2 * (_location_var_factor(n_cur) / n_cur
                             + _location_var_factor(n_ref) / n_ref))


def _noise_model(ref: Reference, n_cur: int, better: bool = False) -> tuple[float, float]:
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
    return _noise_model(ref, max(1, int(n_cur)))[0]


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
                              bound: float = 0.0, *, runs: Optional[int] = None,
                              between_run_spread_better: Optional[float] = None,
                              direction: Optional[str] = None) -> float:
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
    return _mdc(s, sb, df, alpha, power, _to_log(bound, direction or LOWER), direction)


def _mdc(s: float, s_better: float, df: float, alpha: float, power: float,
         bound_log: float, direction: Optional[str]) -> float:
    # scipy.special rather than scipy.stats: same functions, ~100x less overhead
    # (the block-resampling test calls these tens of thousands of times).
    crit = float(_sp.stdtrit(df, 1.0 - alpha)) * s
    x = max(bound_log, crit) + float(_sp.ndtri(power)) * s_better
    return _from_log(x, direction)


@dataclass
class VerdictResult:
    verdict: str
    value: float
    deviation: Optional[float]      # (value - ref) / ref, signed, raw
    worse_by: Optional[float]       # fraction, positive = worse
    p_value: Optional[float]        # one-sided: worse side; better side if IMPROVED
    mdc: Optional[float]            # minimum detectable worsening (fraction)
    n: int                          # finite samples tonight
    reason: str
    bound: Optional[float] = None   # worse-side tolerance (fraction)
    dropped: int = 0                # non-finite samples dropped
    method: str = ""                # "noise" | "bound-only" | ""
    p_worse: Optional[float] = None
    p_better: Optional[float] = None
    better_bound: Optional[float] = None
    sigma: Optional[float] = None   # sigma of the log-ratio the test used
    sigma_better: Optional[float] = None   # the same on the better side
    df: Optional[float] = None


def _evaluate(ref: Optional[Reference], samples, direction: str) -> VerdictResult:
    """Everything but the decision (which needs alpha, maybe corrected)."""
    _check_direction(direction)
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
    d = _worse_sign(direction) * (math.log(max(value, _TINY)) - math.log(ref.value))
    s, df = _noise_model(ref, res.n)
    sb, _ = _noise_model(ref, res.n, better=True)
    res.sigma, res.sigma_better, res.df = s, sb, df
    res.p_worse = float(_sp.stdtr(df, -d / s))
    res.p_better = float(_sp.stdtr(df, d / sb))
    return res


def _decide(res: VerdictResult, ref: Optional[Reference], direction: str, alpha: float,
            sig_worse: Optional[bool] = None, sig_better: Optional[bool] = None,
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
    res.mdc = None if res.bound is None else _mdc(
        res.sigma, res.sigma_better, res.df, alpha, POWER, _to_log(res.bound, direction),
        direction)
    notes = []
    if ref.between_run_spread is None:
        floor = EPISODE_FLOOR if ref.episode_floor is None else ref.episode_floor
        notes.append(f"between-run noise not measured, assumed {pct(floor)}")
    if ref.too_noisy:
        notes.append("reference marked too noisy to gate")
    if ref.estimator is not None and ref.estimator != ESTIMATOR:
        notes.append(f"reference summarised by {ref.estimator}, tonight by {ESTIMATOR}: "
                     f"re-capture it")
    tail = ("; " + "; ".join(notes)) if notes else ""
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


def _pct(frac: Optional[float]) -> str:
    if frac is None:
        return "n/a"
    return f"{100 * frac:.1f} %" if abs(frac) < 1 else f"{100 * frac:.0f} %"


def verdict(ref: Optional[Reference], samples: Sequence[float], direction: str,
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
    return _decide(_evaluate(ref, samples, direction), ref, direction, alpha)


# --- many variables -------------------------------------------------------------

def adjust(p_values: Sequence[Optional[float]], alpha: float = ALPHA,
           method: str = "holm") -> list[bool]:
    """Which hypotheses to reject while controlling false alarms over the family.

    ``"holm"``: family-wise error <= alpha (no false DEGRADED anywhere in the
    run with probability >= 1 - alpha), valid under any dependence between the
    variables, which share a node and its episodes.  ``"bh"``: Benjamini-
    Hochberg, false-discovery rate <= alpha; more power, but expects some false
    alarms on a run with many real degradations.  None/NaN entries (no test)
    are never rejected and do not count towards the family size.
    """
    p = np.array([np.nan if v is None else float(v) for v in p_values], dtype=float)
    out = np.zeros(p.size, dtype=bool)
    ok = np.isfinite(p)
    m = int(ok.sum())
    if m == 0:
        return out.tolist()
    pv = p[ok]
    if method == "holm":
        order = np.argsort(pv, kind="stable")
        thresholds = alpha / (m - np.arange(m))
        passed = pv[order] <= thresholds
        k = m if passed.all() else int(np.argmin(passed))   # first failure stops
        rej = np.zeros(m, dtype=bool)
        rej[order[:k]] = True
    elif method in ("bh", "fdr_bh", "benjamini-hochberg"):
        # Imported here: scipy.stats costs every command 0.4 s of start-up
        # (over a second on a loaded machine), and only this method needs it.
        from scipy import stats as _st
        rej = _st.false_discovery_control(pv, method="bh") <= alpha
    else:
        raise ValueError(f"unknown method {method!r}: use 'holm' or 'bh'")
    out[ok] = rej
    return out.tolist()


def decide_many(items: Sequence[tuple], alpha: float = ALPHA,
                method: str = "holm") -> list[VerdictResult]:
    """Verdicts for all variables of one run, ``items`` = (ref, samples,
    direction), with the significance corrected across them (:func:`adjust`).

    Worse-side and better-side tests are separate families (IMPROVED is only a
    hint and must not make a DEGRADED harder to reach).  Variables judged on
    bounds only have no p-value and are outside the families.  The MDC is
    reported at alpha / family size, Holm's strictest step, so it is what the
    run can promise for every variable.
    """
    evals = [_evaluate(ref, samples, direction) for ref, samples, direction in items]
    sig_w = adjust([e.p_worse for e in evals], alpha, method)
    sig_b = adjust([e.p_better for e in evals], alpha, method)
    m = max(1, sum(e.p_worse is not None for e in evals))
    out = []
    for e, (ref, _, direction), sw, sb in zip(evals, items, sig_w, sig_b):
        out.append(_decide(e, ref, direction, alpha / m, sig_worse=sw, sig_better=sb,
                           test=f"{method} over {m} variables, alpha {alpha:.2g}"))
    return out


# --- two sets of runs -------------------------------------------------------------

#: The change a comparison must be able to see before it may say SAME.
COMPARE_MARGIN = 0.15
#: Two-sided level of a comparison's intervals and tests (Holm over the figures).
COMPARE_ALPHA = 0.05


@dataclass
class Comparison:
    centre_a: float
    centre_b: float
    change: float                   # (b - a) / a of the centres
    low: Optional[float]            # 95 % interval of the change, None: not estimable
    high: Optional[float]
    p_value: Optional[float]        # two-sided; None: not testable
    mdc: Optional[float]            # smallest change caught on POWER of occasions
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
