"""A gross fault of one node against its own record: the short check fit
for Slurm's ``HealthCheckProgram`` (``hpc-health node-check``).

The check runs for seconds with no build and no peers, so it can only
catch what no noise explains: a figure at least :data:`GROSS_FACTOR` times
worse than the median of the node's own recent healthy checks (a CPU
throttled to a fraction, a memory channel gone).  A first few checks only
record; a check that finds a gross fault is not recorded, so a sick node
never becomes its own yardstick.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import median

from hpc_health.stats.constants import HIGHER

#: Times worse than the node's usual before it is a gross fault.  Measured
#: on the local Slurm cluster's shared 2-core VM at load 8-9 from other
#: work (hpc_health.jobside.quickprobe, best of five 0.25 s windows):
#: three healthy checks in a row moved 1.3x (triad_1t 23-31 GB/s,
#: cpu_all_cores 0.071-0.093 s); with node02 capped to a tenth of its CPUs,
#: against a record made at that load, triad_1t was 3.2-3.3x worse and
#: cpu_all_cores 2.3-2.6x.
GROSS_FACTOR = 2.5
#: Healthy checks recorded before a node is judged against them.
MIN_RECORDS = 3
#: Healthy checks kept per figure (the oldest dropped).
KEEP = 20


@dataclass
class Gross:
    """A figure many times worse than the node's usual."""
    name: str
    value: float
    usual: float            # median of the recorded healthy checks
    times: float            # how many times worse (>= GROSS_FACTOR)
    records: int


def times_worse(value: float, usual: float, better: str) -> float:
    """How many times worse *value* is than *usual* (1: the same, below 1: better)."""
    if value <= 0 or usual <= 0:
        return float("inf") if (value <= 0) == (better == HIGHER) else 0.0
    return usual / value if better == HIGHER else value / usual


def judge(values: Mapping[str, float], better: Mapping[str, str],
          record: Mapping[str, Sequence[float]]) -> list[Gross]:
    """The figures of *values* that are a gross fault against *record*
    ({figure: recent healthy values}); none while fewer than
    :data:`MIN_RECORDS` are recorded."""
    out = []
    for name, value in values.items():
        past = list(record.get(name) or ())[-KEEP:]
        if len(past) < MIN_RECORDS:
            continue
        usual = median(past)
        times = times_worse(value, usual, better[name])
        if times >= GROSS_FACTOR:
            out.append(Gross(name, value, usual, times, len(past)))
    return sorted(out, key=lambda g: -g.times)


def recorded(values: Mapping[str, float], record: Mapping[str, Sequence[float]]
             ) -> dict[str, list[float]]:
    """*record* with this healthy check's *values* added, :data:`KEEP` a figure."""
    out = {k: list(v)[-KEEP:] for k, v in record.items()}
    for name, value in values.items():
        out[name] = (out.get(name, []) + [value])[-KEEP:]
    return out
