"""Two levels in a baseline: a figure whose samples fall in two clusters
with nothing between them, the node switching between two states.

On this 2-vCPU guest a launch finds the host running its two vCPUs either
on one physical core or on two, and keeps that for minutes: the 2-thread
STREAM bandwidths sit at ~48 or ~75 GB/s, the shared-memory latencies at
~0.12 or ~0.36 us, the halo times at 4 KiB at ~4.5 or ~7.0 us, each level
quiet to 1-3 %.  On a cluster the same shape comes from two kinds of node
in a partition, or from two placements (one switch or three).  A spread
fitted to such a baseline is the distance between the levels, not noise
that more runs or more rounds average away.  So when the node switched
between runs (most runs at one level each) and enough runs saw the worse
level, the capture makes that level the reference, with its own spread
(pooled with the better level's when only two runs saw it; a night at the
better one is no loss); otherwise it says why the figure is weak.  Runs
that each mix the levels alike have a steady location of their own, and
keep it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hpc_health.stats.constants import HIGHER, MIN_SPREAD

#: Empty gap between the levels, in pooled within-level SDs, to call them
#: two: on 15 to 25 samples of one level (normal, t with 1.5 or 3 degrees of
#: freedom, exponential) the widest split gap passed 6 in at most 0.2 % of
#: 3 000 draws; the two-state figures of this guest show 9 to 40.
MIN_GAP = 6.0
#: Least ratio of the levels: five runs of one level, each quiet within
#: itself, can fall in two clumps with an empty gap between them by chance
#: (the gate bench's stores at 10 % night noise did for about one figure in
#: twenty); the states of this guest are 1.3 to 3 times apart.
MIN_RATIO = 1.25
#: Fewest samples of a baseline, and of each level: fewer say nothing of a
#: level's own spread.
MIN_SAMPLES, MIN_PER_LEVEL = 10, 3
#: Runs each level must be seen in: a level of one run is one episode.
#: Not asked of the better level of a figure judged at its worse one: a
#: night at the better level passes whether it was one run's episode or a
#: state, so one run is enough to know the worse level is not the only one
#: (walk 6: the 2-thread Triads at 79 GB/s in the first baseline run and at
#: 47-51 in the four after it).
MIN_RUNS_PER_LEVEL = 2


@dataclass(frozen=True)
class Levels:
    """The two levels: their locations (geometric means), sample counts,
    and the value between them that parts them (the middle of the gap)."""
    low: float
    high: float
    n_low: int
    n_high: int
    cut: float = 0.0

    def pure_runs(self, samples_by_run: Sequence[Sequence[float]]) -> int:
        """How many runs had all their samples at one level."""
        return sum(len({x < self.cut for x in xs if x is not None and math.isfinite(x)
                        and x > 0}) == 1 for xs in samples_by_run)

    def at_worse(self, samples_by_run: Sequence[Sequence[float]],
                 direction: str) -> list[list[float]]:
        """Each run's samples at the worse level (*direction*: which way is
        better), an empty list for a run that had none."""
        on_low = direction == HIGHER
        return [[x for x in xs if x is not None and math.isfinite(x) and x > 0
                 and (x < self.cut) == on_low] for xs in samples_by_run]


def two_levels(samples_by_run: Sequence[Sequence[float]],
               resolution: float = 0.0, direction: str | None = None) -> Levels | None:
    """The two levels of a baseline's samples (one list per run), or None
    when they do not fall in two.  *resolution*: one printed step as a
    fraction of the value; levels one or two steps apart are rounding.
    *direction* (which way is better), when given: the better level may
    have been seen in a single run (:data:`MIN_RUNS_PER_LEVEL`)."""
    tagged = sorted((math.log(x), run) for run, xs in enumerate(samples_by_run)
                    for x in xs if x is not None and math.isfinite(x) and x > 0)
    n = len(tagged)
    if n < MIN_SAMPLES:
        return None
    logs = np.array([t[0] for t in tagged])
    floor = max(MIN_SPREAD, resolution / math.sqrt(12.0))
    best: tuple[float, int] | None = None
    for i in range(MIN_PER_LEVEL, n - MIN_PER_LEVEL + 1):
        lo, hi = logs[:i], logs[i:]
        within = math.sqrt((lo.var() * lo.size + hi.var() * hi.size) / max(n - 2, 1))
        gap = (hi[0] - lo[-1]) / max(within, floor)
        if best is None or gap > best[0]:
            best = (gap, i)
    if best is None or best[0] < MIN_GAP:
        return None
    i = best[1]
    if float(logs[i:].mean() - logs[:i].mean()) < math.log(MIN_RATIO):
        return None
    runs_low, runs_high = len({t[1] for t in tagged[:i]}), len({t[1] for t in tagged[i:]})
    if direction is not None:
        worse_runs = runs_low if direction == HIGHER else runs_high
        if worse_runs < MIN_RUNS_PER_LEVEL:
            return None
    elif min(runs_low, runs_high) < MIN_RUNS_PER_LEVEL:
        return None
    return Levels(math.exp(float(logs[:i].mean())), math.exp(float(logs[i:].mean())),
                  i, n - i, math.exp((float(logs[i - 1]) + float(logs[i])) / 2.0))


#: Empty gap between the levels, in pooled within-level SDs, for a figure
#: whose launches another figure of the same check parted already (one
#: launch prints STREAM's four kernels, and a host state moves them
#: together).  The split is given, not searched for among the samples' gaps,
#: so the gap a single level shows by chance is far smaller than
#: :data:`MIN_GAP`'s; walk 17's Add and Triad showed 5.5 and 4.7 beside
#: Copy's 10.6 (41-47 and 56-64 GB/s).  The levels' ratio is still asked
#: (:data:`MIN_RATIO`).
MIN_GAP_GIVEN = 3.0


def worse_launches(levels: Levels, samples_by_run: Sequence[Sequence[float]],
                   direction: str) -> list[list[bool | None]]:
    """For each run, for each of its launches (samples in launch order),
    whether that launch was at the worse level (None: no finite sample).
    A run may mix the levels: walk 18's second run had launches 1, 2 and 5
    at 65-70 GB/s and 3-4 at 45."""
    on_low = direction == HIGHER
    return [[(x < levels.cut) == on_low if x is not None and math.isfinite(x) and x > 0
             else None for x in xs] for xs in samples_by_run]


def split_as(samples_by_run: Sequence[Sequence[float]], worse: Sequence[Sequence[bool | None]],
             direction: str, resolution: float = 0.0) -> Levels | None:
    """The two levels of a figure whose launches are parted as ``worse``
    says (another figure of the same launches found them, labels from
    :func:`worse_launches`), or None when the launches do not match or its
    own samples do not bear that out: each side's samples all beyond the
    other's, :data:`MIN_GAP_GIVEN` within-level SDs apart and
    :data:`MIN_RATIO`."""
    if [len(xs) for xs in samples_by_run] != [len(ws) for ws in worse]:
        return None     # not the same launches: a split cannot be carried over
    sides: list[list[float]] = [[], []]
    for xs, labels in zip(samples_by_run, worse):
        for x, bad in zip(xs, labels):
            if bad is not None and x is not None and math.isfinite(x) and x > 0:
                sides[bad == (direction == HIGHER)].append(math.log(x))
    hi, lo = (np.array(s) for s in sides)
    if min(lo.size, hi.size) < MIN_PER_LEVEL or lo.max() >= hi.min():
        return None
    within = math.sqrt((lo.var() * lo.size + hi.var() * hi.size) / (lo.size + hi.size - 2))
    floor = max(MIN_SPREAD, resolution / math.sqrt(12.0))
    if (hi.min() - lo.max()) / max(within, floor) < MIN_GAP_GIVEN \
            or hi.mean() - lo.mean() < math.log(MIN_RATIO):
        return None
    return Levels(math.exp(float(lo.mean())), math.exp(float(hi.mean())), lo.size, hi.size,
                  math.exp((float(lo.max()) + float(hi.min())) / 2.0))
