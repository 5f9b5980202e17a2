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
from reframe.core.builtins import (fixture, parameter, run_after, run_before,
                                   sanity_function, variable)
from reframe.core.exceptions import SanityError

from hpc_health.checklib import darshan, site
from hpc_health.checklib.samples import PerfSamples, location
from hpc_health.checklib.benchmarks import (IOR_MODES, Insane, IorBuild, check_ior_summary,
                                  check_mdtest, darshan_enabled, ior_options,
                                  mdtest_options, shell_path)
from hpc_health.parsers import ParseError
from hpc_health.parsers.ior import parse_ior
from hpc_health.parsers.mdtest import parse_mdtest

_DIR_VAR = 'HPC_HEALTH_IO_DIR'
_SUMMARY = 'io-summary.txt'


class IoBase(site.SiteReferences, site.RecordedSkip, PerfSamples,
             rfm.RunOnlyRegressionTest):
    ior = fixture(IorBuild, scope='environment')
    valid_systems = ['+mpi']
    valid_prog_environs = ['+mpi']
    maintainers = ['hpc-health']
    exclusive_access = True
    time_limit = '30m'

    #: Instrument with Darshan.  Unset: the site setting ``ior.darshan``,
    #: else ``True``.
    #:
    #: :type: :class:`bool` or :obj:`None`
    #: :default: :obj:`None`
    use_darshan = variable(typ.Bool, type(None), value=None)

    #: Bytes the POSIX module may show beyond the benchmark's own: the MPI
    #: library writes a few hundred bytes to its shared-memory backing files
    #: (``/tmp/ompi.*``).  Unset: the site setting ``ior.posix_allowance``,
    #: else 65536.
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
        scratch = site.settings(self).get('scratch')
        part = self.current_partition.name
        self.skip_for(not scratch, f'no scratch directory for partition {part} '
                                   f'(site setting partitions.{part}.scratch)')
        self.io_dir_prefix = os.path.join(scratch, self.dir_name)
        cfg = site.section(self, self.settings_section)
        self.num_tasks_per_node = int(cfg.get('ranks_per_node') or site.ranks_per_node(self))
        self.num_tasks = self.num_tasks_per_node * site.num_nodes(self)
        ior_cfg = site.section(self, 'ior')
        if self.use_darshan is None:
            self.use_darshan = darshan_enabled(ior_cfg)
        if self.posix_allowance is None:
            allowance = ior_cfg.get('posix_allowance')
            self.posix_allowance = 65536 if allowance is None else int(allowance)
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

    def darshan_perf_variables(self, with_bytes=True):
        """Darshan's figures per module; *with_bytes* False where the
        benchmark moves no data (a constant 0 makes no reference)."""
        if not self.use_darshan:
            return {}
        pv = {}
        units = {'bytes': 'B', 'io_time_slowest_rank': 's', 'meta_time': 's',
                 'rank_time_ratio': 'ratio'}
        if not with_bytes:
            del units['bytes']
        for module in self.darshan_modules():
            prefix = darshan.MODULES[module]
            figures = (dict.fromkeys(units, 0) if self.is_dry_run()
                       else darshan.figures(self._darshan, module))
            for key, unit in units.items():
                if figures[key] is None:
                    continue  # not measured by Darshan for this access pattern
                pv[f'{prefix}_{key}'] = sn.make_performance_function(
                    self._darshan_figure(module, key), unit)
        return pv

    @sn.deferrable
    def _darshan_figure(self, module, key):
        return darshan.figures(self._darshan, module)[key]

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

    descr = 'IOR write/read bandwidth in the scratch file system'
    tags = {'io', 'ior'}
    dir_name = 'hpc-health-ior'

    @property
    def summary_file(self):
        return os.path.join(self.stagedir, 'ior-summary.json')

    @run_before('run')
    def set_command(self):
        cfg = site.section(self, 'ior')
        self.block_size = self.block_size or cfg.get('block_size') or '16m'
        self.transfer_size = self.transfer_size or cfg.get('transfer_size') or '1m'
        self.segments = self.segments or int(cfg.get('segments') or 4)
        self.repetitions = self.repetitions or int(cfg.get('repetitions') or 3)
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

    @run_before('performance')
    def set_perf_variables(self):
        # Each repetition (-i) is a sample; the figure is their location.
        pv = {}
        for op in ('write', 'read'):
            pv[f'{op}_bw'] = sn.make_performance_function(self._figure(op, 'bw_mib'),
                                                          'MiB/s')
            for phase in ('open', 'close'):
                # Older IOR versions print no open/close times.
                if (self.is_dry_run() or
                        self._ior['operations'][op].get(f'{phase}_time_s') is not None):
                    pv[f'{op}_{phase}_time'] = sn.make_performance_function(
                        self._figure(op, f'{phase}_time_s'), 's')
        pv.update(self.darshan_perf_variables())
        self.perf_variables = pv

    @sn.deferrable
    def _figure(self, op, key):
        return location(self._ior['operations'][op][f'{key}_iterations'])

    def perf_samples(self):
        out = {}
        for op in ('write', 'read'):
            figures = self._ior['operations'][op]
            for var, key in (('bw', 'bw_mib'), ('open_time', 'open_time_s'),
                             ('close_time', 'close_time_s')):
                if f'{key}_iterations' in figures:
                    out[f'{op}_{var}'] = figures[f'{key}_iterations']
        return out


@rfm.simple_test
class MdtestRates(IoBase):
    """File and directory creation, stat and removal rates (mdtest, from the
    IOR build), with Darshan's metadata time."""

    #: Files and directories per rank (``-n``), iterations (``-i``) and bytes
    #: written to each file (``-w``).  Unset: the site settings
    #: ``mdtest.items``, ``mdtest.iterations``, ``mdtest.write_bytes``, else
    #: 1000, 1 and 0.
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None`
    items = variable(int, type(None), value=None)
    iterations = variable(int, type(None), value=None)
    write_bytes = variable(int, type(None), value=None)

    descr = 'mdtest metadata rates in the scratch file system'
    tags = {'io', 'mdtest'}
    dir_name = 'hpc-health-mdtest'
    settings_section = 'mdtest'

    #: mdtest's rate rows reported as performance variables.
    PHASES = ('directory_creation', 'directory_stat', 'directory_removal',
              'file_creation', 'file_stat', 'file_removal')

    @run_before('run')
    def set_command(self):
        cfg = site.section(self, 'mdtest')
        if self.items is None:
            self.items = int(cfg.get('items') or 1000)
        if self.iterations is None:
            self.iterations = int(cfg.get('iterations') or 1)
        if self.write_bytes is None:
            self.write_bytes = int(cfg.get('write_bytes') or 0)
        opts = mdtest_options(self.items, self.iterations, f'"${_DIR_VAR}/tree"',
                              self.write_bytes, self.num_tasks_per_node,
                              site.num_nodes(self))
        self.launch(os.path.join(self.ior.prefix('ior'), 'bin', 'mdtest'), opts)

    @functools.cached_property
    def _mdtest(self):
        try:
            with open(os.path.join(self.stagedir, sn.evaluate(self.stdout))) as fp:
                return parse_mdtest(fp.read())
        except (OSError, ParseError) as err:
            raise SanityError(f'mdtest output: {err}') from None

    @sanity_function
    def complete(self):
        self.require_success('mdtest')
        out = self._mdtest
        self.consistent(check_mdtest, out, self.num_tasks, self.items, self.PHASES)
        lines = [f'mdtest {out["version"]}: {out["tasks"]} ranks, {out["items"]} items, '
                 f'{out["iterations"]} iteration(s)']
        lines += [f'{p}: {out["rates"][p]["mean"]} ops/s' for p in self.PHASES]
        written = self.write_bytes * out['items'] * out['iterations']
        # mdtest reads back what it wrote only with -e; we never pass it.
        self.check_darshan_bytes(('POSIX', written, 0, self.posix_allowance))
        self.write_summary(lines)
        return True

    @run_before('performance')
    def set_perf_variables(self):
        pv = {p: sn.make_performance_function(self._rate(p), 'ops/s') for p in self.PHASES}
        pv.update(self.darshan_perf_variables(with_bytes=self.write_bytes > 0))
        self.perf_variables = pv

    @sn.deferrable
    def _rate(self, phase):
        return self._mdtest['rates'][phase]['mean']
