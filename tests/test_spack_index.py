"""The parallel Spack index's worker bookkeeping, with real processes (the
index itself is built by the kit test, tests/test_spack_real.py)."""

import multiprocessing
import os

from hpc_health.spack import package_index as spack_index


def _share(queue, what):
    if what == "die":
        os._exit(9)         # killed before a word, as the OOM killer would
    if what == "quiet":
        os._exit(0)         # ended "well" without its share
    queue.put(("ok", {"providers": what}))


def _run(*whats):
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    workers = [ctx.Process(target=_share, args=(queue, w)) for w in whats]
    for w in workers:
        w.start()
    return spack_index._collect(queue, workers), workers


def test_every_share_is_collected_and_every_worker_joined():
    shares, workers = _run("a", "b")
    assert sorted(s[1]["providers"] for s in shares) == ["a", "b"]
    assert [w.exitcode for w in workers] == [0, 0]


def test_a_worker_that_dies_silently_fails_the_build_instead_of_hanging_it():
    shares, workers = _run("a", "die")
    assert ("error", "a worker exited with 9") in shares
    assert all(w.exitcode is not None for w in workers)


def test_a_worker_that_ends_without_its_share_fails_the_build_instead_of_hanging_it():
    shares, workers = _run("a", "quiet")
    assert ("error", "a worker ended without its share") in shares
    assert all(w.exitcode is not None for w in workers)
