"""MPI_Barrier latency on communicators of growing size, and MPI_Init time.

Barrier latency grows with log(communicator size) on a healthy fabric; a
jump at one size localises the problem (a switch level, a slow node).
MPI_Init time is a launcher-health figure: it degrades when the launcher,
PMIx or the network address exchange does.
"""

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_before, sanity_function, variable

from hpc_health.checklib import site
from hpc_health.checklib.kernels import KernelRun
from hpc_health.parsers.kernels import parse_barrier


def comm_sizes(nranks):
    """Powers of two up to *nranks*, and *nranks* itself."""
    sizes, p = [], 1
    while p <= nranks:
        sizes.append(p)
        p *= 2
    if sizes[-1] != nranks:
        sizes.append(nranks)
    return sizes


@rfm.simple_test
class BarrierLatency(KernelRun):
    """Median barrier time per communicator size, p90 on the whole
    allocation, and MPI_Init time; each figure per launch, then the location
    (:func:`hpc_health.stats.location`) of the launches."""

    #: Timed and warm-up barriers per communicator size.  Unset: the site
    #: settings ``kernels.barrier_iters`` / ``kernels.barrier_warmup``, else
    #: 2000 and 200.
    #:
    #: :type: :class:`int` or :obj:`None`
    iters = variable(int, type(None), value=None)
    warmup = variable(int, type(None), value=None)

    program = 'barrier'
    parser = staticmethod(parse_barrier)
    tags = {'kernels', 'mpi', 'barrier', 'single_node'}
    descr = 'MPI_Barrier latency per communicator size and MPI_Init time'

    @run_before('run')
    def set_options(self):
        cfg = site.section(self, 'kernels')
        if self.iters is None:
            self.iters = int(cfg.get('barrier_iters', 2000))
        if self.warmup is None:
            self.warmup = int(cfg.get('barrier_warmup', 200))
        self.executable_opts = ['--iters', str(self.iters),
                                '--warmup', str(self.warmup), '--json']

    @sanity_function
    def complete(self):
        checks = [sn.assert_eq(self.job.exitcode, 0, msg='barrier exited with {0}')]
        for i, out in enumerate(self.launches(), 1):
            missing = [n for n in comm_sizes(self.num_tasks) if n not in out['results']]
            checks += [
                sn.assert_eq(out['ranks'], self.num_tasks,
                             msg=f'launch {i}: barrier ran on {{0}} ranks, expected {{1}}'),
                sn.assert_false(missing,
                                msg=f'launch {i}: no result for communicator sizes {missing}'),
            ]
        return sn.all(checks)

    def _figures(self):
        """Performance variable -> (unit, figure of one launch's output)."""
        # One rank has nothing to wait for; its "barrier" times a function call.
        sizes = [n for n in comm_sizes(self.num_tasks) if n > 1]
        figures = {f'median_n{n}': ('us', _stat(n, 'median')) for n in sizes}
        if sizes:
            figures[f'p90_n{sizes[-1]}'] = ('us', _stat(sizes[-1], 'p90'))
        figures['mpi_init'] = ('s', lambda out: out['mpi_init_s'])
        return figures

    @run_before('performance')
    def set_perf_variables(self):
        self.perf_variables = {
            name: sn.make_performance_function(self.location_of(figure), unit)
            for name, (unit, figure) in self._figures().items()}

    def perf_samples(self):
        return {name: self.per_launch(figure)
                for name, (_, figure) in self._figures().items()}


def _stat(n, stat):
    return lambda out: out['results'][n][stat]
