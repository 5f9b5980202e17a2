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
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import (
    fixture,
    parameter,
    run_after,
    run_before,
    sanity_function,
    variable,
)
from reframe.core.exceptions import SanityError

from hpc_health.checklib import darshan
from hpc_health.checklib.benchmarks import (
    IOR_MODES,
    Insane,
    IorBuild,
    check_ior_summary,
    check_mdtest,
    ior_options,
    mdtest_options,
)
from hpc_health.checklib.check import HealthCheck, num_nodes, ranks_per_node, settings
from hpc_health.checklib.launches import RepeatedLaunches
from hpc_health.checklib.shell import shell_path
from hpc_health.judge.figures import HIGHER, LOWER, Figure
from hpc_health.parsers import ParseError
from hpc_health.parsers.ior import parse_ior
from hpc_health.parsers.mdtest import parse_mdtest

_DIR_VAR = 'HPC_HEALTH_IO_DIR'
_SUMMARY = 'io-summary.txt'


def darshan_figures(module, with_bytes=True):
    """What Darshan saw in *module* ('POSIX', 'MPI-IO'): one sample per run
    (one log), ``None`` where Darshan measured nothing for the pattern."""
    prefix = darshan.MODULES[module]
    kinds = [('io_time_slowest_rank', 's', LOWER), ('meta_time', 's', LOWER),
             ('rank_time_ratio', 'ratio', LOWER)]
    if with_bytes:
        # Fewer bytes than asked is lost I/O; more is refused by sanity.
        kinds.insert(0, ('bytes', 'B', HIGHER))
    where = {} if module == 'POSIX' else {'mode': 'mpiio_collective'}
    return [Figure(f'{prefix}_{key}', unit, better,
                   lambda figs, m=module, k=key: figs[m][k], where=where,
                   source='darshan_outputs') for key, unit, better in kinds]


class IoBase(HealthCheck):
    ior = fixture(IorBuild, scope='environment')
    valid_systems = ['+mpi']
    valid_prog_environs = ['+mpi']
    exclusive_access = True
    time_limit = '30m'

    #: Instrument with Darshan.  Unset: the site setting ``ior.darshan``.
    #:
    #: :type: :class:`bool` or :obj:`None`
    #: :default: :obj:`None`
    use_darshan = variable(typ.Bool, type(None), value=None)

    #: Bytes the POSIX module may show beyond the benchmark's own: the MPI
    #: library writes a few hundred bytes to its shared-memory backing files
    #: (``/tmp/ompi.*``).  Unset: the site setting ``ior.posix_allowance``.
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None`
    posix_allowance = variable(int, type(None), value=None)

    #: Prefix of the directory the job creates with ``mktemp -d`` below the
    #: scratch directory (site setting ``scratch``).
    #:
    #: :type: :class:`str`
    #: :default: ``''`` (set at setup)
    io_dir_prefix = variable(str, value='')

    #: Prefix of the directory name below the scratch directory.
    dir_name = 'hpc-health-io'

    #: Settings section of the benchmark (``ior`` or ``mdtest``).
    settings_section = 'ior'

    @run_after('setup')
    def set_tasks(self):
        scratch = settings(self).get('scratch')
        part = self.current_partition.name
        self.skip_for(not scratch, f'no scratch directory for partition {part} '
                                   f'(site setting partitions.{part}.scratch)')
        self.io_dir_prefix = os.path.join(scratch, self.dir_name)
        cfg = settings(self)[self.settings_section]
        self.num_tasks_per_node = cfg.get('ranks_per_node') or ranks_per_node(self)
        self.num_tasks = self.num_tasks_per_node * num_nodes(self)
        self.fill_from_settings('ior', use_darshan='darshan', posix_allowance='posix_allowance')
        self.keep_files = [_SUMMARY]
        if self.use_darshan:
            self.keep_files += [darshan.LOG, darshan.PARSED]

    @property
    def darshan_log(self):
        return os.path.join(self.stagedir, darshan.LOG)

    def launch(self, executable, options):
        """Set the executable, wrapped with Darshan when enabled, and the
        commands that create and remove the test's own directory."""
        executable = shell_path(executable)
        if self.use_darshan:
            executable, options = darshan.wrap(
                executable, options, self.ior.prefix('darshan-runtime'), self.darshan_log)
        self.executable, self.executable_opts = executable, options
        scratch = os.path.dirname(self.io_dir_prefix)
        template = shlex.quote(f'{self.io_dir_prefix}.XXXXXX')
        self.prerun_cmds = [
            f'mkdir -p {shlex.quote(scratch)}',
            f'{_DIR_VAR}=$(mktemp -d {template}) || '
            f'{{ echo "hpc-health: cannot create a directory in {scratch}" >&2; exit 1; }}',
            # Only what this job created goes, whatever happens next.
            f'trap \'rm -rf -- "${_DIR_VAR}"\' EXIT',
            f'echo "hpc-health: I/O in ${_DIR_VAR} from ${{SLURM_JOB_NODELIST:-$(hostname)}}"',
            f'rm -f {shlex.quote(self.darshan_log)}',
        ]
        # Keep the benchmark's exit code through the Darshan post-processing.
        self.postrun_cmds = ['rc=$?']
        if self.use_darshan:
            self.postrun_cmds += darshan.parse_commands(
                self.ior.prefix('darshan-util'), self.darshan_log)
        self.postrun_cmds += ['exit $rc']

    @functools.cached_property
    def _darshan(self):
        try:
            parsed = darshan.load(self.stagedir, self.darshan_log)
            darshan.check_ranks(parsed, self.num_tasks)
            return parsed
        except ParseError as err:
            raise SanityError(f'Darshan: {err}') from None

    def darshan_modules(self):
        return ['POSIX']

    def check_darshan(self):
        """The parsed log, once it proved MPI support (SanityError if not)."""
        return self._darshan

    def write_summary(self, lines):
        if self.use_darshan:
            lines = lines + darshan.summary_lines(self._darshan, self.darshan_modules())
        with open(os.path.join(self.stagedir, _SUMMARY), 'w') as fp:
            fp.write('\n'.join(lines) + '\n')

    def darshan_outputs(self):
        """Darshan's figures per module, one sample (the run's one log)."""
        if not self.use_darshan:
            return []
        return [{m: darshan.figures(self._darshan, m) for m in self.darshan_modules()}]

    def require_success(self, tool):
        if self.job.exitcode:
            raise SanityError(f'{tool} exited with {self.job.exitcode}' + self._stderr_tail())

    @staticmethod
    def consistent(check, *args):
        """The parser's own consistency check, its complaint as the sanity failure."""
        try:
            return check(*args)
        except Insane as err:
            raise SanityError(str(err)) from None

    def check_darshan_bytes(self, *expected):
        """Darshan counted what the benchmark says it moved: one
        (module, written, read, allowance) per module."""
        if not self.use_darshan:
            return
        self.check_darshan()
        try:
            for module, written, read, allowance in expected:
                darshan.check_bytes(self._darshan, module, written, read, allowance)
        except ParseError as err:
            raise SanityError(f'Darshan: {err}') from None

    def _stderr_tail(self):
        try:
            with open(os.path.join(self.stagedir, sn.evaluate(self.stderr))) as fp:
                lines = fp.read().strip().splitlines()
        except OSError:
            return ''
        return ('; stderr: ' + ' | '.join(lines[-5:])) if lines else ''


def _ior(op, key):
    return lambda it: it[op].get(key)


@rfm.simple_test
class IorBandwidth(IoBase):
    """Write and read bandwidth, open and close times (each repetition a
    sample, the figure their location), and what Darshan saw, per access
    pattern."""

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

    figures = [Figure(f'{op}_bw', 'MiB/s', HIGHER, _ior(op, 'bw_mib'), capability='fs_bandwidth_mibs')
               for op in ('write', 'read')]
    # Older IOR versions print no open/close times (then not reported).
    figures += [Figure(f'{op}_{phase}_time', 's', LOWER, _ior(op, f'{phase}_time_s'))
                for op in ('write', 'read') for phase in ('open', 'close')]
    figures += darshan_figures('POSIX') + darshan_figures('MPI-IO')
    descr = 'IOR write/read bandwidth in the scratch file system'
    tags = {'io', 'ior'}
    dir_name = 'hpc-health-ior'

    @property
    def summary_file(self):
        return os.path.join(self.stagedir, 'ior-summary.json')

    @run_before('run')
    def set_command(self):
        self.fill_from_settings('ior', block_size='block_size', transfer_size='transfer_size',
                                segments='segments', repetitions='repetitions')
        opts = ior_options(self.mode, self.block_size, self.transfer_size, self.segments,
                           self.repetitions, f'"${_DIR_VAR}/testfile"', self.summary_file)
        self.keep_files.append('ior-summary.json')
        self.launch(os.path.join(self.ior.prefix('ior'), 'bin', 'ior'), opts)

    def darshan_modules(self):
        api = IOR_MODES[self.mode][0]
        return ['POSIX', 'MPI-IO'] if api == 'MPIIO' else ['POSIX']

    @functools.cached_property
    def _ior(self):
        try:
            with open(self.summary_file) as fp:
                text = fp.read()
        except OSError:
            raise SanityError('IOR wrote no JSON summary' + self._stderr_tail()) from None
        try:
            return parse_ior(text)
        except ParseError as err:
            raise SanityError(f'IOR summary: {err}') from None

    @sanity_function
    def moved_what_was_asked(self):
        self.require_success('IOR')
        out = self._ior
        expected = self.consistent(check_ior_summary, out, self.mode, self.num_tasks)
        api = IOR_MODES[self.mode][0]
        lines = [f'IOR {out["version"]}: {self.mode}, {self.num_tasks} ranks, '
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
        """Each repetition (-i) is a sample: {'write': {...}, 'read': {...}}."""
        ops = self._ior['operations']
        return [{op: {k[:-len('_iterations')]: vals[i] for k, vals in ops[op].items()
                      if k.endswith('_iterations')} for op in ('write', 'read')}
                for i in range(len(ops['write']['bw_mib_iterations']))]


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
        opts = mdtest_options(self.items, 1, f'"${_DIR_VAR}/tree"', self.write_bytes,
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
