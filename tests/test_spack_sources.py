"""Where Spack and the benchmarks come from: the official projects, each
archive checked before it is kept, and a source a site names itself said
to be unofficial (docs/faults.md 40g, 40h).  No network here: the official
URLs are checked against Spack's own recipes, and fetching runs against a
web server on 127.0.0.1 serving the offline kit's real archives."""

import contextlib
import functools
import http.server
import io
import os
import tarfile
import threading
from pathlib import Path

import pytest
from sandbox import REPO, hpc_health, make_root

from hpc_health.errors import ConfigError
from hpc_health.spack import kit_sources as spack_sources

SHARED_KIT = Path(os.environ.get("HPC_HEALTH_SPACK_KIT") or REPO.parent / "shared" / "spack-kit")
pytestmark = pytest.mark.skipif(not (SHARED_KIT / "SHA256SUMS").is_file(),
                                reason=f"no offline Spack kit at {SHARED_KIT} "
                                       "(set HPC_HEALTH_SPACK_KIT)")
OFFICIAL = {s.file: s for s in spack_sources.official()}


@contextlib.contextmanager
def serving(directory):
    """A web server on 127.0.0.1 serving *directory*; its base URL."""
    handler = functools.partial(_Quiet, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _recipe(name):
    """A package.py of the kit's spack-packages, as text."""
    with tarfile.open(SHARED_KIT / "spack-packages-983d4a3b6c.tar.gz") as tar:
        member = next(m for m in tar if m.name.endswith(f"/packages/{name}/package.py"))
        return tar.extractfile(member).read().decode()


def test_every_source_is_its_official_project_with_the_checksum_spacks_recipe_has():
    urls = [s.url for s in spack_sources.official()]
    assert not [u for u in urls if "vjranagit" in u or "johnpzh" in u]
    assert OFFICIAL["spack-1.2.0.dev0-9cf66332df.tar.gz"].url.startswith(
        "https://github.com/spack/spack/archive/9cf66332df")
    assert OFFICIAL["spack-packages-983d4a3b6c.tar.gz"].url.startswith(
        "https://github.com/spack/spack-packages/archive/983d4a3b6c")
    osu = OFFICIAL["osu-micro-benchmarks-7.4.tar.gz"]
    assert osu.url == ("https://mvapich.cse.ohio-state.edu/download/mvapich/"
                       "osu-micro-benchmarks-7.4.tar.gz")
    assert f'version("7.4", sha256="{osu.sha256}")' in _recipe("osu_micro_benchmarks")
    # STREAM has no release tarball: the repository Spack's recipe names.
    assert 'git = "https://github.com/jeffhammond/STREAM.git"' in _recipe("stream")
    assert OFFICIAL["STREAM-5.10-6703f75.tar.gz"].url.startswith(
        "https://github.com/jeffhammond/STREAM/archive/6703f75")


def _repacked(src, dest, top, change=None):
    """*src* unpacked and packed again as GitHub would: another top folder,
    another compressor; *change* (a file name) gets a byte more."""
    with tarfile.open(src) as tar, tarfile.open(dest, "w:gz", compresslevel=1) as out:
        for member in tar:
            data = tar.extractfile(member).read() if member.isfile() else None
            member.name = top + "/" + member.name.partition("/")[2]
            if data is not None and member.name.endswith("/" + (change or "\0")):
                data += b"\n"
                member.size = len(data)
            out.addfile(member, io.BytesIO(data) if data is not None else None)
    return dest


def test_an_archive_of_a_commit_is_checked_by_its_files_not_its_bytes(tmp_path):
    stream = OFFICIAL["STREAM-5.10-6703f75.tar.gz"]
    assert spack_sources.matches(stream, SHARED_KIT / stream.file)
    github = _repacked(SHARED_KIT / stream.file, tmp_path / "a.tar.gz",
                       "STREAM-6703f7504a38a8da96b353cadafa64d3c2d7a2d3")
    assert spack_sources.file_sha256(github) != spack_sources.file_sha256(SHARED_KIT / stream.file)
    assert spack_sources.official_for(github) == stream
    altered = _repacked(SHARED_KIT / stream.file, tmp_path / "b.tar.gz", "STREAM-x", "stream.c")
    assert spack_sources.official_for(altered) is None


def test_a_source_a_site_names_is_said_to_be_unofficial_and_each_archive_checked(tmp_path):
    """Another kit as the named source (--from): its SHA256SUMS checks each
    file; the kit's OSU, a git archive of a personal repository, is said
    to be no official archive."""
    said = []
    dest = tmp_path / "kit"
    with serving(SHARED_KIT) as url:
        spack_sources.fetch_archives(dest, url, said.append)
    text = "\n".join(said)
    assert said[0] == (f"spack kit: fetching from {url}: NOT the official sources (named by "
                       "--from); each archive is checked and said to be official or not")
    assert (f"spack kit: spack-1.2.0.dev0-9cf66332df.tar.gz: Spack 1.2.0.dev0, commit "
            f"9cf66332df of spack/spack (fetched from {url}/spack-1.2.0.dev0-9cf66332df.tar.gz)"
            ", sha256 of its files") in text
    assert (f"spack kit: osu-micro-benchmarks-7.4-a6bb9d2.tar.gz: NOT an official archive "
            f"(fetched from {url}/osu-micro-benchmarks-7.4-a6bb9d2.tar.gz)") in text
    assert "every other source is fetched by Spack's own recipe" in said[-1]
    for name in ("spack-1.2.0.dev0-9cf66332df.tar.gz", "osu-micro-benchmarks-7.4-a6bb9d2.tar.gz"):
        assert spack_sources.file_sha256(dest / name) == \
            spack_sources.file_sha256(SHARED_KIT / name)
        assert spack_sources.recorded(dest)[name] == f"{url}/{name}"
    assert not list(dest.glob("*.partial"))


def test_an_archive_that_is_not_the_official_one_is_refused_and_not_kept(tmp_path):
    """A server (named with --from, no SHA256SUMS) whose STREAM differs
    from the official commit's files: refused, naming both checksums;
    nothing of it kept."""
    served = tmp_path / "served"
    served.mkdir()
    for name in ("spack-1.2.0.dev0-9cf66332df.tar.gz", "spack-packages-983d4a3b6c.tar.gz"):
        (served / name).symlink_to(SHARED_KIT / name)
    _repacked(SHARED_KIT / "STREAM-5.10-6703f75.tar.gz", served / "STREAM-5.10-6703f75.tar.gz",
              "STREAM-5.10", "stream.c")
    dest = tmp_path / "kit"
    with serving(served) as url, pytest.raises(ConfigError) as err:
        spack_sources.fetch_archives(dest, url, lambda line: None)
    message = str(err.value)
    assert message.startswith(f"{url}/STREAM-5.10-6703f75.tar.gz: STREAM-5.10-6703f75.tar.gz: "
                              "sha256 of its files ")
    assert OFFICIAL["STREAM-5.10-6703f75.tar.gz"].files_sha256 in message
    assert "not the official archive: not kept" in message
    assert not (dest / "STREAM-5.10-6703f75.tar.gz").exists()
    assert not list(dest.glob("*.partial"))


def test_the_cli_refuses_an_altered_source_in_one_line(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    _repacked(SHARED_KIT / "spack-1.2.0.dev0-9cf66332df.tar.gz",
              served / "spack-1.2.0.dev0-9cf66332df.tar.gz", "spack", "README.md")
    root = make_root(tmp_path)
    with serving(served) as url:
        res = hpc_health(root, "spack", "kit", str(tmp_path / "kit"), "--from", url)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith(f"hpc-health: error: {url}/spack-1.2.0.dev0-9cf66332df.tar.gz: "), last
    assert "not the official archive: not kept" in last
    assert not (tmp_path / "kit" / "spack-1.2.0.dev0-9cf66332df.tar.gz").exists()


def test_a_source_that_cannot_be_fetched_is_named(tmp_path):
    root = make_root(tmp_path)
    with serving(tmp_path) as url:
        res = hpc_health(root, "spack", "kit", str(tmp_path / "kit"), "--from", url)
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.strip().splitlines()[-1] == (
        f"hpc-health: error: {tmp_path / 'kit'}: cannot fetch {url}/spack-1.2.0.dev0-"
        "9cf66332df.tar.gz: HTTP Error 404: File not found: no network? (--from URL names "
        "another source)")


def test_setup_says_where_each_archive_of_a_kit_came_from():
    from hpc_health.spack import kit as spack_kit
    said = []
    spack_kit.Kit(SHARED_KIT).say_origins(said.append)
    assert said[0].startswith("spack setup: spack-1.2.0.dev0-9cf66332df.tar.gz: Spack 1.2.0.dev0, "
                              "commit 9cf66332df of spack/spack, sha256 of its files ")
    assert any(s.startswith("spack setup: osu-micro-benchmarks-7.4-a6bb9d2.tar.gz: NOT an "
                            "official archive") for s in said)
