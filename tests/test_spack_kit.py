"""Offline kits: checked before anything is unpacked, bootstrapped into the
cache once, and made anew from another kit (as a connected host makes one
from the public sources)."""

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from sandbox import REPO, hpc_health, make_root

from hpc_health.errors import ConfigError
from hpc_health.spack import kit as spack_kit
from hpc_health.spack import kit_sources

SHARED_KIT = Path(os.environ.get("HPC_HEALTH_SPACK_KIT") or REPO.parent / "shared" / "spack-kit")
needs_kit = pytest.mark.skipif(not (SHARED_KIT / "SHA256SUMS").is_file(),
                               reason=f"no offline Spack kit at {SHARED_KIT} "
                                      "(set HPC_HEALTH_SPACK_KIT)")


def _copy_kit(tmp_path):
    kit = tmp_path / "kit"
    shutil.copytree(SHARED_KIT, kit, symlinks=True)
    for p in kit.rglob("*"):
        if not p.is_symlink():
            p.chmod(0o755 if p.is_dir() else 0o644)
    return kit


@needs_kit
def test_a_kit_names_its_parts():
    kit = spack_kit.Kit(SHARED_KIT)
    assert kit.key == "spack-1.2.0.dev0-9cf66332df+packages-983d4a3b6c"
    assert sorted(kit.sources) == ["osu-micro-benchmarks", "stream"]
    assert kit.sources["stream"][1] == "5.10" and kit.sources["osu-micro-benchmarks"][1] == "7.4"
    assert kit.mirror is not None


@needs_kit
def test_an_altered_kit_is_refused_before_anything_is_unpacked(tmp_path):
    kit = _copy_kit(tmp_path)
    with open(kit / "STREAM-5.10-6703f75.tar.gz", "ab") as fp:
        fp.write(b"tampered")
    cache = tmp_path / "cache"
    with pytest.raises(ConfigError, match="STREAM-5.10-6703f75.tar.gz does not match its checksum"):
        spack_kit.setup(kit, cache=cache, say=lambda line: None)
    assert not (cache / "spack").exists() or not any((cache / "spack").rglob("spack"))


@needs_kit
def test_a_kit_with_a_missing_file_names_it(tmp_path):
    kit = _copy_kit(tmp_path)
    (kit / "osu-micro-benchmarks-7.4-a6bb9d2.tar.gz").unlink()
    with pytest.raises(ConfigError, match="lists osu-micro-benchmarks-7.4-a6bb9d2.tar.gz"):
        spack_kit.Kit(kit).verify(say=lambda line: None)


def test_a_directory_that_is_no_kit_is_refused_by_the_cli(tmp_path):
    root = make_root(tmp_path)
    empty = tmp_path / "nokit"
    empty.mkdir()
    env = dict(os.environ, HPC_HEALTH_CACHE=str(tmp_path / "cache"), PATH="/usr/bin:/bin")
    env.pop("SPACK_ROOT", None)
    res = hpc_health(root, "spack", "setup", "--kit", str(empty), "--site", "local", env=env)
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"{empty}: a kit holds spack-<version>-<commit>.tar.gz" in res.stderr


@needs_kit
@pytest.mark.slow
def test_bootstrap_once_then_nothing_to_do(tmp_path):
    cache = tmp_path / "cache"
    lines = []
    rec = spack_kit.setup(SHARED_KIT, cache=cache, say=lines.append)
    assert Path(rec["spack"]).is_file() and rec["version"] == "1.2.0.dev0"
    assert rec["develop"]["stream"].endswith("STREAM-5.10@5.10") or "stream-5.10" in \
        rec["develop"]["stream"]
    scope = Path(rec["spack"]).parent.parent / "etc" / "spack" / "site"
    assert "enable: false" in (scope / "bootstrap.yaml").read_text()
    assert "zlib" in (scope / "packages.yaml").read_text()    # else zlib-ng is planned
    # Compiled once: a Spack command then imports its modules, not their sources.
    assert list((scope.parent.parent.parent / "lib" / "spack" / "spack" / "__pycache__")
                .glob("main.*.pyc"))
    again = []
    spack_kit.setup(SHARED_KIT, cache=cache, say=again.append)
    assert len(again) == 1 and "nothing to do" in again[0]
    # A fresh clone at the same path makes its virtualenv anew, without
    # clingo: the record's Python is mended, else every concretize fails.
    record = cache / "spack" / spack_kit.Kit(SHARED_KIT).key / spack_kit.RECORD
    stale = dict(rec, spack_python=str(tmp_path / "gone" / "python"))
    record.write_text(json.dumps(stale))
    mended = []
    rec = spack_kit.setup(SHARED_KIT, cache=cache, say=mended.append)
    assert rec["spack_python"] == sys.executable and spack_kit.python_ok(sys.executable)
    assert f"{stale['spack_python']} is gone or has no clingo" in mended[0]
    assert json.loads(record.read_text())["spack_python"] == sys.executable


@needs_kit
@pytest.mark.slow
def test_a_kit_made_from_another_kit_holds_its_archives_and_a_spack_mirror(tmp_path):
    """make_kit as on a connected host, the shared kit standing in for the
    network.  One spec is mirrored: `spack mirror create` concretizes each
    spec it is given (a minute each here), and one shows the mirror is
    Spack's own; the full list is what `hpc-health spack kit` mirrors."""
    rec = spack_kit.setup(SHARED_KIT, say=lambda line: None)
    dest = tmp_path / "newkit"
    spack_kit.make_kit(dest, f"file://{SHARED_KIT}", spack=rec, specs=("darshan-util@3.5.0",),
                       say=lambda line: None)
    kit = spack_kit.Kit(dest)
    kit.verify(say=lambda line: None)
    for name in [p.name for p in SHARED_KIT.glob("*.tar.gz")]:
        assert kit_sources.file_sha256(dest / name) == \
            kit_sources.file_sha256(SHARED_KIT / name)
    # The mirror was made by `spack mirror create`, in its own layout.
    assert list((dest / "mirror" / "darshan-util").glob("darshan-util-3.5.0.tar.gz"))
    assert list((dest / "mirror" / "_source-cache" / "archive").rglob("*.tar.gz"))
