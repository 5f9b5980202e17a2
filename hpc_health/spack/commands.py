"""Every Spack command line the suite runs, in one place.

Each function returns the words after the ``spack`` executable (which the
caller finds: :func:`hpc_health.spack.kit.find_spack`); the callers run
them with a time limit (:func:`hpc_health.spack.lock.run`):

- in a build's persistent environment (:mod:`hpc_health.spack.environment`):
  :func:`concretize`, :func:`install`, :func:`find_prefixes`, and
  :func:`python_script` for the package index;
- in a dry run's job script, where no prefix was recorded: :func:`location`;
- for the set-up and the kit (:mod:`hpc_health.spack.kit`): :func:`version`,
  :func:`python_code` (the externals' detection), :func:`mirror_create`.

And the one command of the suite's own that a build fixture's job script
runs, :func:`ensure`, which runs the environment's Spack commands.

Standard library only (the environment module imports it inside build jobs).
"""

import os
import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import Optional, Union

#: A path given as text or as a Path.
PathLike = Union[str, 'os.PathLike[str]']

#: Each Spack command's time limit in seconds, by subcommand (a cold
#: install here took 144 s, a concretization 30 s; a site building its MPI
#: through Spack needs hours).  ``HPC_HEALTH_SPACK_LIMIT`` sets one for all.
LIMITS_S = {'concretize': 1800, 'install': 4 * 3600, 'find': 300, 'python': 1800}
LIMIT_VAR = 'HPC_HEALTH_SPACK_LIMIT'
#: Time limit of each Spack command of the set-up, in seconds (``spack
#: mirror create`` downloads; the others take seconds).
SETUP_LIMIT_S = 3600

#: The module a build fixture's job script runs (``python -m``).
ENSURE_MODULE = 'hpc_health.spack.environment'
#: What marks the ensure command in a build script (the pre-build finds the
#: scripts a dry run wrote by it).
ENSURE_MARK = f'-m {ENSURE_MODULE} ensure'


def in_env(env_dir: PathLike, *args: str) -> list[str]:
    """*args* run in the Spack environment *env_dir*."""
    return ['-e', str(env_dir), *args]


def env_of(args: Sequence[str]) -> Optional[str]:
    """The environment directory a command runs in (``-e ENV``), or None."""
    return args[1] if args[:1] == ['-e'] else None


def concretize(env_dir: PathLike) -> list[str]:
    return in_env(env_dir, 'concretize', '-f')


def install(env_dir: PathLike) -> list[str]:
    return in_env(env_dir, 'install', '--fail-fast')


def find_prefixes(env_dir: PathLike, names: Iterable[str]) -> list[str]:
    """One line ``NAME<tab>PREFIX`` for each installed root of *names* (a
    ``location -i`` per root costs Spack's start-up, 2 s, each time)."""
    return in_env(env_dir, 'find', '--format', '{name}\t{prefix}', *names)


def python_script(env_dir: PathLike, script: str) -> list[str]:
    """The Python file *script* run by Spack's own Python, Spack importable."""
    return in_env(env_dir, 'python', script)


def python_code(code: str) -> list[str]:
    """The Python program *code* run by ``spack python -c``, which compiles
    one statement: any program, wrapped in ``exec``."""
    return ['python', '-c', f'exec({code!r})']


def version() -> list[str]:
    return ['--version']


def mirror_create(dest: PathLike, specs: Iterable[str]) -> list[str]:
    """A source mirror of *specs* in *dest*.  Two versions of one package do
    not concretize together (unify: true): each spec alone, in one call
    (Spack solves them side by side; one call a spec took twice as long)."""
    return ['-c', 'concretizer:unify:false', 'mirror', 'create', '-d', str(dest), *specs]


def location(env_dir: PathLike, name: str) -> str:
    """Shell text that finds the install prefix of *name* at job time: what
    a dry run shows instead of the prefix a real build recorded."""
    return f'$(spack -e {shlex.quote(str(env_dir))} location -i {shlex.quote(str(name))})'


def limit_of(args: Sequence[str]) -> float:
    """The time limit of the Spack command *args* (after ``-e ENV``)."""
    try:
        given = float(os.environ.get(LIMIT_VAR) or 0)
    except ValueError:
        given = 0       # not seconds: the defaults
    if given > 0:
        return given
    command = next((a for a in args if not a.startswith('-') and a in LIMITS_S), None)
    return LIMITS_S[command] if command else 1800


def ensure(python: str, spack: str, env_dir: str, site_env: str, site_dir: str,
           specs: Iterable[str], develop: Optional[Mapping[str, str]] = None,
           options: Optional[Mapping[str, Optional[str]]] = None, out: str = '.') -> list[str]:
    """The command line that brings the persistent environment *env_dir* up
    to date (``python -m hpc_health.spack.environment ensure``): *specs*,
    *develop* packages (name -> ``path@version``) and the site's *options*
    (``install_tree``, ``builtin_repo``, ``source_mirror``,
    ``bootstrap_mirror``: those set are passed)."""
    args = [python, '-m', ENSURE_MODULE, 'ensure', '--spack', spack,
            '--env-dir', env_dir, '--site-env', site_env,
            '--site-dir', site_dir, '--out', out]
    for spec in specs:
        args += ['--spec', spec]
    for name, where in (develop or {}).items():
        args += ['--develop', f'{name}={where}']
    for opt in ('install_tree', 'builtin_repo', 'source_mirror', 'bootstrap_mirror'):
        value = (options or {}).get(opt)
        if value:
            args += [f'--{opt.replace("_", "-")}', value]
    return args
