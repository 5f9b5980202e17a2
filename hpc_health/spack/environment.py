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

It runs as a script inside the build job (``python -m
hpc_health.spack.environment ensure ...``) and needs only the standard
library and PyYAML.
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
import time

import yaml

from hpc_health.parsers import registry
from hpc_health.spack import commands, sources
from hpc_health.spack import lock as spacklock
from hpc_health.spack.kit import record, spack_env

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


class SpackError(RuntimeError):
    pass


class SpackBusy(SpackError):
    """Spack, or the environment, was held by another process past the
    wait: a busy Spack is not the machine's ill health, so the checks that
    need the build are skipped, not failed."""


#: ensure's exit code when Spack was busy (sysexits' EX_TEMPFAIL).
EXIT_BUSY = 75
#: What a build script prints, and the fixture looks for, when it was.
BUSY_MARK = 'hpc-health: spack busy:'
#: Spack's words for a lock it gave up on (its database and stage locks
#: wait 60 s, then raise LockTimeoutError).
_SPACK_LOCK_WORDS = ('LockTimeoutError', 'Timed out waiting for a')
#: Seconds ensure waits for another process's hold on the same environment
#: (Spack's own environment lock has no timeout: it would hang the run).
ENV_WAIT_S = float(os.environ.get('HPC_HEALTH_SPACK_WAIT') or 300)


def _run_spack(spack, args, log, wait=None):
    cmd = [spack] + args
    t0 = time.monotonic()
    log.write(f'$ {" ".join(cmd)}\n')
    log.flush()
    # SPACK_PYTHON on every call (a bootstrapped Spack runs with the Python
    # that has clingo): a warm run that skips concretize hides a missing one.
    rec = record()
    env = spack_env(rec) if rec and rec["spack"] == spack else None
    # Spack's environment lock has no timeout of its own: its holder is
    # named while the command waits, and the command ended after the wait.
    env_dir = commands.env_of(args)
    lock = os.path.join(env_dir, spacklock.ENV_LOCK) if env_dir else None
    said = lambda line: print(f'hpc-health: {line}', flush=True)  # noqa: E731
    try:
        rc, output = spacklock.run(cmd, commands.limit_of(args), lock,
                                   ENV_WAIT_S if wait is None else wait, env, said)
    except (spacklock.Busy, spacklock.TimedOut) as err:
        log.write(err.output)
        log.write(f'# {err}\n')
        log.flush()
        raise (SpackBusy if isinstance(err, spacklock.Busy) else SpackError)(str(err)) from None
    log.write(output)
    log.write(f'# exit {rc} after {time.monotonic() - t0:.1f} s\n')
    log.flush()
    if rc != 0:
        excerpt = _excerpt(' '.join(args), output, rc)
        if any(word in output for word in _SPACK_LOCK_WORDS):
            raise SpackBusy(excerpt)
        raise SpackError(excerpt)
    return output


def _excerpt(what, output, rc, keep=15):
    """The lines of Spack's output that say what went wrong."""
    lines = output.splitlines()
    # Spack's own error line first: its warnings quote errors it ignored
    # (e.g. "Error 1: BuildcacheIndexNotExists" for a source-only mirror).
    idx = [i for i, line in enumerate(lines) if line.startswith('==> Error')] or \
        [i for i, line in enumerate(lines)
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


#: Set by a run for every Spack command it causes: a failure recorded under
#: the same run id is reported again instead of being retried (the pre-build
#: tried it moments ago; the fixture's retry would cost the same minute).
RUN_ID_VAR = 'HPC_HEALTH_RUN_ID'
#: ``index``: only have Spack build its package index for this environment's
#: repositories when the environment is to be concretized (the pre-build's
#: first step, alone, before builds run side by side).
PHASE_VAR = 'HPC_HEALTH_SPACKENV_PHASE'
#: Builds the package index on every core (run by ``spack python``).
INDEX_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'package_index.py')
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
        kind = SpackBusy if failed.get('busy') else SpackError
        raise kind(f"{failed.get('message', 'failed')}\n    (as in this run's pre-build)")
    try:
        try:
            with sources.env_lock(args.env_dir, args.wait):
                report = _ensure(args, t_start)
        except sources.EnvironmentBusy as err:
            raise SpackBusy(str(err)) from None
    except SpackError as err:
        if run_id:
            _write_json(failed_path, {'run': run_id, 'message': str(err),
                                      'busy': isinstance(err, SpackBusy)})
        raise
    if os.path.exists(failed_path):
        os.remove(failed_path)      # ours: written above by an earlier failure
    return report


def _ensure(args, t_start):
    index_only = os.environ.get(PHASE_VAR) == 'index'
    develop = {}
    for item in args.develop or []:
        name, _, rest = item.partition('=')
        path, _, version = rest.rpartition('@')
        if name not in registry.built_out_of_source():
            path = sources.own_copy(name, _abs(path, args.site_dir), version, args.env_dir)
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
        (text + sources.repo_fingerprint(composed['spack']['repos'])).encode()).hexdigest()
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
            if index_only:
                # Spack builds its index on one core (75 s here for the
                # builtin repo); this script uses them all, and Spack reads
                # what it wrote or builds it itself.
                _run_spack(args.spack, commands.python_script(env_dir, INDEX_SCRIPT), log, args.wait)
                print(f'hpc-health: Spack package index ready for {env_dir}, '
                      f'{time.monotonic() - t_start:.1f} s')
                return report
            _run_spack(args.spack, commands.concretize(env_dir), log, args.wait)
            report['concretized'] = True
            # Kept now: an install that is stopped or fails need not
            # concretize again.
            stamp = {'inputs': inputs}
            _write_json(stamp_path, stamp)
        if index_only:
            return report       # concretized already: the index is not needed
        lock_hash = _file_hash(lock)
        dev_fp = {n: sources.tree_fingerprint(_abs(p, args.site_dir)) for n, (p, _) in develop.items()}
        prefixes = stamp.get('prefixes') or {}
        up_to_date = (stamp.get('lock') == lock_hash and stamp.get('develop') == dev_fp
                      and prefixes and all(os.path.isdir(p) for p in prefixes.values()))
        if not up_to_date:
            _run_spack(args.spack, commands.install(env_dir), log, args.wait)
            report['installed'] = True
            prefixes = _prefixes(args.spack, env_dir, [spec_name(s) for s in args.spec], log)
            # After the install: in-source builds (STREAM's Makefile, OSU's
            # objects) change the develop trees themselves.
            dev_fp = {n: sources.tree_fingerprint(_abs(p, args.site_dir))
                      for n, (p, _) in develop.items()}
            stamp.update({'lock': lock_hash, 'develop': dev_fp, 'prefixes': prefixes})
            _write_json(stamp_path, stamp)
    _finish(args, report, lock, prefixes, t_start,
            'install ' + ('ran' if report['installed'] else 'skipped (already installed)'))
    return report


def _prefixes(spack, env_dir, names, log):
    """Install prefix of each root, from one `spack find`."""
    out = _run_spack(spack, commands.find_prefixes(env_dir, names), log)
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
    e.add_argument('--wait', type=float, default=ENV_WAIT_S,
                   help='seconds to wait for another process holding the environment')
    args = p.parse_args(argv)
    try:
        ensure(args)
    except SpackBusy as err:
        print(f'{BUSY_MARK} {err}', file=sys.stderr)
        return EXIT_BUSY
    except SpackError as err:
        print(f'hpc-health: {err}', file=sys.stderr)
        return 1
    except (OSError, yaml.YAMLError) as err:
        print(f'hpc-health: Spack environment error: {err}', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
