"""The OSU Micro-Benchmarks in the check library: the build fixture, the
options of a run and where its binary is, the sanity of a table, and
:class:`OsuBase`, the base of the checks in ``reframe_checks/osu*.py``
(settings, launches, the tables of every launch, and where the ranks ran)."""

import functools
import glob
import os

import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import fixture, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from hpc_health.checklib.check import HealthCheck, Insane, num_nodes, setting, settings
from hpc_health.checklib.launches import RepeatedLaunches, job_output
from hpc_health.checklib.shell import shell_path
from hpc_health.checklib.spack_build import SpackBuild, with_toolchain
from hpc_health.model.figures import MESSAGE_SIZES, Figure
from hpc_health.parsers import ParseError
from hpc_health.parsers import osu as osu_parser

_HOSTS = 'rank-hosts.txt'
#: Printed before the launch that validates the data (``-c``).
VALIDATION_MARK = 'hpc-health: validation launch'

COLLECTIVES = ('osu_barrier', 'osu_allreduce', 'osu_alltoall', 'osu_bcast', 'osu_iallreduce')
#: Non-blocking collectives: each gated at its blocking twin's message sizes
#: (``osu_iallreduce``: ``osu.sizes.allreduce``), so the two compare size by size.
NON_BLOCKING = ('osu_iallreduce',)
#: OSU 7.4 validates MPI_CHAR sums with a char-sized expected value, which
#: fails from 16 B up: these are validated on MPI_INT.
SUMS = ('osu_allreduce', 'osu_iallreduce')
ONE_SIDED = ('osu_put_latency', 'osu_get_latency', 'osu_put_bw', 'osu_get_bw',
             'osu_put_bibw', 'osu_acc_latency', 'osu_fop_latency', 'osu_cas_latency')


def osu_options(benchmark, sizes, validate=True, iterations=None, warmup=None,
                device=None, pairs=None):
    """Command-line options of one OSU benchmark run.

    Only the gated range is run (``-m MIN:MAX``), which is also the size the
    table must reach.  ``-f`` exists only for collectives (pt2pt rejects it in
    OSU 7) and gives min/max latency over ranks.  ``-c`` validates the data
    (OSU 7; barrier has none), the sums on MPI_INT (:data:`SUMS`).
    """
    opts = []
    collective = benchmark in COLLECTIVES
    if device:
        # pt2pt names a buffer location per rank; collectives have one.
        opts += ['-d', device] + ([] if collective else ['D', 'D'])
    if benchmark != 'osu_barrier':
        opts += ['-m', f'{min(sizes)}:{max(sizes)}']
    if collective:
        opts += ['-f']
    if validate and benchmark != 'osu_barrier':
        opts += ['-c']
        if benchmark in SUMS:
            opts += ['-T', 'mpi_int']
    if benchmark == 'osu_mbw_mr' and pairs:
        opts += ['-p', str(pairs)]
    if warmup:
        opts += ['-x', str(warmup)]
    if iterations:
        opts += ['-i', str(iterations)]
    return opts


def size_set(benchmark):
    """The key of an OSU program's gated sizes in ``osu.sizes``: its name
    without ``osu_``, a non-blocking collective's its blocking twin's."""
    name = benchmark.replace('osu_', '', 1)
    return name[1:] if benchmark in NON_BLOCKING else name


def osu_binary(prefix, benchmark):
    """Path of an OSU MPI benchmark below an install prefix: the installed
    tree when it can be looked at (layouts differ between releases), else
    the 5.x-7.x layout ``libexec/osu-micro-benchmarks/mpi/{pt2pt,collective,one-sided}``."""
    kind = ('collective' if benchmark in COLLECTIVES else
            'one-sided' if benchmark in ONE_SIDED else 'pt2pt')
    default = os.path.join(prefix, 'libexec', 'osu-micro-benchmarks', 'mpi',
                           kind, benchmark)
    if os.path.isfile(default):
        return default
    found = sorted(glob.glob(os.path.join(prefix, 'libexec', 'osu-micro-benchmarks',
                                          'mpi', '**', benchmark), recursive=True))
    return found[0] if found else default


class OsuBuild(SpackBuild):
    """The OSU Micro-Benchmarks (site setting ``osu.spec``, e.g. with
    ``+cuda`` on a GPU partition)."""

    spack_env_name = 'osu'
    spack_specs = []

    @run_after('setup')
    def set_spec(self):
        spec = settings(self)['osu']['spec']
        self.spack_specs = with_toolchain(self, [spec])


def check_osu_table(out, benchmark, sizes, validate):
    """A parsed OSU table: it reaches the largest requested size, has every
    gated size, and every row passed validation where -c was given."""
    if benchmark != 'osu_barrier':
        try:
            osu_parser.require_complete(out, max(sizes))
            for size in sizes:
                osu_parser.value_at(out, size, out['columns'][1])
        except ParseError as err:
            raise Insane(str(err)) from None
    if validate and benchmark != 'osu_barrier':
        if 'validation' not in out['columns']:
            raise Insane(f'{benchmark} printed no Validation column although -c was given')
        failed = [row['size'] for row in out['rows'] if row['validation'] != 'Pass']
        if failed:
            raise Insane(f'{benchmark} data validation failed at sizes {failed}')


def at_size(column):
    """Reader of *column* at one message size of an OSU table."""
    return lambda table, size: osu_parser.value_at(table, size, column)


def sized(name, unit, better, column, benchmark, capability=''):
    """The figure *name*_<size> of *benchmark* (one name or a tuple)."""
    return Figure(f'{name}_{{}}', unit, better, at_size(column), MESSAGE_SIZES,
                  where={'benchmark': benchmark}, capability=capability)


class OsuBase(HealthCheck, RepeatedLaunches):
    """Each check names its OSU program in ``benchmark`` (a parameter or a
    class attribute) and, where it differs, the size set in ``size_set``.
    A check with a ``placement`` parameter runs ``intra_node`` (shared
    memory) or ``inter_node`` (one rank on each of two nodes: the fabric)."""

    osu = fixture(OsuBuild, scope='environment')
    valid_systems = ['+mpi']
    valid_prog_environs = ['+mpi']
    exclusive_access = True
    time_limit = '10m'
    size_set = None
    #: Two ranks, one on each node when inter-node (point-to-point tests).
    pair = False

    #: Gated message sizes (bytes).  Unset: ``osu.sizes.<size set>``.
    sizes = variable(typ.List[int], type(None), value=None)
    #: ``-c`` payload validation, ``-i``/``-x`` iterations, ``-d`` device
    #: buffers (cuda, rocm) and launches per run (each a sample).  Unset:
    #: ``osu.validate``, ``iterations``, ``warmup``, ``device``, ``samples``.
    validate = variable(typ.Bool, type(None), value=None)
    iterations = variable(int, type(None), value=None)
    warmup = variable(int, type(None), value=None)
    device = variable(str, type(None), value=None)
    samples = variable(int, type(None), value=None)
    #: ``-i`` of the validation launch (unset: ``osu.validation_iterations``).
    validation_iterations = variable(int, type(None), value=None)
    #: Hosts the ranks reported (inter-node runs): the proof of where they ran.
    rank_hosts = variable(typ.List[str], value=[])

    @property
    def inter_node(self):
        return getattr(self, 'placement', None) == 'inter_node'

    @run_after('setup')
    def read_settings(self):
        self.fill_from_settings('osu', validate='validate', iterations='iterations',
                                warmup='warmup', device='device', samples='samples',
                                validation_iterations='validation_iterations')
        if self.sizes is None:
            key = self.size_set or size_set(self.benchmark)
            self.sizes = sorted(setting(self, f'osu.sizes.{key}') or [])
        if self.device:
            gpus = sum(d.num_devices for d in self.current_partition.select_devices('gpu'))
            self.skip_for(not gpus, f'osu.device is {self.device} but the partition '
                                    'declares no gpu devices')
            self.num_gpus_per_node = gpus
        if self.pair:
            self.num_tasks, self.num_tasks_per_node = 2, 1 if self.inter_node else 2
        if self.inter_node:
            nodes, part = num_nodes(self), self.current_partition.name
            self.skip_for(nodes < 2, f'needs 2 nodes; the site settings give partition '
                                     f'{part} {nodes} (partitions.{part}.nodes)')

    @run_before('run')
    def set_executable(self):
        prefix = self.osu.prefix('osu-micro-benchmarks')
        self.executable = shell_path(osu_binary(prefix, self.benchmark))
        pairs = getattr(self, 'pairs', None)
        self.executable_opts = osu_options(self.benchmark, self.sizes, False, self.iterations,
                                           self.warmup, self.device, pairs)
        if self.inter_node:
            # hostname under the job's own launcher and placement first.
            self.prerun_cmds = [f'{self.launch_command()} hostname > {_HOSTS}']
        if self.validates:
            # OSU 7's -c checks every buffer after every iteration: the same
            # figures take five times as long (osu_bw 64 KiB-4 MiB: 11 s a
            # launch against 1.9 s here).  One short launch checks the data
            # at every size; the timed launches run without it.
            opts = osu_options(self.benchmark, self.sizes, True, self.validation_iterations,
                               min(self.warmup or 2, 2), self.device, pairs)
            self.prerun_cmds = list(self.prerun_cmds) + [
                f'echo "{VALIDATION_MARK}"',
                ' '.join([self.launch_command(), self.executable, *opts])]

    @property
    def validates(self):
        return bool(self.validate) and self.benchmark != 'osu_barrier'

    def check_validation(self):
        """The validation launch printed every size, each row ``Pass``."""
        text = job_output(self, self.benchmark)
        start = text.find(VALIDATION_MARK)
        if start < 0:
            raise SanityError(f'{self.benchmark}: the validation launch (-c) did not start')
        body = text[start + len(VALIDATION_MARK):]
        # Up to the next line the job script echoed (a launch or sweep marker).
        end = body.find('\nhpc-health: ')
        body = body[:end + 1] if end >= 0 else body
        try:
            check_osu_table(osu_parser.parse_osu(body), self.benchmark, self.sizes, True)
        except (ParseError, Insane) as err:
            raise SanityError(f'{self.benchmark} validation launch (-c): {err}') from None

    @functools.cached_property
    def _tables(self):
        tables = []
        for i, body in enumerate(self.launch_outputs(self.benchmark), 1):
            try:
                tables.append(osu_parser.parse_osu(body))
                check_osu_table(tables[-1], self.benchmark, self.sizes, False)
            except (ParseError, Insane) as err:
                raise SanityError(f'{self.benchmark} output, launch {i}: {err}') from None
        return tables

    def outputs(self):
        return self._tables

    def check_nodes(self, expected):
        path = os.path.join(self.stagedir, _HOSTS)
        if os.path.exists(path):
            with open(path) as fp:
                self.rank_hosts = [line.strip() for line in fp if line.strip()]
        hosts = {h.split('.')[0] for h in self.rank_hosts}
        if len(hosts) != expected:
            raise SanityError(f'the ranks ran on {len(hosts)} distinct node(s) '
                              f'{sorted(hosts)}, expected {expected}')
        # Short and fully qualified names may differ; compare short names.
        listed = {h.split('.')[0] for h in self.job.nodelist or []}
        if listed and not hosts <= listed:
            raise SanityError(f'ranks ran on {sorted(hosts)}, outside the job\'s node '
                              f'list {sorted(listed)}')

    def check_output(self):
        """The data validated, every launch parsed and complete; where the
        ranks ran."""
        if self.validates:
            self.check_validation()
        self.outputs()
        if self.inter_node:
            self.check_nodes(2)

    @sanity_function
    def complete(self):
        self.check_output()
        return sn.assert_eq(self.job.exitcode, 0, msg=f'{self.benchmark} exited with {{0}}')
