"""Which collective algorithm is right on this machine, and is the MPI's
default still close to it?  OSU allreduce, bcast and alltoall under the
default and under every algorithm the MPI offers, each forced and proven
applied (settings ``osu_algorithms``).

Figures: each algorithm's latency per gated size, and the default's time as
a multiple of the best algorithm's (``default_over_best_<size>``): a new MPI
whose default stopped fitting the machine shows there even when no latency
moved much.
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after

from hpc_health.checklib.check import num_nodes, ranks_per_node
from hpc_health.checklib.collectives import OsuAlgorithmSweep


@rfm.simple_test
class OsuCollectiveAlgorithms(OsuAlgorithmSweep):
    """One collective under each algorithm, over the whole allocation."""

    benchmark = parameter(['osu_allreduce', 'osu_bcast', 'osu_alltoall'])
    descr = 'OSU collective latency per algorithm, and the default against the best'
    tags = {'mpi', 'osu', 'network', 'tuning'}
    time_limit = '20m'

    @run_after('setup')
    def place_ranks(self):
        self.num_tasks_per_node = ranks_per_node(self)
        self.num_tasks = self.num_tasks_per_node * num_nodes(self)
        self.skip_for(self.num_tasks < 2, 'a collective needs 2 ranks or more')
