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

The package splits by topic: :mod:`.constants` (the decisions),
:mod:`.robust` (summaries of samples), :mod:`.reference` (a reference and
its proposal from a baseline), :mod:`.noise` (the noise model and the
verdict test), :mod:`.multiplicity` (many figures of one run) and
:mod:`.twosets` (two sets of runs).
"""

from __future__ import annotations

from hpc_health.stats.constants import (
    ALPHA,
    BOUND_CAP,
    BOUND_FLOOR,
    BOUND_SIGMAS,
    DEGRADED,
    DIRECTIONS,
    EPISODE_FLOOR,
    ESTIMATOR,
    HIGHER,
    HUBER_EFFICIENCY,
    HUBER_K,
    HUBER_MIN_SAMPLES,
    IMPROVED,
    IQR_TO_SIGMA,
    LOWER,
    MAD_TO_SIGMA,
    MEDIAN_EFFICIENCY,
    MIN_SPREAD,
    NO_REFERENCE,
    PAIR_TO_SIGMA,
    PASS,
    POWER,
    RECOMMENDED_RUNS,
    RECOMMENDED_SAMPLES,
    Direction,
)
from hpc_health.stats.multiplicity import adjust, decide_many, holm_levels
from hpc_health.stats.noise import (
    VerdictResult,
    expected_spread,
    minimum_detectable_change,
    noise_components,
    verdict,
)
from hpc_health.stats.reference import (
    NoReference,
    Reference,
    night_logs,
    propose_reference,
)
from hpc_health.stats.robust import (
    clean,
    location,
    printed_step,
    quantisation_step,
    relative_spread,
    robust_spread,
    within_run_spread,
)
from hpc_health.stats.twosets import (
    BROAD_MIN_CHANGE,
    COMPARE_ALPHA,
    COMPARE_MARGIN,
    UNMEASURABLE,
    BroadShift,
    Comparison,
    broad_shift,
    change_interval,
    compare_runs,
    detectable_change,
)

#: The statistics' API: ``from hpc_health import stats``, then ``stats.verdict(...)``.
__all__ = [
    "adjust",
    "broad_shift",
    "change_interval",
    "detectable_change",
    "BroadShift",
    "BROAD_MIN_CHANGE",
    "holm_levels",
    "UNMEASURABLE",
    "ALPHA",
    "BOUND_CAP",
    "BOUND_FLOOR",
    "BOUND_SIGMAS",
    "clean",
    "COMPARE_ALPHA",
    "COMPARE_MARGIN",
    "compare_runs",
    "Comparison",
    "decide_many",
    "DEGRADED",
    "Direction",
    "DIRECTIONS",
    "EPISODE_FLOOR",
    "ESTIMATOR",
    "expected_spread",
    "HIGHER",
    "HUBER_EFFICIENCY",
    "HUBER_K",
    "HUBER_MIN_SAMPLES",
    "IMPROVED",
    "IQR_TO_SIGMA",
    "location",
    "LOWER",
    "MAD_TO_SIGMA",
    "MEDIAN_EFFICIENCY",
    "MIN_SPREAD",
    "minimum_detectable_change",
    "NO_REFERENCE",
    "NoReference",
    "night_logs",
    "noise_components",
    "PAIR_TO_SIGMA",
    "PASS",
    "POWER",
    "propose_reference",
    "printed_step",
    "quantisation_step",
    "RECOMMENDED_RUNS",
    "RECOMMENDED_SAMPLES",
    "Reference",
    "relative_spread",
    "robust_spread",
    "verdict",
    "VerdictResult",
    "within_run_spread",
]
