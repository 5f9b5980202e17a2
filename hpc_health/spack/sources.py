"""The inputs of a persistent Spack environment that live outside it:
develop source trees (fingerprinted, and copied where a build writes into
its tree) and the package recipes; and the hold one hpc-health process has
on an environment while it builds it.  Used by :mod:`environment` inside the
build jobs; standard library only."""

import hashlib
import os
import shutil
import subprocess

from hpc_health import processes


class EnvironmentBusy(RuntimeError):
    """Another process held the environment past the wait."""


def tree_fingerprint(path):
    """Cheap fingerprint of a develop source tree (names, sizes, mtimes)."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith(('.', 'spack-build')))
        for f in sorted(files):
            if f.startswith('spack-build') or f.startswith('.'):
                continue
            p = os.path.join(root, f)
            try:
                st = os.stat(p)
            except OSError:
                continue
            h.update(f'{os.path.relpath(p, path)}:{st.st_size}:{st.st_mtime_ns}\n'.encode())
    return h.hexdigest()


def repo_fingerprint(repos):
    """Package recipes feed concretization: hash our repos' package files and
    the builtin checkout's HEAD."""
    h = hashlib.sha256()
    for name in sorted(repos):
        path = repos[name]
        if not isinstance(path, str) or not os.path.isdir(path):
            continue
        head = None
        probe = path
        for _ in range(4):
            if os.path.exists(os.path.join(probe, '.git')):
                head = probe
                break
            probe = os.path.dirname(probe)
        if head:
            try:
                out = subprocess.run(['git', '-C', head, 'rev-parse', 'HEAD'],
                                     capture_output=True, text=True, timeout=30)
                h.update(f'{name}:{out.stdout.strip()}\n'.encode())
                continue
            except (OSError, subprocess.SubprocessError):
                pass
        h.update(f'{name}:{tree_fingerprint(path)}\n'.encode())
    return h.hexdigest()


def own_copy(name, path, version, env_dir):
    """The environment's own copy of a develop tree, made anew when the
    original changed: in-source builds (STREAM's Makefile writes its objects
    and executables into the tree, OSU's configure its Makefiles) must not
    write into a site's or a kit's source tree, nor share one between
    install trees."""
    copy = os.path.join(env_dir, 'src', f'{name}-{version}')
    mark = os.path.join(env_dir, 'src', f'.{name}-{version}.from')
    origin = tree_fingerprint(path)
    try:
        with open(mark) as fp:
            fresh = fp.read() == origin
    except OSError:
        fresh = False
    if not (fresh and os.path.isdir(copy)):
        if os.path.isdir(copy):
            shutil.rmtree(copy)     # ours: made by this function
        # copy2 keeps the file times: automake must not regenerate aclocal.m4.
        shutil.copytree(path, copy, symlinks=True, copy_function=shutil.copy2)
        with open(mark, 'w') as fp:
            fp.write(origin)
    return copy


def env_lock(env_dir, wait):
    """Hold *env_dir* for this process: another hpc-health building the same
    environment is waited for up to *wait* seconds, with a line saying who
    holds it, then EnvironmentBusy."""
    os.makedirs(env_dir, exist_ok=True)
    return processes.held(
        os.path.join(env_dir, '.hpc-health.lock'), wait,
        lambda holder: print(f'hpc-health: waiting up to {wait:.0f} s for the Spack environment '
                             f'{env_dir}: held by {holder}', flush=True),
        lambda holder: EnvironmentBusy(f'the Spack environment {env_dir} was held by {holder} '
                                       f'for {wait:.0f} s (another hpc-health run building '
                                       'it?)'))
