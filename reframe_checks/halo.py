"""Halo exchange: nearest-neighbour MPI exchange on a periodic Cartesian grid.

A slow halo exchange at one message size points at a different culprit than
at another: latency-bound small messages (launcher, fabric, progress engine),
bandwidth-bound large ones (links, memory).  Every payload is verified, so a
corrupting fabric fails the check instead of looking fast.
"""

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import (parameter, run_before, sanity_function,
                                   variable)

from hpc_health.checklib import site
from hpc_health.checklib.kernels import KernelRun
from statistics import median
from hpc_health.parsers.kernels import parse_halo
from hpc_health.units import size_label


@rfm.simple_test
class HaloExchange(KernelRun):
    """Time per exchange (max over ranks) for each message size: per launch
    the median of its repetitions, and the figure the location
    (:func:`hpc_health.stats.location`) of the launches."""

    #: Dimensions of the process grid.
    dims = parameter([1, 2, 3])

    #: Exchange strategy (names from the IBM SP halo-exchange study).
    strategy = parameter(['BSBR', 'SERE', 'ISBR', 'ISIR', 'IRIS'])

    #: Message sizes in bytes; each one is a performance variable
    #: ``time_<size>``.  Unset: the site setting ``kernels.halo_sizes``, else
    #: 8 B, 4 KiB, 64 KiB and 1 MiB.
    #:
    #: :type: :class:`List[int]` or :obj:`None`
    sizes = variable(typ.List[int], type(None), value=None)

    #: Timed and warm-up iterations.  Unset: the site settings
    #: ``kernels.halo_iters`` / ``kernels.halo_warmup``, else 200 and 20.
    #:
    #: :type: :class:`int` or :obj:`None`
    iters = variable(int, type(None), value=None)
    warmup = variable(int, type(None), value=None)

    #: Repetitions of the measurement inside one launch; the launch's
    #: figure is their median (they share the launch's placement, so they
    #: smooth jitter, not the launch-to-launch spread the samples catch).
    #: Unset: site setting ``kernels.halo_repetitions``, else 1.
    #:
    #: :type: :class:`int` or :obj:`None`
    repetitions = variable(int, type(None), value=None)

    program = 'halo'
    parser = staticmethod(parse_halo)
    tags = {'kernels', 'mpi', 'halo', 'single_node'}
    descr = 'Halo exchange time per message size'

    @run_before('run')
    def set_options(self):
        cfg = site.section(self, 'kernels')
        if self.sizes is None:
            self.sizes = [int(s) for s in cfg.get('halo_sizes', [8, 4096, 65536, 1048576])]
        if self.iters is None:
            self.iters = int(cfg.get('halo_iters', 200))
        if self.warmup is None:
            self.warmup = int(cfg.get('halo_warmup', 20))
        if self.repetitions is None:
            self.repetitions = int(cfg.get('halo_repetitions', 1))
        self.executable_opts = [
            '--dims', str(self.dims), '--strategy', self.strategy,
            '--sizes', ','.join(str(s) for s in self.sizes),
            '--iters', str(self.iters), '--warmup', str(self.warmup),
            '--samples', str(self.repetitions), '--json',
        ]

    @sanity_function
    def verified(self):
        checks = [sn.assert_eq(self.job.exitcode, 0, msg='halo exited with {0}')]
        for i, out in enumerate(self.launches(), 1):
            missing = [s for s in self.sizes if s not in out['results'].get(self.strategy, {})]
            checks += [
                sn.assert_eq(out['verification'], 'passed',
                             msg=f'launch {i}: payload verification {out["verification"]}: '
                                 f'{out["errors"]} corrupted message(s)'),
                sn.assert_false(missing, msg=f'launch {i}: no result for sizes {missing}'),
            ]
        return sn.all(checks)

    def _time_at(self, size):
        return lambda out: median(out['results'][self.strategy][size]['samples'])

    @run_before('performance')
    def set_perf_variables(self):
        self.perf_variables = {
            f'time_{size_label(s)}': sn.make_performance_function(
                self.location_of(self._time_at(s)), 'us')
            for s in self.sizes
        }

    def perf_samples(self):
        return {f'time_{size_label(s)}': self.per_launch(self._time_at(s))
                for s in self.sizes}
