"""Build fixtures: each Spack spec set is built once per partition and
programming environment, in a persistent environment outside the stage."""

import json
import os
import sys

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_before, sanity_function, variable

from healthlib import site, spackenv

_SPACKENV = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'spackenv.py')


def spack_executable(test):
    return spackenv.find_spack(site.section(test, 'spack').get('spack_root'))


def spack_missing_reason():
    return ('Spack not found: no `spack` on PATH, no $SPACK_ROOT and no '
            'spack.spack_root in the site settings')


def ensure_command(test, spack, env_name, specs, develop=None):
    """Shell command that brings the persistent environment *env_name* of the
    test's partition and programming environment up to date."""
    sp = site.section(test, 'spack')
    if not sp.get('environment') or not sp.get('env_dir'):
        raise ValueError('the site settings have no spack.environment/env_dir')
    env_dir = os.path.join(sp['env_dir'],
                           f'{test.current_partition.name}-{test.current_environ.name}',
                           env_name)
    args = [sys.executable, _SPACKENV, 'ensure', '--spack', spack,
            '--env-dir', env_dir, '--site-env', sp['environment'],
            '--site-dir', site.settings(test)['site_dir'], '--out', '.']
    for spec in specs:
        args += ['--spec', spec]
    for name, where in (develop or {}).items():
        args += ['--develop', f'{name}={where}']
    for opt in ('install_tree', 'builtin_repo', 'source_mirror', 'bootstrap_mirror'):
        if sp.get(opt):
            args += [f'--{opt.replace("_", "-")}', sp[opt]]
    return ' '.join(_quote(a) for a in args)


def _quote(arg):
    import shlex
    return shlex.quote(str(arg))


class SpackBuild(rfm.CompileOnlyRegressionTest):
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

    @run_before('compile')
    def ensure_environment(self):
        spack = spack_executable(self)
        self.skip_if(spack is None, spack_missing_reason())
        self.build_system.commands = [
            ensure_command(self, spack, self.spack_env_name, self.spack_specs,
                           self.spack_develop)
        ]

    @sanity_function
    def environment_ready(self):
        return sn.assert_found(r'hpc-health: Spack environment', self.stdout)

    def build_record(self):
        with open(os.path.join(self.stagedir, 'spack-build.json')) as fp:
            return json.load(fp)

    def prefix(self, name):
        return self.build_record()['prefixes'][name]
