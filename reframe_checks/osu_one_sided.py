"""OSU one-sided latency: ``MPI_Put`` between two ranks.

Remote memory access takes another path through the MPI library and the
fabric (RDMA windows, flush synchronisation) than two-sided messages, so a
regression of one-sided latency can hide behind a healthy ``osu_latency``.
"""

import reframe as rfm
from reframe.core.builtins import parameter

from hpc_health.checklib.osu import OsuBase, sized
from hpc_health.model.figures import LOWER


@rfm.simple_test
class OsuPutLatency(OsuBase):
    """``osu_put_latency`` per gated message size, one rank on each side."""

    placement = parameter(['intra_node', 'inter_node'])
    benchmark = 'osu_put_latency'
    size_set = 'latency'
    validate = False        # OSU 7.4's one-sided tests have no -c
    figures = [sized('put_latency', 'us', LOWER, 'avg_latency_us', 'osu_put_latency')]
    descr = 'OSU MPI_Put latency'
    tags = {'mpi', 'osu', 'network'}
    pair = True
