"""The decisions behind the statistics: the verdict names, every constant
(with its reason), which way is worse and the log scale changes are
measured on."""

from __future__ import annotations

import math

from hpc_health.units import DIRECTIONS, HIGHER, LOWER  # noqa: F401 - re-exported

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

TINY = 1e-300
#: Largest log distance turned back into a fraction (exp(700) is near the
#: largest float).
MAX_LOG = 700.0
#: Largest fraction a proposed bound allows on the better side.
BETTER_MAX = 0.99


# --- direction ----------------------------------------------------------------

def check_direction(direction: str) -> str:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be 'higher' or 'lower', not {direction!r}")
    return direction


def to_log(frac: float, direction: str) -> float:
    """Fraction worse -> log distance in the worse direction."""
    if direction == HIGHER:
        return -math.log(max(1.0 - frac, TINY))
    return math.log1p(frac)


def from_log(x: float, direction: str | None) -> float:
    """Log distance in the worse direction -> fraction worse."""
    # Samples near 0 give log distances near 700: keep the fraction finite
    # (and absurd) rather than overflowing.
    x = min(x, MAX_LOG)
    if direction == HIGHER:
        return -math.expm1(-x)
    return math.expm1(x)


