"""STREAM: sustainable memory bandwidth of one node, and how it is shared.

The arrays are sized from the node's last-level cache (each at least four
times all of it), so the figures are memory figures, not cache figures.
``StreamBandwidth`` runs every core; ``StreamTriadScaling`` runs Triad on 1,
2, 4 ... all cores in one job, so a memory channel gone missing (per-core
bandwidth collapsing early) shows even when the all-core figure looks
plausible.
"""

import functools
import os
import re

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher
from reframe.core.builtins import (fixture, run_after, run_before,
                                   sanity_function, variable)
from reframe.core.exceptions import SanityError

from hpc_health.checklib import site
from hpc_health.checklib.samples import PerfSamples, location, sections
from hpc_health.checklib.benchmarks import (Insane, StreamBuild, check_stream_run,
                                  cores_per_node, shell_path, thread_series)
from hpc_health.parsers import ParseError
from hpc_health.parsers.stream import KERNELS, parse_stream

_MARK = 'hpc-health: STREAM with {} threads, sample {}'
_SECTION = re.compile(r'^hpc-health: STREAM with (\d+) threads, sample (\d+)$', re.MULTILINE)


class StreamBase(site.SiteReferences, site.RecordedSkip, PerfSamples,
                 rfm.RunOnlyRegressionTest):
    stream = fixture(StreamBuild, scope='environment')
    valid_systems = ['+cpu']
    valid_prog_environs = ['+openmp']
    maintainers = ['hpc-health']
    exclusive_access = True
    time_limit = '10m'
    num_tasks = 1
    num_tasks_per_node = 1

    #: OpenMP threads of the all-core run.  Unset: the site setting
    #: ``stream.threads``, else the partition's cores per node.
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None`
    threads = variable(int, type(None), value=None)

    #: ``OMP_PROC_BIND`` and ``OMP_PLACES``.  Unset: the site settings
    #: ``stream.proc_bind`` / ``stream.places``, else ``spread`` and ``cores``
    #: (one thread per core, spread over sockets and NUMA domains).
    #:
    #: :type: :class:`str` or :obj:`None`
    #: :default: :obj:`None`
    proc_bind = variable(str, type(None), value=None)
    places = variable(str, type(None), value=None)

    #: STREAM executions per thread count, each one sample (its best rate).
    #: Unset: the site setting ``stream.samples``, else 5.  A new process
    #: gets new physical pages, and on virtual machines the bandwidth of one
    #: execution has been seen to vary by 13 % from the next: one execution
    #: per night cannot tell that from a lost memory channel.
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None`
    samples = variable(int, type(None), value=None)

    #: Thread counts of the series (StreamTriadScaling; StreamBandwidth
    #: runs ``threads`` only).  Unset: the site setting
    #: ``stream.thread_counts``, else powers of two below the all-core count
    #: and the all-core count itself.
    #:
    #: :type: :class:`List[int]` or :obj:`None`
    #: :default: :obj:`None`
    thread_counts = variable(typ.List[int], type(None), value=None)

    #: Elements per array, as built (copied from the build fixture; sanity
    #: holds STREAM's output against it).
    #:
    #: :type: :class:`int`
    #: :default: ``0`` (set at setup)
    array_size = variable(int, value=0)

    @run_after('setup')
    def set_threads(self):
        cfg = site.section(self, 'stream')
        if self.threads is None:
            self.threads = int(cfg.get('threads') or
                               cores_per_node(self.current_partition.processor) or 1)
        self.proc_bind = self.proc_bind or cfg.get('proc_bind') or 'spread'
        self.places = self.places or cfg.get('places') or 'cores'
        self.samples = self.samples or int(cfg.get('samples') or 5)
        self.num_cpus_per_task = self.threads
        # One OpenMP process: a parallel launcher would pin it (Open MPI binds
        # up to two ranks to one core; srun ignores the batch job's
        # --cpus-per-task since Slurm 22.05), so it runs in the job script on
        # the allocated node itself.
        self.job.launcher = getlauncher('local')()
        self.env_vars = {'OMP_PROC_BIND': self.proc_bind, 'OMP_PLACES': self.places}
        self.array_size = self.stream.array_size

    def set_series(self, thread_counts):
        """One job: STREAM ``samples`` times for each thread count, rounds
        interleaved so that a slow minute does not fall on one count only;
        the markers split the output."""
        self.thread_counts = sorted(set(int(t) for t in thread_counts))
        binary = shell_path(self.stream.binary())
        counts = ' '.join(str(t) for t in self.thread_counts)
        self.executable = (f'for s in $(seq {self.samples}); do for t in {counts}; do '
                           f'echo "{_MARK.format("$t", "$s")}"; '
                           f'OMP_NUM_THREADS=$t {binary}; done; done')

    @functools.cached_property
    def _runs(self):
        """Thread count -> parsed outputs, one per sample."""
        runs = {}
        for mark, body in sections(self._read(sn.evaluate(self.stdout)), _SECTION):
            threads, sample = int(mark.group(1)), int(mark.group(2))
            try:
                out = parse_stream(body)
                check_stream_run(out, threads, self.array_size)
            except (ParseError, Insane) as err:
                raise SanityError(f'STREAM with {threads} threads, sample {sample}: '
                                  f'{err}') from None
            runs.setdefault(threads, []).append(out)
        return runs

    @sanity_function
    def validated(self):
        short = {t: len(self._runs.get(t, [])) for t in self.thread_counts
                 if len(self._runs.get(t, [])) < self.samples}
        if short:
            raise SanityError(', '.join(f'{n} of {self.samples} STREAM outputs with {t} threads'
                                        for t, n in short.items()) + ' (run cut short?)')
        return sn.assert_eq(self.job.exitcode, 0, msg='STREAM exited with {0}')

    def _rates(self, threads, kernel='triad'):
        return [out['kernels'][kernel]['best_rate_mbs'] for out in self._runs[threads]]

    def _read(self, name):
        try:
            with open(os.path.join(self.stagedir, name)) as fp:
                return fp.read()
        except OSError as err:
            raise SanityError(f'{name} unreadable: {err}') from None


@rfm.simple_test
class StreamBandwidth(StreamBase):
    """Copy, Scale, Add and Triad bandwidth with every core of a node."""

    descr = 'STREAM memory bandwidth, all cores'
    tags = {'memory', 'stream'}

    @run_before('run')
    def set_executable(self):
        self.set_series([self.threads])

    @run_before('performance')
    def set_perf_variables(self):
        self.perf_variables = {
            k.capitalize(): sn.make_performance_function(self._rate(k), 'MB/s')
            for k in KERNELS
        }

    @sn.deferrable
    def _rate(self, kernel):
        return location(self._rates(self.threads, kernel))

    def perf_samples(self):
        return {k.capitalize(): self._rates(self.threads, k) for k in KERNELS}


@rfm.simple_test
class StreamTriadScaling(StreamBase):
    """Triad bandwidth with 1, 2, 4 ... all cores, total and per core.

    Per-core bandwidth falls as cores contend for the memory channels; how
    fast it falls is the node's signature, and a missing DIMM or a channel
    running degraded changes it.
    """

    descr = 'STREAM Triad per thread count (memory contention)'
    tags = {'memory', 'stream'}

    @run_before('run')
    def set_executable(self):
        self.set_series(self.thread_counts or
                        site.section(self, 'stream').get('thread_counts') or
                        thread_series(self.threads))

    @run_before('performance')
    def set_perf_variables(self):
        pv = {}
        for t in self.thread_counts:
            pv[f'triad_{t}t'] = sn.make_performance_function(self._triad(t), 'MB/s')
            pv[f'triad_per_core_{t}t'] = sn.make_performance_function(
                self._triad(t, per_core=True), 'MB/s')
        self.perf_variables = pv

    @sn.deferrable
    def _triad(self, threads, per_core=False):
        return location(self._per(threads, per_core))

    def _per(self, threads, per_core):
        return [r / threads if per_core else r for r in self._rates(threads)]

    def perf_samples(self):
        out = {}
        for t in self.thread_counts:
            out[f'triad_{t}t'] = self._per(t, False)
            out[f'triad_per_core_{t}t'] = self._per(t, True)
        return out
