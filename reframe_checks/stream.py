"""STREAM: sustainable memory bandwidth of one node, and how it is shared.

The arrays are sized from the node's last-level cache (each at least four
times all of it), so the figures are memory figures, not cache figures.
``StreamBandwidth`` runs every core; ``StreamTriadScaling`` runs Triad on 1,
2, 4 ... all cores in one job, so a memory channel gone missing (per-core
bandwidth collapsing early) shows even when the all-core figure looks
plausible.
"""

import reframe as rfm
from reframe.core.builtins import run_after

from hpc_health.checklib.stream import StreamBase, thread_series
from hpc_health.model.figures import HIGHER, THREAD_COUNTS, Figure
from hpc_health.parsers.stream import KERNELS


def _rate(out, threads, kernel='triad'):
    """Best rate of one execution; *out* is one sample: {threads: output}."""
    return out[threads]['kernels'][kernel]['best_rate_mbs']


def _all_cores(kernel):
    return lambda out: _rate(out, max(out), kernel)     # one thread count: all cores


@rfm.simple_test
class StreamBandwidth(StreamBase):
    """Copy, Scale, Add and Triad bandwidth with every core of a node."""

    figures = [Figure(k.capitalize(), 'MB/s', HIGHER, _all_cores(k),
                      capability='memory_bandwidth_mbs') for k in KERNELS]
    descr = 'STREAM memory bandwidth, all cores'
    tags = {'memory', 'stream'}

    @run_after('setup')
    def set_counts(self):
        self.thread_counts = [self.threads]


@rfm.simple_test
class StreamTriadScaling(StreamBase):
    """Triad bandwidth with 1, 2, 4 ... all cores, total and per core.

    Per-core bandwidth falls as cores contend for the memory channels; how
    fast it falls is the node's signature, and a missing DIMM or a channel
    running degraded changes it.
    """

    figures = [Figure('triad_{}', 'MB/s', HIGHER, _rate, THREAD_COUNTS,
                      capability='memory_bandwidth_mbs'),
               Figure('triad_per_core_{}', 'MB/s', HIGHER, lambda out, t: _rate(out, t) / t,
                      THREAD_COUNTS, capability='memory_bandwidth_mbs/cores')]
    descr = 'STREAM Triad per thread count (memory contention)'
    tags = {'memory', 'stream'}

    @run_after('setup')
    def set_counts(self):
        self.fill_from_settings('stream', thread_counts='thread_counts')
        self.thread_counts = sorted(set(self.thread_counts or thread_series(self.threads)))
