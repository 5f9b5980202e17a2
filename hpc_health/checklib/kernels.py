"""Our own MPI kernels (halo exchange, barrier): the shared build fixture and
the base of the checks that run them."""

import functools
import glob
import json
import os
import shlex

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import fixture, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from hpc_health.checklib import spack_build as builds
from hpc_health.checklib.check import HealthCheck, num_nodes, ranks_per_node, settings
from hpc_health.checklib.launches import RepeatedLaunches
from hpc_health.checklib.shell import shell_path
from hpc_health.parsers import ParseError

KERNELS_VERSION = '1.1'
_SPEC = 'hpc-health-kernels'


def kernels_source(test):
    return os.path.join(settings(test)['repo_root'], 'kernels')


class KernelsBuild(builds.SkipWhenSpackBusy, rfm.CompileOnlyRegressionTest):
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
            spec = f'{_SPEC}@={KERNELS_VERSION} {settings(self)["kernels"]["variants"]}'
            self.build_system.commands = [builds.ensure_command(
                self, spack, _SPEC, [spec.strip()], {_SPEC: f'{src}@{KERNELS_VERSION}'})]
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


class KernelRun(HealthCheck, RepeatedLaunches):
    """Base of the checks that run one of our kernels with ``--json``,
    launched ``samples`` times in the job: each launch is one sample of
    every figure, and a figure is the location
    (:func:`hpc_health.stats.location`) of its launches."""

    kernels = fixture(KernelsBuild, scope='environment')
    valid_systems = ['+mpi']
    valid_prog_environs = ['+mpi']
    # Without one, the local scheduler waits for ever: Open MPI 4.1's mpirun
    # can outlive ranks killed while they connect to it (4 in 300 here), and
    # the night must end with this check failed, not stop there.
    time_limit = '10m'

    #: Name of the kernel binary.
    program = variable(str)

    #: How the kernels were built (copied from the fixture, for the record).
    build_method = variable(str, value='')

    #: Confine the run to one node (``hpc-health run --per-node`` sets it, and
    #: ReFrame's ``--distribute`` pins each copy of the check to one node).
    per_node = variable(typ.Bool, value=False)

    #: Launches of the kernel in the job, each one sample.  Unset: the site
    #: setting ``kernels.samples`` (default 5).
    samples = variable(int, type(None), value=None)

    #: Parser of the program's JSON output.
    parser = None

    @run_after('setup')
    def set_tasks(self):
        self.num_tasks_per_node = ranks_per_node(self)
        self.num_tasks = self.num_tasks_per_node * (1 if self.per_node else num_nodes(self))
        self.fill_from_settings('kernels', samples='samples')

    @run_before('run')
    def set_executable(self):
        self.executable = shell_path(os.path.join(self.kernels.bindir, self.program))
        self.build_method = self.kernels.method_used
        # Where the ranks really ran, and with what, goes into the output.
        self.prerun_cmds = ['echo ' + shlex.quote(f'hpc-health: kernels built with {self.build_method}'),
                            'echo "hpc-health: nodes ${SLURM_JOB_NODELIST:-$(hostname)}"']

    @functools.cached_property
    def _launches(self):
        parsed = []
        for i, body in enumerate(self.launch_outputs(self.program), 1):
            try:
                parsed.append(type(self).parser(body))
            except ParseError as err:
                raise SanityError(f'{self.program} output, launch {i}: {err}') from None
        return parsed

    def outputs(self):
        """The parsed output of every launch, in order."""
        return self._launches
