"""OSU Micro-Benchmarks: point-to-point latency and bandwidth within a node
and between two nodes, message rate with several pairs, and the collectives
applications lean on, over the whole allocation.

Only the message sizes the site gates on are measured (``-m MIN:MAX``,
settings ``osu.sizes``), and the table must reach the largest one: a run cut
short is a failure, not a smaller figure.  With ``-c`` (OSU 7) every payload
is validated.
"""

import functools
import os

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import (fixture, parameter, run_after, run_before,
                                   sanity_function, variable)
from reframe.core.exceptions import SanityError

from hpc_health.checklib import site
from hpc_health.checklib.launches import RepeatedLaunches
from hpc_health.checklib.samples import PerfSamples, location
from hpc_health.checklib.benchmarks import (Insane, OsuBuild, check_osu_table, osu_binary,
                                  osu_options, osu_sizes, shell_path)
from hpc_health.parsers import ParseError
from hpc_health.parsers import osu as osu_parser
from hpc_health.units import size_label

_HOSTS = 'rank-hosts.txt'


def inter_node_skip_reason(nodes, partition):
    """Why the two-node variant cannot run on a partition of *nodes* nodes;
    None when it can."""
    if nodes >= 2:
        return None
    return (f'needs 2 nodes; the site settings give partition {partition} {nodes} '
            f'(partitions.{partition}.nodes)')


class OsuBase(site.SiteReferences, site.RecordedSkip, PerfSamples, RepeatedLaunches,
              rfm.RunOnlyRegressionTest):
    osu = fixture(OsuBuild, scope='environment')
    valid_systems = ['+mpi']
    valid_prog_environs = ['+mpi']
    maintainers = ['hpc-health']
    exclusive_access = True
    time_limit = '10m'

    # Each check names its OSU program (``osu_latency`` ...) in ``benchmark``,
    # a parameter or a class attribute.

    #: Gated message sizes (bytes).  Unset: the site setting
    #: ``osu.sizes.<benchmark>`` (e.g. ``osu.sizes.latency``), else
    #: :data:`hpc_health.checklib.benchmarks.OSU_SIZES`.
    #:
    #: :type: :class:`List[int]` or :obj:`None`
    #: :default: :obj:`None`
    sizes = variable(typ.List[int], type(None), value=None)

    #: Validate payloads with ``-c``.  Unset: the site setting
    #: ``osu.validate``, else ``True`` (set it false for OSU older than 7).
    #:
    #: :type: :class:`bool` or :obj:`None`
    #: :default: :obj:`None`
    validate = variable(typ.Bool, type(None), value=None)

    #: Timed and warm-up iterations (``-i``/``-x``).  Unset: the site settings
    #: ``osu.iterations``/``osu.warmup``, else OSU's own defaults.
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None`
    iterations = variable(int, type(None), value=None)
    warmup = variable(int, type(None), value=None)

    #: Run from device buffers (``-d cuda``/``-d rocm``; needs a ``+cuda`` or
    #: ``+rocm`` build).  Unset: the site setting ``osu.device``, else host
    #: memory.
    #:
    #: :type: :class:`str` or :obj:`None`
    #: :default: :obj:`None`
    device = variable(str, type(None), value=None)

    #: Launches of the benchmark in the job, each one sample of every figure
    #: (OSU prints averages over its iterations; a sample is one launch).
    #: Unset: the site setting ``osu.samples``, else 3.
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None`
    samples = variable(int, type(None), value=None)

    #: Hosts the ranks reported, in rank order (inter-node runs only); kept
    #: in the run report as the proof of where the ranks ran.
    #:
    #: :type: :class:`List[str]`
    #: :default: ``[]`` (set after the run)
    rank_hosts = variable(typ.List[str], value=[])

    @run_after('setup')
    def read_settings(self):
        cfg = site.section(self, 'osu')
        if self.sizes is None:
            self.sizes = osu_sizes(cfg, self.benchmark)
        if self.validate is None:
            self.validate = cfg.get('validate', True) is not False
        if self.iterations is None:
            self.iterations = cfg.get('iterations')
        if self.warmup is None:
            self.warmup = cfg.get('warmup')
        if self.device is None:
            self.device = cfg.get('device')
        if self.samples is None:
            self.samples = int(cfg.get('samples') or 3)
        self._sources = {}

    def options(self, pairs=None):
        return osu_options(self.benchmark, self.sizes, self.validate, self.iterations,
                           self.warmup, self.device, pairs)

    @run_after('setup')
    def request_devices(self):
        if self.device:
            # Device buffers need the node's GPUs in the allocation.
            gpus = sum(d.num_devices for d in self.current_partition.select_devices('gpu'))
            self.skip_for(not gpus, f'osu.device is {self.device} but the partition '
                                    'declares no gpu devices')
            self.num_gpus_per_node = gpus

    @run_before('run')
    def set_executable(self):
        self.executable = shell_path(osu_binary(
            self.osu.prefix('osu-micro-benchmarks'), self.benchmark))

    def record_rank_hosts(self):
        """Run ``hostname`` under the job's own launcher and placement before
        the benchmark, so the output proves where the ranks ran."""
        self.prerun_cmds = [f'{self.launch_command()} hostname > {_HOSTS}']

    @run_before('sanity')
    def read_rank_hosts(self):
        path = os.path.join(self.stagedir, _HOSTS)
        if os.path.exists(path):
            with open(path) as fp:
                self.rank_hosts = [line.strip() for line in fp if line.strip()]

    @functools.cached_property
    def _tables(self):
        """One parsed OSU table per launch, in order."""
        tables = []
        for i, body in enumerate(self.launch_outputs(self.benchmark), 1):
            try:
                tables.append(osu_parser.parse_osu(body))
            except ParseError as err:
                raise SanityError(f'{self.benchmark} output, launch {i}: {err}') from None
        return tables

    @property
    def _parsed(self):
        return self._tables[0]

    def check_table(self):
        for i, table in enumerate(self._tables, 1):
            try:
                check_osu_table(table, self.benchmark, self.sizes, self.validate)
            except Insane as err:
                raise SanityError(f'launch {i}: {err}') from None

    def check_nodes(self, expected):
        hosts = sorted(set(self.rank_hosts))
        if len(hosts) != expected:
            raise SanityError(f'the ranks ran on {len(hosts)} distinct node(s) {hosts}, '
                              f'expected {expected}')
        listed = set(self.job.nodelist or [])
        if listed and not set(hosts) <= listed:
            # Short and fully qualified names may differ; compare short names.
            short = {h.split('.')[0] for h in listed}
            if not {h.split('.')[0] for h in hosts} <= short:
                raise SanityError(f'ranks ran on {hosts}, outside the job\'s node list '
                                  f'{sorted(listed)}')

    @sanity_function
    def complete(self):
        self.check_table()
        return sn.assert_eq(self.job.exitcode, 0,
                            msg=f'{self.benchmark} exited with {{0}}')

    def _figures(self, size, column):
        """The figure of every launch: a row of *size*, or the only row."""
        if size is None:
            return [t['rows'][0][column] for t in self._tables]
        return [osu_parser.value_at(t, size, column) for t in self._tables]

    def figure(self, name, size, column, unit):
        """A performance function: the launches' figures summarised by
        :func:`hpc_health.stats.location`."""
        self._sources[name] = (size, column)
        return sn.make_performance_function(self._location(size, column), unit)

    @sn.deferrable
    def _location(self, size, column):
        return location(self._figures(size, column))

    def perf_at_sizes(self, name, column, unit):
        return {f'{name}_{size_label(s)}': self.figure(f'{name}_{size_label(s)}', s,
                                                       column, unit)
                for s in self.sizes}

    def perf_samples(self):
        return {name: self._figures(size, column)
                for name, (size, column) in self._sources.items()}


@rfm.simple_test
class OsuPointToPoint(OsuBase):
    """Latency, bandwidth and bidirectional bandwidth between two ranks,
    on one node or on two nodes (``inter_node``, where the partition has two
    or more nodes)."""

    benchmark = parameter(['osu_latency', 'osu_bw', 'osu_bibw'])

    #: ``intra_node``: both ranks on one node (shared memory);
    #: ``inter_node``: one rank on each of two nodes (the fabric).
    placement = parameter(['intra_node', 'inter_node'])

    descr = 'OSU point-to-point latency and bandwidth'
    tags = {'mpi', 'osu', 'network'}
    num_tasks = 2

    @run_after('setup')
    def place_ranks(self):
        if self.placement == 'inter_node':
            reason = inter_node_skip_reason(site.num_nodes(self),
                                            self.current_partition.name)
            self.skip_for(reason is not None, reason)
            self.num_tasks_per_node = 1
        else:
            self.num_tasks_per_node = 2

    @run_before('run')
    def set_options(self):
        self.executable_opts = self.options()
        if self.placement == 'inter_node':
            self.record_rank_hosts()

    @sanity_function
    def complete(self):
        self.check_table()
        if self.placement == 'inter_node':
            self.check_nodes(2)
        return sn.assert_eq(self.job.exitcode, 0,
                            msg=f'{self.benchmark} exited with {{0}}')

    @run_before('performance')
    def set_perf_variables(self):
        if self.benchmark == 'osu_latency':
            self.perf_variables = self.perf_at_sizes('latency', 'avg_latency_us', 'us')
        else:
            name = 'bw' if self.benchmark == 'osu_bw' else 'bibw'
            self.perf_variables = self.perf_at_sizes(name, 'bandwidth_mbs', 'MB/s')


@rfm.simple_test
class OsuMessageRate(OsuBase):
    """Aggregate bandwidth and message rate of several concurrent pairs
    (``osu_mbw_mr``): within a node, or across two nodes."""

    placement = parameter(['intra_node', 'inter_node'])

    #: Communicating pairs.  Unset: the site setting ``osu.pairs``, else half
    #: the ranks per node (at least one).
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None`
    pairs = variable(int, type(None), value=None)

    benchmark = 'osu_mbw_mr'
    descr = 'OSU multiple-pair bandwidth and message rate'
    tags = {'mpi', 'osu', 'network'}

    @run_after('setup')
    def place_ranks(self):
        if self.pairs is None:
            self.pairs = int(site.section(self, 'osu').get('pairs') or
                             max(1, site.ranks_per_node(self) // 2))
        self.num_tasks = 2 * self.pairs
        if self.placement == 'inter_node':
            reason = inter_node_skip_reason(site.num_nodes(self),
                                            self.current_partition.name)
            self.skip_for(reason is not None, reason)
            # Ranks are placed in blocks, and OSU pairs rank i with i + pairs:
            # every pair then crosses the two nodes.
            self.num_tasks_per_node = self.pairs
        else:
            self.num_tasks_per_node = self.num_tasks

    @run_before('run')
    def set_options(self):
        self.executable_opts = self.options(self.pairs)
        if self.placement == 'inter_node':
            self.record_rank_hosts()

    @sanity_function
    def complete(self):
        self.check_table()
        if self._parsed['pairs'] not in (None, self.pairs):
            raise SanityError(f'osu_mbw_mr ran {self._parsed["pairs"]} pairs, '
                              f'{self.pairs} were requested')
        if self.placement == 'inter_node':
            self.check_nodes(2)
        return sn.assert_eq(self.job.exitcode, 0, msg='osu_mbw_mr exited with {0}')

    @run_before('performance')
    def set_perf_variables(self):
        pv = self.perf_at_sizes('bw', 'bandwidth_mbs', 'MB/s')
        pv.update(self.perf_at_sizes('msg_rate', 'messages_per_s', 'messages/s'))
        self.perf_variables = pv


@rfm.simple_test
class OsuCollective(OsuBase):
    """Collective latency over every rank of the allocation (nodes x ranks
    per node): average and slowest rank (``-f``)."""

    benchmark = parameter(['osu_barrier', 'osu_allreduce', 'osu_alltoall', 'osu_bcast'])

    descr = 'OSU collective latency over the whole allocation'
    tags = {'mpi', 'osu', 'network'}

    @run_after('setup')
    def place_ranks(self):
        self.num_tasks_per_node = site.ranks_per_node(self)
        self.num_tasks = self.num_tasks_per_node * site.num_nodes(self)
        self.skip_for(self.num_tasks < 2, 'a collective needs 2 ranks or more')

    @run_before('run')
    def set_options(self):
        self.executable_opts = self.options()

    @sanity_function
    def complete(self):
        self.check_table()
        return sn.assert_eq(self.job.exitcode, 0,
                            msg=f'{self.benchmark} exited with {{0}}')

    @run_before('performance')
    def set_perf_variables(self):
        if self.benchmark == 'osu_barrier':
            # Barrier prints one row and no size column.
            self.perf_variables = {
                'latency': self.figure('latency', None, 'avg_latency_us', 'us'),
                'latency_max': self.figure('latency_max', None, 'max_latency_us', 'us'),
            }
            return
        pv = self.perf_at_sizes('latency', 'avg_latency_us', 'us')
        pv.update(self.perf_at_sizes('latency_max', 'max_latency_us', 'us'))
        self.perf_variables = pv
