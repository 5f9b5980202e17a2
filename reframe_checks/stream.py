"""STREAM: sustainable memory bandwidth of one node, and how it is shared.

The arrays are sized from the node's last-level cache (each at least four
times all of it), so the figures are memory figures, not cache figures.
``StreamBandwidth`` runs every core; ``StreamTriadScaling`` runs Triad on 1,
2, 4 ... all cores in one job, so a memory channel gone missing (per-core
bandwidth collapsing early) shows even when the all-core figure looks
plausible.
"""

import functools
import re

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher
from reframe.core.builtins import fixture, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from hpc_health.checklib import benchmarks as bm
from hpc_health.checklib.check import HealthCheck
from hpc_health.checklib.launches import job_output, sections
from hpc_health.checklib.shell import shell_path
from hpc_health.judge.figures import HIGHER, THREAD_COUNTS, Figure
from hpc_health.parsers import ParseError
from hpc_health.parsers.stream import KERNELS, parse_stream

_MARK = 'hpc-health: STREAM with {} threads, sample {}'
_SECTION = re.compile(r'^hpc-health: STREAM with (\d+) threads, sample (\d+)$', re.MULTILINE)


def _rate(out, threads, kernel='triad'):
    """Best rate of one execution; *out* is one sample: {threads: output}."""
    return out[threads]['kernels'][kernel]['best_rate_mbs']


def _all_cores(kernel):
    return lambda out: _rate(out, max(out), kernel)     # one thread count: all cores


class StreamBase(HealthCheck):
    stream = fixture(bm.StreamBuild, scope='environment')
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
        self.threads = self.threads or bm.cores_per_node(self.current_partition.processor) or 1
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
                bm.check_stream_run(out, threads, self.stream.array_size)
            except (ParseError, bm.Insane) as err:
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


@rfm.simple_test
class StreamBandwidth(StreamBase):
    """Copy, Scale, Add and Triad bandwidth with every core of a node."""

    figures = [Figure(k.capitalize(), 'MB/s', HIGHER, _all_cores(k),
                      capability='memory_bandwidth_mbs') for k in KERNELS]
    descr = 'STREAM memory bandwidth, all cores'
    tags = {'memory', 'stream'}

    @run_after('setup')
    def set_counts(self):
        self.thread_counts = [self.threads]


@rfm.simple_test
class StreamTriadScaling(StreamBase):
    """Triad bandwidth with 1, 2, 4 ... all cores, total and per core.

    Per-core bandwidth falls as cores contend for the memory channels; how
    fast it falls is the node's signature, and a missing DIMM or a channel
    running degraded changes it.
    """

    figures = [Figure('triad_{}', 'MB/s', HIGHER, _rate, THREAD_COUNTS,
                      capability='memory_bandwidth_mbs'),
               Figure('triad_per_core_{}', 'MB/s', HIGHER, lambda out, t: _rate(out, t) / t,
                      THREAD_COUNTS, capability='memory_bandwidth_mbs/cores')]
    descr = 'STREAM Triad per thread count (memory contention)'
    tags = {'memory', 'stream'}

    @run_after('setup')
    def set_counts(self):
        self.fill_from_settings('stream', thread_counts='thread_counts')
        self.thread_counts = sorted(set(self.thread_counts or bm.thread_series(self.threads)))
