"""IOR and mdtest in the check library: the build fixture (with Darshan), the
options of a run, the sanity of their outputs, the Darshan figures, and
:class:`IoBase`, the base of the checks in ``reframe_checks/ior.py``: a
directory of its own below the scratch directory, Darshan around the
benchmark."""

import functools
import os
import shlex

import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import fixture, run_after, variable
from reframe.core.exceptions import SanityError

from hpc_health.checklib import darshan
from hpc_health.checklib.check import HealthCheck, Insane, num_nodes, ranks_per_node, settings
from hpc_health.checklib.shell import shell_path
from hpc_health.checklib.spack_build import SpackBuild, with_toolchain
from hpc_health.model.figures import HIGHER, LOWER, Figure
from hpc_health.parsers import ParseError
from hpc_health.parsers.ior import parse_ior

IOR_MODES = {
    # name: (IOR API, file per process, collective)
    'posix_fpp': ('POSIX', True, False),
    'posix_shared': ('POSIX', False, False),
    'mpiio_collective': ('MPIIO', False, True),
}


def ior_options(mode, block_size, transfer_size, segments, repetitions,
                test_file, summary_file, direct_io=False):
    """IOR options: write then read, fsync before the write is timed as done,
    reading back another node's data (-C) so the page cache is no shortcut,
    barriers between phases so the phases are timed apart, and a JSON
    summary (IOR's text shows Max Write/Read only with -v).

    On one node -C reads back from the node's own page cache, and the
    kernel may write part of the data behind IOR's back before the fsync:
    *direct_io* opens the files ``O_DIRECT`` (POSIX modes; an MPI-IO run
    is left to the MPI library)."""
    api, fpp, collective = IOR_MODES[mode]
    opts = ['-a', api]
    if direct_io and api == 'POSIX':
        opts.append('--posix.odirect')
    if fpp:
        opts.append('-F')
    if collective:
        opts.append('-c')
    opts += ['-b', str(block_size), '-t', str(transfer_size), '-s', str(segments),
             '-i', str(repetitions), '-w', '-r', '-e', '-C', '-g',
             '-o', test_file,
             '-O', 'summaryFormat=JSON', '-O', f'summaryFile={summary_file}']
    return opts


def mdtest_options(items, iterations, directory, write_bytes=0, tasks_per_node=None,
                   nodes=1):
    """mdtest options; with several nodes each rank stats and removes files
    another node created (-N), so the client cache is no shortcut."""
    opts = ['-n', str(items), '-i', str(iterations), '-d', directory]
    if write_bytes:
        opts += ['-w', str(write_bytes)]
    if nodes > 1 and tasks_per_node:
        opts += ['-N', str(tasks_per_node)]
    return opts


class IorBuild(SpackBuild):
    """IOR (with mdtest) and, unless the site turns Darshan off, the Darshan
    runtime and utilities, concretized together so the runtime, the
    parser and the application share one MPI."""

    spack_env_name = 'ior'
    spack_specs = []

    @run_after('setup')
    def set_spec(self):
        cfg = settings(self)['ior']
        specs = [cfg['spec']]
        if cfg['darshan']:
            specs += [cfg['darshan_runtime_spec'], cfg['darshan_util_spec']]
        self.spack_specs = with_toolchain(self, specs)


def check_ior_summary(out, mode, num_tasks):
    """A parsed IOR summary: the pattern and the ranks asked for, both
    operations present.  Returns the bytes each operation had to move."""
    params = out['parameters']
    api, fpp, collective = IOR_MODES[mode]
    got = (params['api'], params['filePerProc'], params['collective'])
    if got != (api, fpp, collective):
        raise Insane(f'IOR ran {params["api"]} filePerProc={params["filePerProc"]} '
                     f'collective={params["collective"]}, not {mode}')
    if params['numTasks'] != num_tasks:
        raise Insane(f'IOR ran {params["numTasks"]} tasks, {num_tasks} were asked for')
    missing = [op for op in ('write', 'read') if op not in out['operations']]
    if missing:
        raise Insane(f'IOR summary has no {" or ".join(missing)} results')
    return out['aggregate_bytes'] * params['repetitions']


def check_mdtest(out, num_tasks, items, phases):
    if out['tasks'] != num_tasks:
        raise Insane(f'mdtest ran {out["tasks"]} tasks, {num_tasks} were asked for')
    if out['items'] != items * num_tasks:
        raise Insane(f'mdtest handled {out["items"]} items, {items * num_tasks} asked')
    missing = [p for p in phases if p not in out['rates']]
    if missing:
        raise Insane(f'mdtest printed no rate for {", ".join(missing)}')


#: The shell variable holding the test's own directory in the job script.
IO_DIR_VAR = 'HPC_HEALTH_IO_DIR'
_SUMMARY = 'io-summary.txt'


#: A slowest rank up to half again as slow as the fastest is a shared
#: file's ordinary straggling (a flush landing on one rank, a lock handed
#: over late), not a finding; a failing disk or a sick storage target makes
#: it several times.  Its baseline cannot tell: on a healthy node the ratio
#: sits at 1.00 on every run, and showed 1.36 and 1.58 minutes apart on a
#: clean night here, when the 3 % every figure has as its floor was its bound.
RANK_RATIO_MIN_CHANGE = 0.5


def darshan_figures(module, with_bytes=True):
    """What Darshan saw in *module* ('POSIX', 'MPI-IO'): one sample per run
    (one log), ``None`` where Darshan measured nothing for the pattern."""
    prefix = darshan.MODULES[module]
    kinds = [('io_time_slowest_rank', 's', LOWER, 0.0), ('meta_time', 's', LOWER, 0.0),
             ('rank_time_ratio', 'ratio', LOWER, RANK_RATIO_MIN_CHANGE)]
    if with_bytes:
        # Fewer bytes than asked is lost I/O; more is refused by sanity.
        kinds.insert(0, ('bytes', 'B', HIGHER, 0.0))
    where = {} if module == 'POSIX' else {'mode': 'mpiio_collective'}
    return [Figure(f'{prefix}_{key}', unit, better,
                   lambda figs, m=module, k=key: figs[m][k], where=where,
                   source='darshan_outputs', min_change=least)
            for key, unit, better, least in kinds]


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

    def launch(self, executable, options, env=()):
        """Set the executable, wrapped with Darshan when enabled (and with
        the variables *env* set in every rank), and the commands that create
        and remove the test's own directory."""
        executable = shell_path(executable)
        if self.use_darshan:
            executable, options = darshan.wrap(
                executable, options, self.ior.prefix('darshan-runtime'), self.darshan_log, env)
        elif env:
            executable, options = 'env', [*env, executable, *options]
        self.executable, self.executable_opts = executable, options
        scratch = os.path.dirname(self.io_dir_prefix)
        template = shlex.quote(f'{self.io_dir_prefix}.XXXXXX')
        self.prerun_cmds = [
            f'mkdir -p {shlex.quote(scratch)}',
            f'{IO_DIR_VAR}=$(mktemp -d {template}) || '
            f'{{ echo "hpc-health: cannot create a directory in {scratch}" >&2; exit 1; }}',
            # Only what this job created goes, whatever happens next.
            f'trap \'rm -rf -- "${IO_DIR_VAR}"\' EXIT',
            f'echo "hpc-health: I/O in ${IO_DIR_VAR} from ${{SLURM_JOB_NODELIST:-$(hostname)}}"',
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

    @property
    def summary_file(self):
        """IOR's JSON summary (``-O summaryFile=``)."""
        return os.path.join(self.stagedir, 'ior-summary.json')

    @functools.cached_property
    def ior_summary(self):
        try:
            with open(self.summary_file) as fp:
                text = fp.read()
        except OSError:
            raise SanityError('IOR wrote no JSON summary' + self._stderr_tail()) from None
        try:
            return parse_ior(text)
        except ParseError as err:
            raise SanityError(f'IOR summary: {err}') from None

    def ior_samples(self):
        """Each repetition (-i) is a sample: {'write': {...}, 'read': {...}}."""
        ops = self.ior_summary['operations']
        return [{op: {k[:-len('_iterations')]: vals[i] for k, vals in ops[op].items()
                      if k.endswith('_iterations')} for op in ('write', 'read')}
                for i in range(len(ops['write']['bw_mib_iterations']))]

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
