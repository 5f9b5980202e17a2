"""Our own MPI kernels (halo exchange, barrier): the shared build fixture and
the base of the checks that run them."""

import functools
import glob
import os
import shlex

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import (fixture, run_after, run_before,
                                   sanity_function, variable)

from hpc_health.checklib import builds, site
from hpc_health.checklib.launches import RepeatedLaunches
from hpc_health.checklib.samples import PerfSamples, location
from hpc_health.parsers import ParseError
from reframe.core.exceptions import SanityError

KERNELS_VERSION = '1.0'
_SPEC = 'hpc-health-kernels'


def kernels_source(test):
    return os.path.join(site.settings(test)['repo_root'], 'kernels')


class KernelsBuild(site.RecordedSkip, rfm.CompileOnlyRegressionTest):
    """Build ``halo`` and ``barrier`` once per partition and environment.

    Through Spack (``hpc-health-kernels`` from our package repository, built
    from this checkout's ``kernels/`` folder) when Spack is available,
    otherwise with CMake from the same sources.  The build output says which.
    """

    #: ``auto`` (Spack when available), ``spack`` or ``cmake``.
    #:
    #: :type: :class:`str`
    #: :default: ``'auto'``
    build_method = variable(str, value='auto')

    #: What was used in the end, with the reason; set at build time.
    method_used = variable(str, value='')

    build_locally = True
    sourcesdir = None

    @run_before('compile')
    def choose_build(self):
        spack = builds.spack_executable(self)
        src = kernels_source(self)
        if self.build_method == 'spack' or (self.build_method == 'auto' and spack):
            self.skip_for(spack is None, builds.spack_missing_reason())
            self.method_used = f'spack ({spack})'
            self.keep_files = list(builds.KEEP)
            self.build_system = 'CustomBuild'
            self.build_system.commands = [builds.ensure_command(
                self, spack, _SPEC, [f'{_SPEC}@={KERNELS_VERSION}'],
                {_SPEC: f'{src}@{KERNELS_VERSION}'})]
        else:
            why = 'requested' if self.build_method == 'cmake' else builds.spack_missing_reason()
            self.method_used = f'cmake ({why})'
            self.sourcesdir = src
            self.build_system = 'CMake'
            self.build_system.builddir = 'build'
            self.build_system.max_concurrency = 2
        self.prebuild_cmds = [
            'echo ' + shlex.quote(f'hpc-health: building the kernels with {self.method_used}')]

    @property
    def bindir(self):
        if self.method_used.startswith('spack') and self.is_dry_run():
            return os.path.join(builds.placeholder_prefix(self, _SPEC, _SPEC), 'bin')
        if self.method_used.startswith('spack'):
            with open(os.path.join(self.stagedir, 'spack-build.json')) as fp:
                import json
                return os.path.join(json.load(fp)['prefixes'][_SPEC], 'bin')
        found = glob.glob(os.path.join(self.stagedir, 'build', '**', 'halo'), recursive=True)
        return os.path.dirname(found[0]) if found else os.path.join(self.stagedir, 'build')

    @run_after('sanity')
    def keep_provenance(self):
        builds.keep_now(self)

    @sanity_function
    def binaries_built(self):
        failure = builds.spack_failure(self)
        if failure:
            raise SanityError(failure)
        return sn.all([sn.assert_true(os.path.isfile(os.path.join(self.bindir, prog)),
                                      msg=f'{prog} was not built in {self.bindir}')
                       for prog in ('halo', 'barrier')])


class KernelRun(site.SiteReferences, PerfSamples, RepeatedLaunches,
                rfm.RunOnlyRegressionTest):
    """Base of the checks that run one of our kernels with ``--json``,
    launched ``samples`` times in the job: each launch is one sample of every
    figure, and a figure is the location (hpc_health.stats.location) of its
    launches."""

    kernels = fixture(KernelsBuild, scope='environment')
    valid_systems = ['+mpi']
    valid_prog_environs = ['+mpi']
    maintainers = ['hpc-health']

    #: Name of the kernel binary.
    program = variable(str)

    #: How the kernels were built (copied from the fixture, for the record).
    build_method = variable(str, value='')

    #: Confine the run to one node (``hpc-health run --per-node`` sets it, and
    #: ReFrame's ``--distribute`` pins each copy of the check to one node).
    #:
    #: :type: :class:`bool`
    #: :default: ``False``
    per_node = variable(typ.Bool, value=False)

    #: Launches of the kernel in the job, each one sample.  Unset: the site
    #: setting ``kernels.samples``, else 5.
    #:
    #: :type: :class:`int` or :obj:`None`
    samples = variable(int, type(None), value=None)

    #: Parser for the program's JSON output.
    parser = None

    @run_after('setup')
    def set_tasks(self):
        self.num_tasks_per_node = site.ranks_per_node(self)
        nodes = 1 if self.per_node else site.num_nodes(self)
        self.num_tasks = self.num_tasks_per_node * nodes

    @run_before('run')
    def set_executable(self):
        self.executable = os.path.join(self.kernels.bindir, self.program)
        self.build_method = self.kernels.method_used
        # The job's node list goes into the output so the results show where
        # the ranks really ran.
        self.prerun_cmds = ['echo ' + shlex.quote(f'hpc-health: kernels built with {self.build_method}'),
                            'echo "hpc-health: nodes ${SLURM_JOB_NODELIST:-$(hostname)}"']

    @run_before('run')
    def set_samples(self):
        if self.samples is None:
            self.samples = int(site.section(self, 'kernels').get('samples') or 5)

    @functools.cached_property
    def _launches(self):
        parsed = []
        for i, body in enumerate(self.launch_outputs(self.program), 1):
            try:
                parsed.append(type(self).parser(body))
            except ParseError as err:
                raise SanityError(f'{self.program} output, launch {i}: {err}') from None
        return parsed

    def launches(self):
        """The parsed output of every launch, in order."""
        return self._launches

    def per_launch(self, figure):
        """``figure(parsed)`` of every launch: the samples of one figure."""
        return [figure(p) for p in self.launches()]

    @sn.deferrable
    def location_of(self, figure):
        return location(self.per_launch(figure))
