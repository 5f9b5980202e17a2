"""Build Spack's package index on every core: ``spack -e ENV python package_index.py``.

Spack builds a repository's index (virtual providers, tags, patches) by
importing every ``package.py`` in one process: 75 s for the 8 900 packages
of the builtin repository on this kind of machine, with the other cores
idle, and the first ``concretize`` of a fresh machine waits for it.  Here
the packages are split among forked workers, each indexes its share with
Spack's own indexers, and the shares are merged with the indexes' own
merge methods (the ones Spack uses to combine repositories) into Spack's
index cache.

Nothing here decides what Spack reads: at the end Spack is asked for the
providers of ``mpi`` as usual.  Where this Spack's internals differ from
the ones this was written for (Spack 1.x), or the merged files are not
where Spack looks, Spack finds its index missing or stale and builds it
itself, serially, as it would have without this script.  An index with
only a few packages changed since it was built is left to Spack too: it
updates just those.
"""

import io
import multiprocessing
import os
import sys
import time
from queue import Empty

#: index name -> (indexer class, how an index takes in another)
_MERGE = {
    'providers': ('ProviderIndexer', lambda into, other: into.merge(other)),
    'tags': ('TagIndexer', lambda into, other: into.merge(other)),
    'patches': ('PatchIndexer', lambda into, other: into.update(other)),
}


# Spack is imported where it is used: the tests import this module without it.

def _indexer(name, repo):
    import spack.repo
    return getattr(spack.repo, _MERGE[name][0])(repo)


def _cache_key(name, namespace):
    import spack.spec
    # RepoIndex._build_index names its cache files so.
    return f'{name}/{namespace}-specfile_v{spack.spec.SPECFILE_FORMAT_VERSION}-index.json'


def _share(repo, names, queue):
    """Worker: index *names* of *repo*; the indexes as JSON text, by name."""
    try:
        out = {}
        for name in _MERGE:
            indexer = _indexer(name, repo)
            indexer.create()
            for pkg in names:
                indexer.update(f'{repo.namespace}.{pkg}')
            text = io.StringIO()
            indexer.write(text)
            out[name] = text.getvalue()
        queue.put(('ok', out))
    except Exception as err:      # the parent falls back to Spack's own build
        queue.put(('error', f'{type(err).__name__}: {err}'))


def _collect(queue, workers):
    """Every worker's share; read before joining, as a worker blocks on a
    full pipe until it is read.  A worker that died without a word (killed,
    out of memory) is a failed share, not a wait for ever."""
    shares = []
    while len(shares) < len(workers):
        try:
            shares.append(queue.get(timeout=1.0))
        except Empty:
            dead = [w.exitcode for w in workers if w.exitcode not in (None, 0)]
            # Every worker gone and the queue still empty after a second:
            # one ended without its share (a bug, or os._exit(0) in Spack).
            silent = all(w.exitcode is not None for w in workers)
            if dead or silent:
                for w in workers:
                    w.kill()
                shares.append(('error', f'a worker exited with {dead[0]}' if dead
                               else 'a worker ended without its share'))
                break
    for w in workers:
        w.join()
    return shares


def build(repo, jobs):
    """Index *repo* with *jobs* workers into Spack's cache; False (and why)
    when it could not, leaving the index to Spack."""
    index = repo.index
    names = sorted(index.checker)
    stale = max(len(index.checker.modified_since(index.cache.mtime(_cache_key(n, repo.namespace))))
                for n in _MERGE)
    if not stale:
        return True, 'up to date'
    if stale < len(names) // 4:
        # An index with a few packages changed since: Spack updates just
        # those, faster than all of them on every core.
        return True, f'{stale} of {len(names)} packages changed since it was built: Spack updates it'
    ctx = multiprocessing.get_context('fork')
    queue = ctx.Queue()
    workers = [ctx.Process(target=_share, args=(repo, names[i::jobs], queue))
               for i in range(jobs)]
    for w in workers:
        w.start()
    shares = _collect(queue, workers)
    failed = [msg for kind, msg in shares if kind != 'ok']
    if failed:
        return False, failed[0]
    for name in _MERGE:
        merged = _indexer(name, repo)
        merged.create()
        for _, texts in shares:
            part = _indexer(name, repo)
            part.read(io.StringIO(texts[name]))
            _MERGE[name][1](merged.index, part.index)
        key = _cache_key(name, repo.namespace)
        index.cache.init_entry(key)
        with index.cache.write_transaction(key) as (_old, new):
            merged.write(new)
    return True, f'{len(names)} packages on {jobs} cores'


def main(argv):
    import spack.repo
    # More workers than this gain little: each pays for forking and its share
    # of the merge, and a login node's cores are not all ours.
    jobs = int(argv[0]) if argv else min(len(os.sched_getaffinity(0)), 8)
    for repo in spack.repo.PATH.repos:
        t0 = time.monotonic()
        try:
            done, how = build(repo, max(1, jobs))
        except Exception as err:        # Spack builds it itself below
            done, how = False, f'{type(err).__name__}: {err}'
        print(f'index of repo {repo.namespace}: '
              + (how if done else f'left to Spack ({how})')
              + f', {time.monotonic() - t0:.1f} s', flush=True)
    # Spack's own reading (or, if the files above are not what it expects,
    # building) of its index: what every later command will do.
    providers = spack.repo.PATH.providers_for('mpi')
    print(f'providers of mpi: {len(providers)}')


if __name__ == '__main__':
    main(sys.argv[1:])
