"""Start-up against scale in the check library: our barrier kernel launched
at growing scale points in one allocation, under a named launcher, timing
MPI_Init and the first barrier after it (settings ``startup``).

Every launch is written out by the check (the job's own launch is a
marker): a scale point is ``--nodes/--ntasks/--ntasks-per-node`` under srun
and Open MPI's ``-np P --map-by ppr:R:node`` under mpirun.  The points run
round-robin, so a slow spell of the node system hits every point alike and
the growth of one round is a fair sample.
"""

import functools
import shlex
import statistics

import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher
from reframe.core.builtins import run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from hpc_health.checklib.check import num_nodes, ranks_per_node, settings
from hpc_health.checklib.kernels import KernelRun
from hpc_health.checklib.launches import case_launch, case_sections, job_output
from hpc_health.judge.scaling import LINEAR_SHARE_FINDING, fit_startup, scale_points
from hpc_health.model.figures import LOWER, Axis, Figure
from hpc_health.parsers import ParseError
from hpc_health.parsers.kernels import parse_barrier


def point_label(point):
    return f'{point[0]}x{point[1]}'


def placement(launcher, nodes, ranks_per_node):
    """Launcher options that place one scale point in the allocation."""
    if launcher == 'srun':
        return [f'--nodes={nodes}', f'--ntasks={nodes * ranks_per_node}',
                f'--ntasks-per-node={ranks_per_node}']
    return ['--map-by', f'ppr:{ranks_per_node}:node']


def growth(rnd, points, key, smallest_ranks=1):
    """This round's time at the largest point over its time at the smallest
    point of at least *smallest_ranks* ranks; None with one point only."""
    usable = [p for p in points if p[0] * p[1] >= smallest_ranks]
    if len(usable) < 2:
        return None
    first, last = rnd[point_label(usable[0])], rnd[point_label(usable[-1])]
    return last[key] / first[key]


class StartupSweep(KernelRun):
    """Each check names its launcher in ``launcher`` (a parameter)."""

    program = 'barrier'
    parser = staticmethod(parse_barrier)
    #: (nodes, ranks per node) of every scale point.
    points = variable(typ.List[typ.List[int]], value=[])
    #: {figure: the fitted model}, kept with the figures.
    startup_fit = variable(typ.Dict[str, str], value={})
    #: Timed barriers per launch (settings ``startup.iters``).
    iters = variable(int, value=20)

    figures = [
        Figure('mpi_init_{}', 's', LOWER, lambda rnd, p: rnd[point_label(p)]['mpi_init_s'],
               Axis('points', point_label), group='mpi_init'),
        Figure('first_barrier_{}', 'ms', LOWER,
               # One rank has nobody to wait for: no figure.
               lambda rnd, p: None if p[0] * p[1] == 1 else
               1e3 * rnd[point_label(p)]['first_barrier_s'],
               Axis('points', point_label), group='first_barrier'),
        # Both are ratios of one round's own points: what the launcher adds
        # per doubling, with the node's luck of the night divided out.
        Figure('init_growth', 'ratio', LOWER,
               lambda rnd: growth(rnd, rnd['_points'], 'mpi_init_s')),
        Figure('first_barrier_growth', 'ratio', LOWER,
               lambda rnd: growth(rnd, rnd['_points'], 'first_barrier_s', smallest_ranks=2)),
    ]

    @run_after('setup')
    def plan_points(self):
        conf = settings(self).get('startup') or {}
        part = self.current_partition
        self.skip_for(self.launcher not in (conf.get('launchers') or []),
                      f'{self.launcher} is not in startup.launchers')
        self.skip_for(self.launcher == 'srun' and part.scheduler.registered_name != 'slurm',
                      f'srun needs a Slurm partition; {part.fullname} is scheduled by '
                      f'{part.scheduler.registered_name}')
        self.samples = conf.get('samples') or 5
        self.iters = conf.get('iters') or 20
        self.points = [list(p) for p in scale_points(num_nodes(self), ranks_per_node(self))]

    @run_before('run')
    def write_launches(self):
        """The scale points' launches, all written here; the job's own
        launch only prints a marker."""
        own = self.job.launcher
        if getattr(type(own), 'registered_name', '') == self.launcher:
            launcher = own            # keeps the partition's launcher options
        else:
            launcher = getlauncher(self.launcher)()
        opts = ['--iters', str(self.iters), '--warmup', '2', '--json']
        extra = [shlex.quote(o) for o in
                 (settings(self).get('startup') or {}).get(f'{self.launcher}_options') or []]
        self._launches = {}
        for n, r in self.points:
            self.job.num_tasks, self.job.num_tasks_per_node = n * r, r
            self._launches[point_label((n, r))] = ' '.join(
                launcher.run_command(self.job).split() + list(extra) +
                placement(self.launcher, n, r) +
                [self.executable, *opts])
        self.job.num_tasks, self.job.num_tasks_per_node = self.num_tasks, self.num_tasks_per_node
        self.job.launcher = getlauncher('local')()
        self.executable, self.executable_opts = 'echo', [
            f'"hpc-health: start-up sweep under {self.launcher}"']

    def repeat_launches(self):
        self.postrun_cmds = [case_launch(label, rnd, command)
                             for rnd in range(1, self.samples + 1)
                             for label, command in self._launches.items()] + \
            list(self.postrun_cmds)

    @functools.cached_property
    def _rounds(self):
        sections = case_sections(job_output(self, self.program))
        rounds = []
        for rnd in range(1, self.samples + 1):
            found = {'_points': [tuple(p) for p in self.points]}
            for n, r in self.points:
                label = point_label((n, r))
                rc, body = sections.get((label, rnd), (None, None))
                where = f'{self.launcher} {label} (nodes x ranks per node), round {rnd}'
                if body is None or rc is None:
                    raise SanityError(f'{where}: the launch did not run to its end')
                if rc != 0:
                    raise SanityError(f'{where}: the launch exited with {rc}')
                try:
                    found[label] = parse_barrier(body)
                except ParseError as err:
                    raise SanityError(f'{where}: {err}') from None
                if found[label]['ranks'] != n * r:
                    raise SanityError(f'{where}: {found[label]["ranks"]} ranks started, '
                                      f'{n * r} were asked for')
                if found[label]['first_barrier_s'] is None:
                    raise SanityError(f'{where}: the barrier kernel is older than 1.1 '
                                      '(no first_barrier_s): rebuild the kernels')
            rounds.append(found)
        return rounds

    def outputs(self):
        return self._rounds

    def check_output(self):
        rounds = self._rounds
        for key, unit, scale in (('mpi_init_s', 's', 1.0), ('first_barrier_s', 'ms', 1e3)):
            ranks = [n * r for n, r in self.points]
            medians = [scale * statistics.median(rnd[point_label(p)][key] for rnd in rounds)
                       for p in self.points]
            fit = fit_startup(ranks, medians)
            name = key.replace('_s', '')
            self.startup_fit[name] = fit.describe(unit)
            # Three points fit the three terms exactly: a finding needs a fourth.
            if len(set(ranks)) >= 4 and fit.linear_share >= LINEAR_SHARE_FINDING:
                self.findings[f'{name}_{point_label(self.points[-1])}'] = (
                    f'{name} under {self.launcher} grows linearly with the ranks: the '
                    f'c·P term is {fit.linear_share:.0%} of it at {max(ranks)} ranks '
                    f'({fit.describe(unit)})')

    @sanity_function
    def complete(self):
        self.check_output()
        return sn.assert_eq(self.job.exitcode, 0, msg='the start-up sweep job exited with {0}')
