"""Build fixtures: each Spack spec set is built once per partition and
programming environment, in a persistent environment outside the stage."""

import os
import sys

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, sanity_function, variable

from hpc_health.checklib.check import RecordedSkip, settings
from hpc_health.spack import commands, fixtures
from hpc_health.spack.fixtures import KEEP


def spack_executable(test):
    """The spack command; in a dry run without Spack, the plain name, so the
    generated scripts show what a site with Spack would run."""
    return fixtures.executable(settings(test)['spack'].get('spack_root'), test.is_dry_run())


def spack_missing_reason():
    return fixtures.missing_reason()


def env_dir(test, env_name):
    """Directory of the persistent environment *env_name* of the test's
    partition and programming environment."""
    return fixtures.env_dir(settings(test)['spack'], test.current_partition.name,
                            test.current_environ.name, env_name)


def ensure_command(test, spack, env_name, specs, develop=None):
    """Shell command that brings the persistent environment *env_name* of the
    test's partition and programming environment up to date; a Spack
    failure does not stop the build script (:func:`spack_failure`)."""
    return fixtures.ensure_line(sys.executable, spack, env_dir(test, env_name),
                                settings(test)['spack'], settings(test)['site_dir'], specs, develop)


def keep_now(test):
    """Copy the build's provenance files to the output folder now.

    ReFrame copies a fixture's ``keep_files`` when it cleans the fixture up,
    and it cleans up only once every dependent has passed: after a failed
    or skipped dependent the lock and hashes would be lost, when they
    matter most.
    """
    fixtures.keep(test.stagedir, test.outputdir)


def spack_failure(test):
    """Spack's error excerpt when the ensure command of *test*'s build
    failed, else None."""
    return fixtures.failure(os.path.join(test.stagedir, sn.evaluate(test.stdout)),
                            os.path.join(test.stagedir, sn.evaluate(test.stderr)))


def spack_busy(test):
    """The reason when the ensure command of *test*'s build found Spack
    busy, else None."""
    return fixtures.busy(os.path.join(test.stagedir, sn.evaluate(test.stderr)))


def _literal(text):
    # ReFrame formats assertion messages with str.format
    return text.replace('{', '{{').replace('}', '}}')


def site_develop(test, specs):
    """The site's ``spack.develop`` entries for the packages named in *specs*."""
    return fixtures.develop_for(settings(test)['spack'].get('develop'), specs)


def placeholder_prefix(test, env_name, name):
    """Shell text that finds an installed prefix at job time: what a dry run
    shows instead of the prefix recorded by a real build."""
    return commands.location(env_dir(test, env_name), name)


class SkipWhenSpackBusy(RecordedSkip):
    """Spack held by another process (its database or stage lock past its
    60 s, or this environment by another hpc-health) is not the machine's
    ill health: the build and the checks needing it are SKIPPED with the
    reason, and the next run builds it."""

    @run_after('compile')
    def skip_when_spack_was_busy(self):
        busy = spack_busy(self)
        if busy:
            self.skip_for(True, busy)


class SpackBuild(SkipWhenSpackBusy, rfm.CompileOnlyRegressionTest):
    """Install a set of Spack specs in the site's persistent environment.

    Subclasses set :attr:`spack_specs` (and :attr:`spack_develop` for
    packages built from a local tree).  Dependent checks read the install
    prefixes with :meth:`prefix`.  When Spack is absent the fixture is
    skipped with the reason, and so are the checks that need it.
    """

    #: Specs installed together in one environment.
    #:
    #: :type: :class:`List[str]`
    spack_specs = variable(typ.List[str])

    #: Packages built from a local source tree: name -> ``path@version``.
    #:
    #: :type: :class:`Dict[str, str]`
    #: :default: ``{}``
    spack_develop = variable(typ.Dict[str, str], value={})

    #: Name of the environment below the site's ``spack.env_dir``.
    #:
    #: :type: :class:`str`
    spack_env_name = variable(str)

    build_locally = True
    sourcesdir = None
    build_system = 'CustomBuild'
    # Provenance kept with the results: what was concretized, with what.
    keep_files = list(KEEP)

    @run_before('compile')
    def ensure_environment(self):
        spack = spack_executable(self)
        self.skip_for(spack is None, spack_missing_reason())
        develop = {**site_develop(self, self.spack_specs), **self.spack_develop}
        self.build_system.commands = [
            ensure_command(self, spack, self.spack_env_name, self.spack_specs,
                           develop)
        ]

    @sanity_function
    def environment_ready(self):
        failure = spack_failure(self)
        return sn.all([
            sn.assert_true(failure is None, msg=_literal(failure or '')),
            sn.assert_found(r'hpc-health: Spack environment', self.stdout),
        ])

    @run_after('sanity')
    def keep_provenance(self):
        keep_now(self)

    def build_record(self):
        return fixtures.built(self.stagedir)

    def prefix(self, name):
        if self.is_dry_run():
            return placeholder_prefix(self, self.spack_env_name, name)
        return self.build_record()['prefixes'][name]


def with_toolchain(test, specs):
    """Add the programming environment's compiler to every root spec.

    A site with several toolchains (Cray's PrgEnv-cray and PrgEnv-gnu) names
    the compiler of each ReFrame environment in its ``extras``
    (``spack_toolchain: '%cce'``); each environment has its own Spack
    environment, so the builds differ as the toolchains do.
    """
    return fixtures.with_toolchain(specs, (test.current_environ.extras or {}).get('spack_toolchain'))
