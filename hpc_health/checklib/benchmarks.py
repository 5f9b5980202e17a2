"""Spack build fixtures of the third-party benchmarks (STREAM, OSU, IOR with
Darshan) and the pure functions that size and configure their runs.

The functions take plain values so the tests can call them without ReFrame;
the fixtures read the site settings (``partitions.<p>.{stream,osu,ior}`` in
``site.yaml``) and hand the resulting specs to :class:`SpackBuild`.
"""

import glob
import math
import os

from reframe.core.builtins import run_after, variable

from hpc_health.checklib.builds import SpackBuild
from hpc_health.checklib.check import settings


def with_toolchain(test, specs):
    """Add the programming environment's compiler to every root spec.

    A site with several toolchains (Cray's PrgEnv-cray and PrgEnv-gnu) names
    the compiler of each ReFrame environment in its ``extras``
    (``spack_toolchain: '%cce'``); each environment has its own Spack
    environment, so the builds differ as the toolchains do.
    """
    toolchain = (test.current_environ.extras or {}).get('spack_toolchain')
    return [f'{s} {toolchain}' for s in specs] if toolchain else list(specs)


# ----------------------------------------------------------------- STREAM

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


# ----------------------------------------------------------------- OSU

COLLECTIVES = ('osu_barrier', 'osu_allreduce', 'osu_alltoall', 'osu_bcast')
ONE_SIDED = ('osu_put_latency', 'osu_get_latency', 'osu_put_bw', 'osu_get_bw',
             'osu_put_bibw', 'osu_acc_latency', 'osu_fop_latency', 'osu_cas_latency')


def osu_options(benchmark, sizes, validate=True, iterations=None, warmup=None,
                device=None, pairs=None):
    """Command-line options of one OSU benchmark run.

    Only the gated range is run (``-m MIN:MAX``), which is also the size the
    table must reach.  ``-f`` exists only for collectives (pt2pt rejects it in
    OSU 7) and gives min/max latency over ranks.  ``-c`` validates the data
    (OSU 7; barrier has none).  OSU 7.4 validates MPI_CHAR sums with a
    char-sized expected value, which fails from 16 B up, so allreduce is
    validated on MPI_INT.
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
        if benchmark == 'osu_allreduce':
            opts += ['-T', 'mpi_int']
    if benchmark == 'osu_mbw_mr' and pairs:
        opts += ['-p', str(pairs)]
    if warmup:
        opts += ['-x', str(warmup)]
    if iterations:
        opts += ['-i', str(iterations)]
    return opts


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


# ----------------------------------------------------------------- IOR

IOR_MODES = {
    # name: (IOR API, file per process, collective)
    'posix_fpp': ('POSIX', True, False),
    'posix_shared': ('POSIX', False, False),
    'mpiio_collective': ('MPIIO', False, True),
}


def ior_options(mode, block_size, transfer_size, segments, repetitions,
                test_file, summary_file):
    """IOR options: write then read, fsync before the write is timed as done,
    reading back another node's data (-C) so the page cache is no shortcut,
    barriers between phases so the phases are timed apart, and a JSON
    summary (IOR's text shows Max Write/Read only with -v)."""
    api, fpp, collective = IOR_MODES[mode]
    opts = ['-a', api]
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


# ----------------------------------------------------------------- sanity
# The checks' sanity functions call these on parsed outputs, and raise
# ReFrame's SanityError with the message; plain functions so they can be
# tested on recorded outputs.

class Insane(ValueError):
    """A benchmark output that must not produce figures."""


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


def check_osu_table(out, benchmark, sizes, validate):
    """A parsed OSU table: it reaches the largest requested size, has every
    gated size, and every row passed validation where -c was given."""
    from hpc_health.parsers import ParseError
    from hpc_health.parsers import osu as osu_parser
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
