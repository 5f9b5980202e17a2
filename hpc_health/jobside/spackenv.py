#!/usr/bin/env python3
"""Persistent Spack environments for the checks' build fixtures.

ReFrame's own ``Spack`` build system creates and concretizes an environment in
every test's stage (about 18 s per test even when nothing is installed).  This
module keeps one environment per (partition, programming environment, spec
set) *outside* the stage, together with its ``spack.lock``, and:

- composes the environment from the site's checked-in ``spack.yaml`` (never
  modified) plus the site settings (install tree, local builtin repo, mirrors);
- concretizes only when those inputs changed;
- installs only when the lock or a develop source tree changed;
- records the prefixes, the lock and the concrete hashes in the stage, so the
  results keep their provenance.

It runs as a script inside the build job (``python3 spackenv.py ensure ...``)
and needs only the standard library and PyYAML.
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

import yaml

from hpc_health.site.spack_kit import find_spack, record, spack_env  # noqa: F401 - re-exported

STAMP = 'hpc-health-stamp.json'


def spec_name(spec):
    """Package name of a root spec: 'ior%gcc@4 +x' -> 'ior'."""
    import re
    found = re.match(r'\s*([A-Za-z0-9_][A-Za-z0-9_.-]*)', spec)
    return found.group(1).split('.')[-1] if found else spec


def _abs(path, base):
    path = os.path.expandvars(os.path.expanduser(path))
    return path if os.path.isabs(path) else os.path.normpath(os.path.join(base, path))


def compose(site_env, site_dir, specs, develop, install_tree=None,
            builtin_repo=None, source_mirror=None, bootstrap_mirror=None):
    """The environment's spack.yaml as a dict (pure: no side effects)."""
    with open(site_env) as fp:
        doc = yaml.safe_load(fp) or {}
    env = dict(doc.get('spack') or {})
    env['specs'] = list(specs)
    env.setdefault('view', False)
    repos = env.get('repos') or {}
    if isinstance(repos, list):
        repos = {f'repo{i}': r for i, r in enumerate(repos)}
    # Relative repo paths in the site file are relative to that file; the
    # composed environment lives elsewhere, so make them absolute.
    repos = {name: (_abs(p, site_dir) if isinstance(p, str) else p)
             for name, p in repos.items()}
    if builtin_repo:
        # Last: the first repository providing a package wins, and ours
        # override builtin recipes (darshan-runtime).
        repos.pop('builtin', None)
        repos['builtin'] = _abs(builtin_repo, site_dir)
    env['repos'] = repos
    config = dict(env.get('config') or {})
    if install_tree:
        root = _abs(install_tree, site_dir)
        config['install_tree'] = {'root': root}
        # Spack's default build stage, $tempdir/$user/spack-stage, is one
        # per user of the machine: two Spacks building the same spec into
        # different install trees at once (a nightly run and CI) wait on
        # one lock there, and the second fails after 60 s (LockTimeoutError,
        # seen here).  One stage per install tree, unless the site sets one.
        tag = hashlib.sha256(root.encode()).hexdigest()[:10]
        config.setdefault('build_stage', [f'$tempdir/$user/hpc-health-stage-{tag}'])
    if config:
        env['config'] = config
    if source_mirror:
        mirrors = dict(env.get('mirrors') or {})
        mirrors['hpc-health-sources'] = 'file://' + _abs(source_mirror, site_dir)
        env['mirrors'] = mirrors
    if bootstrap_mirror:
        env['bootstrap'] = {
            'enable': True,
            'sources': [{'name': 'hpc-health-bootstrap',
                         'metadata': _abs(bootstrap_mirror, site_dir)}],
            'trusted': {'hpc-health-bootstrap': True},
        }
    if develop:
        dev = dict(env.get('develop') or {})
        for name, (path, version) in develop.items():
            dev[name] = {'spec': f'{name}@={version}', 'path': _abs(path, site_dir)}
        env['develop'] = dev
    return {'spack': env}


def _tree_fingerprint(path):
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


def _repo_fingerprint(repos):
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
        h.update(f'{name}:{_tree_fingerprint(path)}\n'.encode())
    return h.hexdigest()


class SpackError(RuntimeError):
    pass


def _run_spack(spack, args, log):
    cmd = [spack] + args
    t0 = time.monotonic()
    log.write(f'$ {" ".join(cmd)}\n')
    log.flush()
    # SPACK_PYTHON on every call (a bootstrapped Spack runs with the Python
    # that has clingo): a warm run that skips concretize hides a missing one.
    rec = record()
    env = spack_env(rec) if rec and rec["spack"] == spack else None
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, env=env)
    log.write(proc.stdout)
    log.write(f'# exit {proc.returncode} after {time.monotonic() - t0:.1f} s\n')
    log.flush()
    if proc.returncode != 0:
        raise SpackError(_excerpt(' '.join(args), proc.stdout, proc.returncode))
    return proc.stdout


def _excerpt(what, output, rc, keep=15):
    """The lines of Spack's output that say what went wrong."""
    lines = output.splitlines()
    idx = [i for i, line in enumerate(lines)
           if 'Error' in line or 'error:' in line or 'FAILED' in line]
    if idx:
        start = max(0, idx[0] - 2)
        chosen = lines[start:start + keep]
    else:
        chosen = lines[-keep:]
    body = '\n'.join('    ' + line for line in chosen)
    # The first error line on the first line: the health table shows only
    # that one, the whole excerpt stays in the failure's details.
    first = next((lines[i].strip() for i in idx), chosen[-1].strip() if chosen else '')
    return f'spack {what} failed (exit {rc}): {first}\n{body}'


#: Built out of source (CMake): its tree is used in place.
_BUILT_OUT_OF_SOURCE = {'hpc-health-kernels'}


def own_copy(name, path, version, env_dir):
    """The environment's own copy of a develop tree, made anew when the
    original changed: in-source builds (STREAM's Makefile writes its objects
    and executables into the tree, OSU's configure its Makefiles) must not
    write into a site's or a kit's source tree, nor share one between
    install trees."""
    copy = os.path.join(env_dir, 'src', f'{name}-{version}')
    mark = os.path.join(env_dir, 'src', f'.{name}-{version}.from')
    origin = _tree_fingerprint(path)
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


#: Set by a run for every Spack command it causes: a failure recorded under
#: the same run id is reported again instead of being retried (the pre-build
#: tried it moments ago; the fixture's retry would cost the same minute).
RUN_ID_VAR = 'HPC_HEALTH_RUN_ID'
#: ``concretize``: stop after concretizing (the pre-build's first step, which
#: builds Spack's package index alone before builds run side by side).
PHASE_VAR = 'HPC_HEALTH_SPACKENV_PHASE'
FAILED = 'hpc-health-failed.json'
#: What a build script prints when ensure failed (its exit code follows).
FAILED_MARK = 'hpc-health: spackenv failed with exit'


def ensure(args):
    t_start = time.monotonic()
    run_id = os.environ.get(RUN_ID_VAR)
    failed_path = os.path.join(args.env_dir, FAILED)
    try:
        with open(failed_path) as fp:
            failed = json.load(fp)
    except (OSError, ValueError):
        failed = {}
    if run_id and failed.get('run') == run_id:
        raise SpackError(f"{failed.get('message', 'failed')}\n    (as in this run's pre-build)")
    try:
        report = _ensure(args, t_start)
    except SpackError as err:
        if run_id:
            _write_json(failed_path, {'run': run_id, 'message': str(err)})
        raise
    if os.path.exists(failed_path):
        os.remove(failed_path)      # ours: written above by an earlier failure
    return report


def _ensure(args, t_start):
    develop = {}
    for item in args.develop or []:
        name, _, rest = item.partition('=')
        path, _, version = rest.rpartition('@')
        if name not in _BUILT_OUT_OF_SOURCE:
            path = own_copy(name, _abs(path, args.site_dir), version, args.env_dir)
        develop[name] = (path, version)
    composed = compose(args.site_env, args.site_dir, args.spec, develop,
                       args.install_tree, args.builtin_repo, args.source_mirror,
                       args.bootstrap_mirror)
    env_dir = args.env_dir
    os.makedirs(env_dir, exist_ok=True)
    if develop:
        # Spack otherwise drops a build-<arch>-<hash> link into every develop
        # source tree, i.e. into this checkout's kernels/ folder.
        config = composed['spack'].setdefault('config', {})
        config.setdefault('develop_stage_link', os.path.join(env_dir, 'develop-stage'))
    # Key order is meaning here: Spack searches `repos` in order.
    text = yaml.safe_dump(composed, sort_keys=False)
    inputs = hashlib.sha256(
        (text + _repo_fingerprint(composed['spack']['repos'])).encode()).hexdigest()
    stamp_path = os.path.join(env_dir, STAMP)
    try:
        with open(stamp_path) as fp:
            stamp = json.load(fp)
    except (OSError, ValueError):
        stamp = {}

    log_path = os.path.join(args.out, 'spack-commands.log')
    os.makedirs(args.out, exist_ok=True)
    report = {'env_dir': env_dir, 'specs': args.spec, 'concretized': False,
              'installed': False}
    lock = os.path.join(env_dir, 'spack.lock')
    with open(log_path, 'a') as log:
        if stamp.get('inputs') != inputs or not os.path.exists(lock):
            # Write to a temporary name first: an interrupted run must not
            # leave a half-written spack.yaml behind.
            tmp = os.path.join(env_dir, 'spack.yaml.tmp')
            with open(tmp, 'w') as fp:
                fp.write('# Composed by hpc-health from the site files; '
                         'rewritten when they change.\n')
                fp.write(text)
            os.replace(tmp, os.path.join(env_dir, 'spack.yaml'))
            _run_spack(args.spack, ['-e', env_dir, 'concretize', '-f'], log)
            report['concretized'] = True
            # Kept now: an install that is stopped or fails need not
            # concretize again.
            stamp = {'inputs': inputs}
            _write_json(stamp_path, stamp)
        if os.environ.get(PHASE_VAR) == 'concretize':
            _finish(args, report, lock, stamp.get('prefixes') or {}, t_start,
                    'install deferred')
            return report
        lock_hash = _file_hash(lock)
        dev_fp = {n: _tree_fingerprint(_abs(p, args.site_dir)) for n, (p, _) in develop.items()}
        prefixes = stamp.get('prefixes') or {}
        up_to_date = (stamp.get('lock') == lock_hash and stamp.get('develop') == dev_fp
                      and prefixes and all(os.path.isdir(p) for p in prefixes.values()))
        if not up_to_date:
            _run_spack(args.spack, ['-e', env_dir, 'install', '--fail-fast'], log)
            report['installed'] = True
            prefixes = _prefixes(args.spack, env_dir, [spec_name(s) for s in args.spec], log)
            # After the install: in-source builds (STREAM's Makefile, OSU's
            # objects) change the develop trees themselves.
            dev_fp = {n: _tree_fingerprint(_abs(p, args.site_dir))
                      for n, (p, _) in develop.items()}
            stamp.update({'lock': lock_hash, 'develop': dev_fp, 'prefixes': prefixes})
            _write_json(stamp_path, stamp)
    _finish(args, report, lock, prefixes, t_start,
            'install ' + ('ran' if report['installed'] else 'skipped (already installed)'))
    return report


def _prefixes(spack, env_dir, names, log):
    """Install prefix of each root, from one `spack find` (a `location -i`
    per root costs Spack's start-up, 2 s, each time)."""
    out = _run_spack(spack, ['-e', env_dir, 'find', '--format', '{name}\t{prefix}', *names], log)
    found = {}
    for line in out.splitlines():
        name, sep, prefix = line.partition('\t')
        if sep and name in names:
            if name in found and found[name] != prefix:
                raise SpackError(f'spack find: two installed {name} in {env_dir}: '
                                 f'{found[name]} and {prefix}')
            found[name] = prefix.strip()
    missing = [n for n in names if n not in found]
    if missing:
        raise SpackError(f"spack find: {', '.join(missing)} not installed in {env_dir} "
                         'after spack install')
    return found


def _finish(args, report, lock, prefixes, t_start, install_said):
    shutil.copy(lock, os.path.join(args.out, 'spack.lock'))
    report['prefixes'] = prefixes
    report['hashes'] = _root_hashes(lock)
    report['seconds'] = round(time.monotonic() - t_start, 2)
    with open(os.path.join(args.out, 'spack-build.json'), 'w') as fp:
        json.dump(report, fp, indent=1)
    print(f'hpc-health: Spack environment {report["env_dir"]}: '
          f'concretize {"ran" if report["concretized"] else "skipped (inputs unchanged)"}, '
          f'{install_said}, {report["seconds"]} s')
    for name, h in report['hashes'].items():
        print(f'hpc-health: {name} /{h[:7]} -> {prefixes.get(spec_name(name), "?")}')


def _write_json(path, data):
    tmp = path + '.tmp'
    with open(tmp, 'w') as fp:
        json.dump(data, fp, indent=1)
    os.replace(tmp, path)


def _file_hash(path):
    with open(path, 'rb') as fp:
        return hashlib.sha256(fp.read()).hexdigest()


def _root_hashes(lock):
    """Root specs of the lock and their DAG hashes."""
    try:
        with open(lock) as fp:
            data = json.load(fp)
        return {r['spec']: r['hash'] for r in data.get('roots', [])}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest='cmd', required=True)
    e = sub.add_parser('ensure', help='concretize/install only what changed')
    e.add_argument('--spack', required=True)
    e.add_argument('--env-dir', required=True)
    e.add_argument('--site-env', required=True)
    e.add_argument('--site-dir', required=True)
    e.add_argument('--spec', action='append', required=True)
    e.add_argument('--develop', action='append', help='NAME=PATH@VERSION')
    e.add_argument('--install-tree')
    e.add_argument('--builtin-repo')
    e.add_argument('--source-mirror')
    e.add_argument('--bootstrap-mirror')
    e.add_argument('--out', required=True, help='where the lock and prefixes are copied')
    args = p.parse_args(argv)
    try:
        ensure(args)
    except SpackError as err:
        print(f'hpc-health: {err}', file=sys.stderr)
        return 1
    except (OSError, yaml.YAMLError) as err:
        print(f'hpc-health: Spack environment error: {err}', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
