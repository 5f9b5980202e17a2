"""Build fixtures: each Spack spec set is built once per partition and
programming environment, in a persistent environment outside the stage."""

import json
import os
import shutil
import sys

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, sanity_function, variable

from hpc_health.checklib.check import RecordedSkip, settings
from hpc_health.spack import commands, kit
from hpc_health.spack import environment as spackenv


def spack_executable(test):
    """The spack command; in a dry run without Spack, the plain name, so the
    generated scripts show what a site with Spack would run."""
    found = kit.find_spack(settings(test)['spack'].get('spack_root'))
    if found is None and test.is_dry_run():
        return 'spack'
    return found


def spack_missing_reason():
    rec = kit.record()
    if rec:
        return f'Spack {kit.broken_python(rec)} (hpc-health spack setup mends it)'
    return ('Spack not found: no `spack` on PATH, no $SPACK_ROOT and no '
            'spack.spack_root in the site settings')


def env_dir(test, env_name):
    """Directory of the persistent environment *env_name* of the test's
    partition and programming environment."""
    sp = settings(test)['spack']
    if not sp.get('environment') or not sp.get('env_dir'):
        raise ValueError('the site settings have no spack.environment/env_dir')
    return os.path.join(sp['env_dir'],
                        f'{test.current_partition.name}-{test.current_environ.name}',
                        env_name)


def spec_name(spec):
    return spackenv.spec_name(spec)


def ensure_command(test, spack, env_name, specs, develop=None):
    """Shell command that brings the persistent environment *env_name* of the
    test's partition and programming environment up to date.

    A Spack failure does not stop the build script: the fixture's sanity
    check then fails with Spack's own error excerpt as the reason, which
    ReFrame would otherwise reduce to "build job failed with exit code 1".
    """
    sp = settings(test)['spack']
    args = commands.ensure(sys.executable, spack, env_dir(test, env_name), sp['environment'],
                           settings(test)['site_dir'], specs, develop, sp)
    return (' '.join(_quote(a) for a in args) +
            f' || echo "{_FAILED_MARK} $?"')


_FAILED_MARK = spackenv.FAILED_MARK
#: Files of a Spack build kept in the output folder.
KEEP = ['spack-build.json', 'spack.lock', 'spack-commands.log']


def keep_now(test):
    """Copy the build's provenance files to the output folder now.

    ReFrame copies a fixture's ``keep_files`` when it cleans the fixture up,
    and it cleans up only once every dependent has passed: after a failed
    or skipped dependent the lock and hashes would be lost, when they
    matter most.
    """
    for name in KEEP:
        src = os.path.join(test.stagedir, name)
        if os.path.isfile(src):
            os.makedirs(test.outputdir, exist_ok=True)
            shutil.copy2(src, test.outputdir)


def spack_failure(test):
    """Spack's error excerpt when the ensure command of *test*'s build
    failed, else None."""
    out = os.path.join(test.stagedir, sn.evaluate(test.stdout))
    err = os.path.join(test.stagedir, sn.evaluate(test.stderr))
    try:
        with open(out) as fp:
            if _FAILED_MARK not in fp.read():
                return None
        with open(err) as fp:
            text = fp.read()
    except OSError:
        return None
    # spackenv prints "hpc-health: <what failed>" and the excerpt below it.
    start = text.find('hpc-health: ')
    return (text[start:] if start >= 0 else text).strip() or 'spackenv failed (no message)'


def spack_busy(test):
    """The reason when the ensure command of *test*'s build found Spack
    busy, else None."""
    try:
        with open(os.path.join(test.stagedir, sn.evaluate(test.stderr))) as fp:
            text = fp.read()
    except OSError:
        return None
    start = text.find(spackenv.BUSY_MARK)
    if start < 0:
        return None
    first = text[start + len(spackenv.BUSY_MARK):].strip().splitlines()
    return f"Spack busy: {first[0] if first else 'held by another process'}"


def _literal(text):
    # ReFrame formats assertion messages with str.format
    return text.replace('{', '{{').replace('}', '}}')


def site_develop(test, specs):
    """The site's ``spack.develop`` entries for the packages named in *specs*
    (a develop entry for a package outside the environment is an error to
    Spack)."""
    names = {spec_name(s) for s in specs}
    dev = settings(test)['spack'].get('develop') or {}
    return {name: where for name, where in dev.items() if name in names}


def placeholder_prefix(test, env_name, name):
    """Shell text that finds an installed prefix at job time: what a dry run
    shows instead of the prefix recorded by a real build."""
    return commands.location(env_dir(test, env_name), name)


def _quote(arg):
    import shlex
    return shlex.quote(str(arg))


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
        with open(os.path.join(self.stagedir, 'spack-build.json')) as fp:
            return json.load(fp)

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
    toolchain = (test.current_environ.extras or {}).get('spack_toolchain')
    return [f'{s} {toolchain}' for s in specs] if toolchain else list(specs)
