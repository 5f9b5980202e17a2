"""STREAM in the check library: the build fixture (array size and repetitions
fixed at compile time), the sizes derived from the node, the sanity of one
output, and :class:`StreamBase`, the base of the checks in
``reframe_checks/stream.py``."""

import functools
import math
import os
import re

import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher
from reframe.core.builtins import fixture, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from hpc_health.checklib.check import HealthCheck, Insane, settings
from hpc_health.checklib.launches import job_output, sections
from hpc_health.checklib.shell import shell_path
from hpc_health.checklib.spack_build import SpackBuild, with_toolchain
from hpc_health.parsers import ParseError
from hpc_health.parsers.stream import parse_stream

#: STREAM's own default; smaller arrays only measure the caches of a node
#: whose topology is unknown.
STREAM_MIN_ARRAY = 10_000_000
#: Each array at least this many times the last-level cache, per STREAM's
#: own rule, so no kernel runs out of cache.
STREAM_CACHE_FACTOR = 4
_DOUBLE = 8
# Static arrays beyond 2 GiB in total need the medium code model on x86-64.
_SMALL_MODEL_LIMIT = 2 ** 31


def last_level_cache_bytes(processor):
    """Total last-level cache of a node in bytes (all instances, so all
    sockets), from ReFrame's processor topology; None when unknown.

    *processor* is a ReFrame ``ProcessorInfo`` or its ``info`` dict.
    """
    info = getattr(processor, 'info', processor) or {}
    caches = (info.get('topology') or {}).get('caches') or []
    levels = [c for c in caches
              if str(c.get('type', '')).upper().startswith('L') and c.get('size')]
    if not levels:
        return None
    top = max(int(str(c['type'])[1:] or 0) for c in levels)
    total = 0
    for c in levels:
        if int(str(c['type'])[1:] or 0) != top:
            continue
        # One cpuset per instance; without them, one instance per socket.
        instances = len(c.get('cpusets') or []) or int(info.get('num_sockets') or 1)
        total += int(c['size']) * instances
    return total


def stream_array_size(processor, factor=STREAM_CACHE_FACTOR):
    """Elements per array so that each array is at least *factor* times the
    node's last-level cache, rounded up to a whole million (readable specs,
    stable across runs); None when the topology gives no cache size."""
    llc = last_level_cache_bytes(processor)
    if not llc:
        return None
    elements = math.ceil(factor * llc / _DOUBLE)
    return max(STREAM_MIN_ARRAY, math.ceil(elements / 1e6) * 1_000_000)


def stream_spec(base, array_size, ntimes):
    """The Spack spec of a STREAM build with its sizes as variants."""
    spec = f'{base} stream_array_size={array_size} ntimes={ntimes}'
    if 3 * array_size * _DOUBLE >= _SMALL_MODEL_LIMIT:
        spec += ' cflags="-mcmodel=medium"'
    return spec


def cores_per_node(processor):
    """Physical cores of a node (hardware threads only if cores are unknown)."""
    return int(processor.num_cores or processor.num_cpus or 0) or None


def thread_series(cores):
    """1, 2, 4, ... up to *cores*, and *cores* itself."""
    series, t = [], 1
    while t < cores:
        series.append(t)
        t *= 2
    series.append(cores)
    return series


class StreamBuild(SpackBuild):
    """STREAM (C, OpenMP) built with its array size and repetition count
    fixed at compile time, as STREAM requires."""

    spack_env_name = 'stream'
    spack_specs = []

    #: Elements per array.  Set at setup from the site setting
    #: ``stream.array_size``, else from the partition's processor topology.
    #:
    #: :type: :class:`int`
    #: :default: ``0`` (not yet known)
    array_size = variable(int, value=0)

    #: Repetitions of each kernel (site setting ``stream.ntimes``).
    #:
    #: :type: :class:`int`
    #: :default: ``0`` (set at setup)
    ntimes = variable(int, value=0)

    @run_after('setup')
    def set_spec(self):
        cfg = settings(self)['stream']
        self.array_size = int(cfg.get('array_size') or
                              stream_array_size(self.current_partition.processor) or 0)
        self.skip_for(not self.array_size,
                     'the processor topology of this partition gives no cache sizes; '
                     'set stream.array_size in the site settings')
        self.ntimes = cfg['ntimes']
        spec = stream_spec(cfg['spec'], self.array_size, self.ntimes)
        self.spack_specs = with_toolchain(self, [spec])

    def binary(self):
        # The Fortran binary segfaults with large arrays under the default
        # 8 MiB stack; the C one keeps its arrays static.
        return os.path.join(self.prefix('stream'), 'bin', 'stream_c.exe')


def check_stream_run(out, threads, array_size):
    """One parsed STREAM output, run with *threads* threads on arrays of
    *array_size* elements."""
    if out['variant'] != 'c':
        raise Insane('this is not the C STREAM binary')
    if not out['validated']:
        raise Insane(f'STREAM with {threads} threads: {out["validation_message"]}')
    if out['non_finite']:
        raise Insane(f'STREAM with {threads} threads printed non-finite figures '
                     f'({", ".join(out["non_finite"])}): the arrays are too small '
                     'for the clock')
    if out['array_size'] != array_size:
        raise Insane(f'STREAM ran {out["array_size"]} elements per array, the build '
                     f'asked for {array_size}')
    counted = out.get('threads_counted')
    if counted is not None and counted != threads:
        raise Insane(f'STREAM counted {counted} threads, {threads} were requested')


_MARK = 'hpc-health: STREAM with {} threads, sample {}'
_SECTION = re.compile(r'^hpc-health: STREAM with (\d+) threads, sample (\d+)$', re.MULTILINE)


class StreamBase(HealthCheck):
    stream = fixture(StreamBuild, scope='environment')
    valid_systems = ['+cpu']
    valid_prog_environs = ['+openmp']
    exclusive_access = True
    time_limit = '10m'
    num_tasks = num_tasks_per_node = 1

    #: OpenMP threads of the all-core run.  Unset: ``stream.threads``, else
    #: the partition's cores per node.
    threads = variable(int, type(None), value=None)

    #: ``OMP_PROC_BIND``/``OMP_PLACES`` and executions per thread count (each
    #: a sample: on virtual machines one execution's bandwidth has varied
    #: by 13 % from the next).  Unset: ``stream.proc_bind``, ``places``,
    #: ``samples`` (spread, cores, 5).
    proc_bind = variable(str, type(None), value=None)
    places = variable(str, type(None), value=None)
    samples = variable(int, type(None), value=None)

    #: Thread counts run.  Unset: ``stream.thread_counts``, else 1, 2, 4 ...
    #: and all cores (StreamBandwidth: ``threads`` only).
    thread_counts = variable(typ.List[int], type(None), value=None)

    @run_after('setup')
    def set_threads(self):
        self.fill_from_settings('stream', threads='threads', proc_bind='proc_bind',
                                places='places', samples='samples')
        self.threads = self.threads or cores_per_node(self.current_partition.processor) or 1
        self.num_cpus_per_task = self.threads
        # One OpenMP process, in the job script on the allocated node: a
        # parallel launcher would pin it (Open MPI binds up to two ranks to
        # one core; srun ignores the job's --cpus-per-task since Slurm 22.05).
        self.job.launcher = getlauncher('local')()
        self.env_vars = {'OMP_PROC_BIND': self.proc_bind, 'OMP_PLACES': self.places}

    @run_before('run')
    def set_executable(self):
        """One job: STREAM ``samples`` times per thread count, rounds
        interleaved so that a slow minute does not fall on one count only."""
        counts = ' '.join(str(t) for t in self.thread_counts)
        self.executable = (f'for s in $(seq {self.samples}); do for t in {counts}; do '
                           f'echo "{_MARK.format("$t", "$s")}"; '
                           f'OMP_NUM_THREADS=$t {shell_path(self.stream.binary())}; done; done')

    @functools.cached_property
    def _rounds(self):
        """One {threads: parsed output} per sample."""
        rounds = {}
        for mark, body in sections(job_output(self, 'STREAM'), _SECTION):
            threads, sample = int(mark.group(1)), int(mark.group(2))
            try:
                out = parse_stream(body)
                check_stream_run(out, threads, self.stream.array_size)
            except (ParseError, Insane) as err:
                raise SanityError(f'STREAM with {threads} threads, sample {sample}: '
                                  f'{err}') from None
            rounds.setdefault(sample, {})[threads] = out
        return [rounds[s] for s in sorted(rounds)]

    def outputs(self):
        return self._rounds

    @sanity_function
    def validated(self):
        complete = [r for r in self._rounds if set(self.thread_counts) <= set(r)]
        if len(complete) < self.samples:
            raise SanityError(f'{len(complete)} of {self.samples} complete STREAM rounds '
                              f'over {self.thread_counts} threads (run cut short?)')
        return sn.assert_eq(self.job.exitcode, 0, msg='STREAM exited with {0}')
