"""IOR and mdtest in the partition's scratch file system, under Darshan.

IOR writes and reads back in three patterns that stress different parts of a
parallel file system: a file per process (metadata and client parallelism),
one shared file written independently (locking, striping) and one shared
file through collective MPI-IO (the MPI library's aggregation).  mdtest
measures file creation, stat and removal rates.

Every run is instrumented with Darshan, and the log is held against what the
benchmark was asked to do: a Darshan runtime without MPI support, or a run
that moved other bytes than asked, fails instead of producing figures.

Each test works in its own ``mktemp -d`` directory below the site's
``scratch`` setting and removes that directory, and nothing else, at the end.
"""

import functools
import os
import shlex

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import parameter, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from hpc_health.checklib.check import num_nodes
from hpc_health.checklib.ior import (
    IO_DIR_VAR,
    IOR_MODES,
    IoBase,
    check_ior_summary,
    check_mdtest,
    darshan_figures,
    ior_options,
    mdtest_options,
)
from hpc_health.checklib.launches import RepeatedLaunches
from hpc_health.model.figures import HIGHER, Figure
from hpc_health.parsers import ParseError
from hpc_health.parsers.mdtest import parse_mdtest


def _ior(op, key):
    return lambda it: it[op].get(key)


@rfm.simple_test
class IorBandwidth(IoBase):
    """Write and read bandwidth (each repetition a sample, the figure their
    location), and what Darshan saw, per access pattern."""

    #: ``posix_fpp`` (file per process), ``posix_shared`` (one shared file)
    #: or ``mpiio_collective`` (one shared file, collective MPI-IO).
    mode = parameter(list(IOR_MODES))

    #: IOR sizes: ``-b`` per rank and segment, ``-t``, ``-s`` segments and
    #: ``-i`` repetitions.  Unset: the site settings ``ior.block_size``,
    #: ``ior.transfer_size``, ``ior.segments``, ``ior.repetitions``, else
    #: 16m, 1m, 4 and 3.
    #:
    #: :type: :class:`str`/:class:`int` or :obj:`None`
    #: :default: :obj:`None`
    block_size = variable(str, int, type(None), value=None)
    transfer_size = variable(str, int, type(None), value=None)
    segments = variable(int, type(None), value=None)
    repetitions = variable(int, type(None), value=None)
    #: Open the files ``O_DIRECT`` (POSIX modes).  Unset: ``ior.direct_io``.
    #:
    #: :type: :class:`bool` or :obj:`None`
    #: :default: :obj:`None`
    direct_io = variable(typ.Bool, type(None), value=None)

    figures = [Figure(f'{op}_bw', 'MiB/s', HIGHER, _ior(op, 'bw_mib'), capability='fs_bandwidth_mibs')
               for op in ('write', 'read')]
    # Not IOR's open and close times: it prints them to 0.1 ms, and on a node
    # file system they are 0 in nearly every sample (docs/figures.md).
    # Darshan's metadata time (open, close, stat, seek; microsecond timers)
    # is the file system's metadata figure instead.
    figures += darshan_figures('POSIX') + darshan_figures('MPI-IO')
    descr = 'IOR write/read bandwidth in the scratch file system'
    tags = {'io', 'ior'}
    dir_name = 'hpc-health-ior'

    @run_before('run')
    def set_command(self):
        self.fill_from_settings('ior', block_size='block_size', transfer_size='transfer_size',
                                segments='segments', repetitions='repetitions',
                                direct_io='direct_io')
        opts = ior_options(self.mode, self.block_size, self.transfer_size, self.segments,
                           self.repetitions, f'"${IO_DIR_VAR}/testfile"', self.summary_file,
                           self.direct_io)
        self.keep_files.append('ior-summary.json')
        self.launch(os.path.join(self.ior.prefix('ior'), 'bin', 'ior'), opts)

    def darshan_modules(self):
        api = IOR_MODES[self.mode][0]
        return ['POSIX', 'MPI-IO'] if api == 'MPIIO' else ['POSIX']

    @sanity_function
    def moved_what_was_asked(self):
        self.require_success('IOR')
        out = self.ior_summary
        expected = self.consistent(check_ior_summary, out, self.mode, self.num_tasks)
        api = IOR_MODES[self.mode][0]
        direct = ' (O_DIRECT)' if self.direct_io and api == 'POSIX' else ''
        lines = [f'IOR {out["version"]}: {self.mode}{direct}, {self.num_tasks} ranks, '
                 f'{expected} B written and read back',
                 f'command: {out["command_line"]}']
        for op in ('write', 'read'):
            f = out['operations'][op]
            lines.append(f'{op}: max {f["bw_max_mib"]} MiB/s, mean {f["bw_mean_mib"]} '
                         f'MiB/s, open {f["open_time_s"]} s, close {f["close_time_s"]} s')
        posix = ('POSIX', expected, expected, self.posix_allowance)
        if api == 'MPIIO':
            self.check_darshan_bytes(('MPI-IO', expected, expected, 0), posix)
        else:
            self.check_darshan_bytes(posix)
        self.write_summary(lines)
        return True

    def outputs(self):
        return self.ior_samples()


#: mdtest's rate rows that are figures.
MDTEST_PHASES = ('directory_creation', 'directory_stat', 'directory_removal',
                 'file_creation', 'file_stat', 'file_removal')


@rfm.simple_test
class MdtestRates(IoBase, RepeatedLaunches):
    """File and directory creation, stat and removal rates (mdtest, from the
    IOR build; each launch one sample), with Darshan's metadata time of the
    last launch."""

    #: Files and directories per rank (``-n``), launches (each a sample) and
    #: bytes written to each file (``-w``).  Unset: the site settings
    #: ``mdtest.items``, ``mdtest.samples``, ``mdtest.write_bytes``.
    items = variable(int, type(None), value=None)
    samples = variable(int, type(None), value=None)
    write_bytes = variable(int, type(None), value=None)

    figures = [Figure(p, 'ops/s', HIGHER, lambda out, p=p: out['rates'][p]['mean'])
               for p in MDTEST_PHASES] + darshan_figures('POSIX', with_bytes=False)
    descr = 'mdtest metadata rates in the scratch file system'
    tags = {'io', 'mdtest'}
    dir_name = 'hpc-health-mdtest'
    settings_section = 'mdtest'

    @run_before('run')
    def set_command(self):
        self.fill_from_settings('mdtest', items='items', samples='samples',
                                write_bytes='write_bytes')
        opts = mdtest_options(self.items, 1, f'"${IO_DIR_VAR}/tree"', self.write_bytes,
                              self.num_tasks_per_node, num_nodes(self))
        self.launch(os.path.join(self.ior.prefix('ior'), 'bin', 'mdtest'), opts)

    def relaunch_cmds(self):
        # Darshan's log is the last launch's: each launch writes its own.
        return [f'rm -f {shlex.quote(self.darshan_log)}']

    @functools.cached_property
    def _launches(self):
        parsed = []
        for i, body in enumerate(self.launch_outputs('mdtest'), 1):
            try:
                parsed.append(parse_mdtest(body))
            except ParseError as err:
                raise SanityError(f'mdtest output, launch {i}: {err}') from None
        return parsed

    def outputs(self):
        return self._launches

    @sanity_function
    def complete(self):
        self.require_success('mdtest')
        lines = []
        for out in self.outputs():
            self.consistent(check_mdtest, out, self.num_tasks, self.items, MDTEST_PHASES)
            lines.append(f'mdtest {out["version"]}: {out["tasks"]} ranks, {out["items"]} '
                         'items: ' + ', '.join(f'{p} {out["rates"][p]["mean"]} ops/s'
                                               for p in MDTEST_PHASES))
        written = self.write_bytes * self.items * self.num_tasks
        # mdtest reads back what it wrote only with -e; we never pass it.
        self.check_darshan_bytes(('POSIX', written, 0, self.posix_allowance))
        self.write_summary(lines)
        return True
