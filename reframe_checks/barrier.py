"""MPI_Barrier latency on communicators of growing size, and MPI_Init time.

Barrier latency grows with log(communicator size) on a healthy fabric; a
jump at one size localises the problem (a switch level, a slow node).
MPI_Init time is a launcher-health figure: it degrades when the launcher,
PMIx or the network address exchange does.
"""

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_before, sanity_function, variable

from hpc_health.checklib.kernels import KernelRun
from hpc_health.model.figures import LOWER, Axis, Figure
from hpc_health.parsers.kernels import parse_barrier


def comm_sizes(nranks):
    """Powers of two up to *nranks*, and *nranks* itself."""
    sizes, p = [], 1
    while p <= nranks:
        sizes.append(p)
        p *= 2
    return sizes if sizes[-1] == nranks else sizes + [nranks]


@rfm.simple_test
class BarrierLatency(KernelRun):
    """Median barrier time per communicator size, p90 on the whole
    allocation, and MPI_Init time."""

    #: Timed and warm-up barriers per communicator size.  Unset: the site
    #: settings ``kernels.barrier_iters`` / ``barrier_warmup`` (2000, 200).
    iters = variable(int, type(None), value=None)
    warmup = variable(int, type(None), value=None)

    #: Communicators timed (one rank has nothing to wait for), and the largest.
    timed_sizes = variable(typ.List[int], value=[])
    world = variable(typ.List[int], value=[])

    figures = [
        Figure('median_n{}', 'us', LOWER, lambda out, n: out['results'][n]['median'],
               Axis('timed_sizes')),
        Figure('p90_n{}', 'us', LOWER, lambda out, n: out['results'][n]['p90'], Axis('world')),
        Figure('mpi_init', 's', LOWER, lambda out: out['mpi_init_s']),
    ]
    program = 'barrier'
    parser = staticmethod(parse_barrier)
    tags = {'kernels', 'mpi', 'barrier', 'single_node'}
    descr = 'MPI_Barrier latency per communicator size and MPI_Init time'

    @run_before('run')
    def set_options(self):
        self.fill_from_settings('kernels', iters='barrier_iters', warmup='barrier_warmup')
        self.timed_sizes = [n for n in comm_sizes(self.num_tasks) if n > 1]
        self.world = self.timed_sizes[-1:]
        self.executable_opts = ['--iters', str(self.iters), '--warmup', str(self.warmup),
                                '--json']

    @sanity_function
    def complete(self):
        checks = [sn.assert_eq(self.job.exitcode, 0, msg='barrier exited with {0}')]
        for i, out in enumerate(self.outputs(), 1):
            missing = [n for n in comm_sizes(self.num_tasks) if n not in out['results']]
            checks += [
                sn.assert_eq(out['ranks'], self.num_tasks,
                             msg=f'launch {i}: barrier ran on {{0}} ranks, expected {{1}}'),
                sn.assert_false(missing,
                                msg=f'launch {i}: no result for communicator sizes {missing}')]
        return sn.all(checks)
