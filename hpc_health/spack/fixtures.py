"""What a build fixture of the check library asks of Spack: which Spack,
or why there is none; the persistent environment of a partition and
programming environment; the ensure line its job script runs; the files
it keeps; Spack's failure or busy lock read back from its output.

``hpc_health.checklib.spack_build`` holds the ReFrame fixtures and hands them
the test's settings and files; everything Spack is here (no ReFrame).
"""

import json
import os
import shlex
import shutil
from collections.abc import Iterable, Mapping
from typing import Any, Optional

from hpc_health.spack import commands, environment, kit

#: Where a build's prefixes, lock and hashes are recorded (in its stage).
RECORD = 'spack-build.json'
#: Files of a Spack build kept in the output folder.
KEEP = [RECORD, 'spack.lock', 'spack-commands.log']


def executable(spack_root: Optional[str], dry_run: bool = False) -> Optional[str]:
    """The spack command; in a dry run without Spack, the plain name, so the
    generated scripts show what a site with Spack would run."""
    found = kit.find_spack(spack_root)
    if found is None and dry_run:
        return 'spack'
    return found


def missing_reason() -> str:
    rec = kit.record()
    if rec:
        return f'Spack {kit.broken_python(rec)} (hpc-health spack setup mends it)'
    return ('Spack not found: no `spack` on PATH, no $SPACK_ROOT and no '
            'spack.spack_root in the site settings')


def env_dir(spack_settings: Mapping[str, Any], partition: str, environ: str,
            env_name: str) -> str:
    """Directory of the persistent environment *env_name* of *partition*
    and programming environment *environ* (names)."""
    if not spack_settings.get('environment') or not spack_settings.get('env_dir'):
        raise ValueError('the site settings have no spack.environment/env_dir')
    return os.path.join(spack_settings['env_dir'], f'{partition}-{environ}', env_name)


def ensure_line(python: str, spack: str, env_dir_: str, spack_settings: Mapping[str, Any],
                site_dir: str, specs: Iterable[str],
                develop: Optional[Mapping[str, str]] = None) -> str:
    """Shell command that brings the persistent environment *env_dir_* up to
    date.

    A Spack failure does not stop the build script: the fixture's sanity
    check then fails with Spack's own error excerpt as the reason, which
    ReFrame would otherwise reduce to "build job failed with exit code 1".
    """
    args = commands.ensure(python, spack, env_dir_, spack_settings['environment'], site_dir,
                           specs, develop, spack_settings)
    return (' '.join(shlex.quote(str(a)) for a in args) +
            f' || echo "{environment.FAILED_MARK} $?"')


def keep(stagedir: str, outputdir: str) -> None:
    """Copy the build's provenance files from *stagedir* to *outputdir*."""
    for name in KEEP:
        src = os.path.join(stagedir, name)
        if os.path.isfile(src):
            os.makedirs(outputdir, exist_ok=True)
            shutil.copy2(src, outputdir)


def failure(stdout_path: str, stderr_path: str) -> Optional[str]:
    """Spack's error excerpt when the ensure command whose output and errors
    are in these files failed, else None."""
    try:
        with open(stdout_path) as fp:
            if environment.FAILED_MARK not in fp.read():
                return None
        with open(stderr_path) as fp:
            text = fp.read()
    except OSError:
        return None
    # environment.py prints "hpc-health: <what failed>" and the excerpt below it.
    start = text.find('hpc-health: ')
    return (text[start:] if start >= 0 else text).strip() or 'spackenv failed (no message)'


def busy(stderr_path: str) -> Optional[str]:
    """The reason when the ensure command whose errors are in this file
    found Spack busy, else None."""
    try:
        with open(stderr_path) as fp:
            text = fp.read()
    except OSError:
        return None
    start = text.find(environment.BUSY_MARK)
    if start < 0:
        return None
    first = text[start + len(environment.BUSY_MARK):].strip().splitlines()
    return f"Spack busy: {first[0] if first else 'held by another process'}"


def develop_for(develop_settings: Optional[Mapping[str, str]],
                specs: Iterable[str]) -> dict[str, str]:
    """The site's ``spack.develop`` entries (*develop_settings*) for the
    packages named in *specs* (a develop entry for a package outside the
    environment is an error to Spack)."""
    names = {environment.spec_name(s) for s in specs}
    return {name: where for name, where in (develop_settings or {}).items() if name in names}


def built(stagedir: str) -> dict[str, Any]:
    """The record a build wrote in *stagedir*: prefixes, lock, hashes."""
    with open(os.path.join(stagedir, RECORD)) as fp:
        return json.load(fp)


def with_toolchain(specs: Iterable[str], toolchain: Optional[str]) -> list[str]:
    """*specs* with the compiler *toolchain* (``%cce``) added to each, if any."""
    return [f'{s} {toolchain}' for s in specs] if toolchain else list(specs)
