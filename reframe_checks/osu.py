"""OSU Micro-Benchmarks: point-to-point latency and bandwidth within a node
and between two nodes, message rate with several pairs, and the collectives
applications lean on, over the whole allocation (the non-blocking allreduce
with its overlap of communication and computation).

Only the message sizes the site gates on are measured (``-m MIN:MAX``,
settings ``osu.sizes``), and the table must reach the largest one: a run cut
short is a failure, not a smaller figure.  With ``-c`` (OSU 7) every payload
is validated.  Each launch of the benchmark is one sample.
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after, variable
from reframe.core.exceptions import SanityError

from hpc_health.checklib.check import num_nodes, ranks_per_node
from hpc_health.checklib.osu import OsuBase, sized
from hpc_health.model.figures import HIGHER, LOWER, Figure


@rfm.simple_test
class OsuPointToPoint(OsuBase):
    """Latency, bandwidth and bidirectional bandwidth between two ranks."""

    benchmark = parameter(['osu_latency', 'osu_bw', 'osu_bibw'])
    placement = parameter(['intra_node', 'inter_node'])
    figures = [sized('latency', 'us', LOWER, 'avg_latency_us', 'osu_latency', 'link_latency_us'),
               sized('bw', 'MB/s', HIGHER, 'bandwidth_mbs', 'osu_bw', 'link_bandwidth_mbs'),
               sized('bibw', 'MB/s', HIGHER, 'bandwidth_mbs', 'osu_bibw', 'link_bandwidth_mbs')]
    descr = 'OSU point-to-point latency and bandwidth'
    tags = {'mpi', 'osu', 'network'}
    pair = True


@rfm.simple_test
class OsuMessageRate(OsuBase):
    """Aggregate bandwidth and message rate of several concurrent pairs
    (``osu_mbw_mr``): within a node, or across two nodes."""

    placement = parameter(['intra_node', 'inter_node'])
    #: Communicating pairs.  Unset: ``osu.pairs``, else half the ranks per node.
    pairs = variable(int, type(None), value=None)
    benchmark = 'osu_mbw_mr'
    figures = [sized('bw', 'MB/s', HIGHER, 'bandwidth_mbs', 'osu_mbw_mr'),
               sized('msg_rate', 'messages/s', HIGHER, 'messages_per_s', 'osu_mbw_mr')]
    descr = 'OSU multiple-pair bandwidth and message rate'
    tags = {'mpi', 'osu', 'network'}

    @run_after('setup')
    def place_ranks(self):
        self.fill_from_settings('osu', pairs='pairs')
        self.pairs = self.pairs or max(1, ranks_per_node(self) // 2)
        self.num_tasks = 2 * self.pairs
        # Blocks of ranks per node, and OSU pairs rank i with i + pairs:
        # inter-node, every pair crosses the two nodes.
        self.num_tasks_per_node = self.pairs if self.inter_node else self.num_tasks

    def check_output(self):
        super().check_output()
        ran = self.outputs()[0]['pairs']
        if ran not in (None, self.pairs):
            raise SanityError(f'osu_mbw_mr ran {ran} pairs, {self.pairs} were requested')


_COLLECTIVES = ('osu_allreduce', 'osu_alltoall', 'osu_bcast')


@rfm.simple_test
class OsuCollective(OsuBase):
    """Collective latency over every rank of the allocation (nodes x ranks
    per node): average and slowest rank (``-f``).  The non-blocking
    allreduce (``osu_iallreduce``) adds how much of its communication the
    MPI overlaps with a computation: near 100 % with asynchronous progress
    or offload, 0 % where the collective only progresses inside MPI_Wait."""

    benchmark = parameter(['osu_barrier', *_COLLECTIVES, 'osu_iallreduce'])
    figures = [sized('latency', 'us', LOWER, 'avg_latency_us', _COLLECTIVES),
               sized('latency_max', 'us', LOWER, 'max_latency_us', _COLLECTIVES),
               # osu_iallreduce: the collective alone (Pure Comm.), and overlapped.
               sized('latency', 'us', LOWER, 'pure_comm_us', 'osu_iallreduce'),
               sized('latency_max', 'us', LOWER, 'max_comm_us', 'osu_iallreduce'),
               sized('overlap', '%', HIGHER, 'overlap_pct', 'osu_iallreduce'),
               # Barrier prints one row and no size column.
               Figure('latency', 'us', LOWER, lambda t: t['rows'][0]['avg_latency_us'],
                      where={'benchmark': 'osu_barrier'}),
               Figure('latency_max', 'us', LOWER, lambda t: t['rows'][0]['max_latency_us'],
                      where={'benchmark': 'osu_barrier'})]
    descr = 'OSU collective latency over the whole allocation'
    tags = {'mpi', 'osu', 'network'}

    @run_after('setup')
    def place_ranks(self):
        self.num_tasks_per_node = ranks_per_node(self)
        self.num_tasks = self.num_tasks_per_node * num_nodes(self)
        self.skip_for(self.num_tasks < 2, 'a collective needs 2 ranks or more')
