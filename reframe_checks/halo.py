"""Halo exchange: nearest-neighbour MPI exchange on a periodic Cartesian grid.

A slow exchange at one message size points at a different culprit than at
another: latency-bound small messages (launcher, fabric, progress engine),
bandwidth-bound large ones (links, memory).  Every payload is verified, so a
corrupting fabric fails the check instead of looking fast.
"""

from statistics import median

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import parameter, run_before, sanity_function, variable

from hpc_health.checklib.kernels import KernelRun
from hpc_health.model.figures import LOWER, MESSAGE_SIZES, Figure
from hpc_health.parsers.kernels import parse_halo


def _time(out, size):
    """A launch's time per exchange (max over ranks): the median of its
    repetitions, which share the launch's placement.  A launch runs one
    strategy."""
    (by_size,) = out['results'].values()
    return median(by_size[size]['samples'])


@rfm.simple_test
class HaloExchange(KernelRun):
    """Time per exchange for each message size."""

    dims = parameter([1, 2, 3])
    #: Exchange strategy (names from the IBM SP halo-exchange study).
    strategy = parameter(['BSBR', 'SERE', 'ISBR', 'ISIR', 'IRIS'])

    #: Message sizes (bytes), timed exchanges, untimed ones first, and
    #: repetitions inside one launch.  Unset: the site settings
    #: ``kernels.halo_sizes``, ``halo_iters``, ``halo_warmup``,
    #: ``halo_repetitions`` (defaults 8 B-1 MiB, 200, 20, 1).
    sizes = variable(typ.List[int], type(None), value=None)
    iters = variable(int, type(None), value=None)
    warmup = variable(int, type(None), value=None)
    repetitions = variable(int, type(None), value=None)

    figures = [Figure('time_{}', 'us', LOWER, _time, MESSAGE_SIZES)]
    program = 'halo'
    parser = staticmethod(parse_halo)
    tags = {'kernels', 'mpi', 'halo', 'single_node'}
    descr = 'Halo exchange time per message size'

    @run_before('run')
    def set_options(self):
        self.fill_from_settings('kernels', sizes='halo_sizes', iters='halo_iters',
                                warmup='halo_warmup', repetitions='halo_repetitions')
        self.executable_opts = [
            '--dims', str(self.dims), '--strategy', self.strategy,
            '--sizes', ','.join(str(s) for s in self.sizes), '--iters', str(self.iters),
            '--warmup', str(self.warmup), '--samples', str(self.repetitions), '--json']

    @sanity_function
    def verified(self):
        checks = [sn.assert_eq(self.job.exitcode, 0, msg='halo exited with {0}')]
        for i, out in enumerate(self.outputs(), 1):
            missing = [s for s in self.sizes if s not in out['results'].get(self.strategy, {})]
            checks += [
                sn.assert_eq(out['verification'], 'passed',
                             msg=f'launch {i}: payload verification {out["verification"]}: '
                                 f'{out["errors"]} corrupted message(s)'),
                sn.assert_false(missing, msg=f'launch {i}: no result for sizes {missing}')]
        return sn.all(checks)
