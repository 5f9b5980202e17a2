"""An export that unpacks to far more than it holds (a gzip bomb) is
refused before it costs memory: one line and exit 2 under a 1 GB memory
limit, nothing written."""

import gzip
import resource
import subprocess
import sys

from sandbox import environ, make_root, store

from hpc_health.store import bounded_gzip


def _bomb(path, members=32):
    """2 MB of gzip members that unpack to 64 MiB of zeros each (2 GiB)."""
    member = gzip.compress(bytes(64 << 20), compresslevel=9, mtime=0)
    with open(path, "wb") as fp:
        for _ in range(members):
            fp.write(member)
    return path


def _one_gib():
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def test_the_size_is_counted_without_keeping_what_is_unpacked():
    data = gzip.compress(b"x" * 5000) + gzip.compress(b"y" * 3000)
    assert bounded_gzip.unpacked_size(data, 1 << 20) == 8000
    assert bounded_gzip.unpacked_size(data, 4000) > 4000
    assert bounded_gzip.gunzip(data, 4000) is None
    assert bounded_gzip.gunzip(data, 8000) == b"x" * 5000 + b"y" * 3000
    try:
        bounded_gzip.unpacked_size(data[:-20], 1 << 20)
        raise AssertionError("a cut member is not an error")
    except EOFError:
        pass


def test_a_gzip_bomb_is_refused_in_one_line_under_a_1_gb_memory_limit(tmp_path):
    root = make_root(tmp_path, references=False)
    bomb = _bomb(tmp_path / "runs.json.gz")
    assert bomb.stat().st_size < 3 << 20
    res = subprocess.run([sys.executable, "-m", "hpc_health", "import", str(bomb)],
                         capture_output=True, text=True, timeout=120, env=environ(root),
                         preexec_fn=_one_gib)
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"{bomb}: unpacks to more than 512 MiB" in res.stderr
    assert "Traceback" not in res.stderr and "MemoryError" not in res.stderr
    assert not (store(root) / "runs").exists()
