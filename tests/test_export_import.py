"""hpc-health export / import: runs carried from one store to another, and
every bad file refused with one line, exit 2 and nothing written."""

import fcntl
import gzip
import hashlib
import io
import json
import os
import select
import shutil
import stat
import subprocess
import sys
import tarfile
import time

import pytest
from sandbox import hpc_health, make_root, without_spack
from store_fixtures import case, series, write_run

TRIAD = series("stream_triad_1t")          # MB/s, higher is better
CAPS = {"memory_bandwidth_mbs": 50000.0}


def _site(root, name):
    """A second site folder in the throw-away checkout, with a declared capability."""
    d = root / "site_configs" / name
    shutil.copytree(root / "site_configs" / "local", d)
    cfg = d / "site.yaml"
    text = cfg.read_text().replace("site: local", f"site: {name}")
    text = text.replace("    nodes: 1\n", "    nodes: 1\n    capabilities: "
                        "{memory_bandwidth_mbs: 50000}\n", 1)
    cfg.write_text(text)


def _runs(store, site, scale=1.0, n=3, first=1):
    """*n* stored runs of *site*, each with three triad samples."""
    ids = []
    for k in range(n):
        vals = [v * scale for v in TRIAD[3 * k:3 * k + 3]]
        rid = f"202611{first + k:02d}T020000Z"
        tc = case("StreamTriadScaling", "triad", sorted(vals)[1], "MB/s", system=site)
        tc["figure_capability"] = {"triad": "memory_bandwidth_mbs"}
        d = write_run(store, site, rid, [tc], started=rid, samples={0: {"triad": vals}})
        meta = json.loads((d / "run.json").read_text())
        meta["capabilities"] = {f"{site}:default": CAPS}
        meta["hostname"] = f"{site}-login"
        (d / "run.json").write_text(json.dumps(meta))
        (d / "verdicts.json").write_text(json.dumps([
            {"check": "StreamTriadScaling", "partition": f"{site}:default",
             "environ": "gnu-mpi", "variable": "triad", "verdict": "OK", "reason": ""}]))
        ids.append(rid)
    return ids


def _listing(store):
    """Every file of the store with its content's hash (the index and the
    lock file aside: neither holds data)."""
    if not store.exists():
        return {}
    out = {}
    for p in sorted(store.rglob("*")):
        rel = str(p.relative_to(store))
        if rel.startswith("index.sqlite") or rel == ".import.lock":
            continue
        out[rel] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
    return out


def _export(base):
    """Site `other`'s three runs exported from checkout A's store."""
    a = make_root(base / "a", references=False)
    _site(a, "other")
    ids = _runs(a.parent / "store", "other", scale=0.8)
    out = base / "other.json.gz"
    res = hpc_health(a, "export", "other:last:3", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert f"wrote {out}: 3 runs (3 of other)" in res.stdout
    return a, out, ids


@pytest.fixture
def exported(tmp_path):
    return _export(tmp_path)


@pytest.fixture(scope="module")
def shared_export(tmp_path_factory):
    """One export for the tests that only read it (and A's store)."""
    return _export(tmp_path_factory.mktemp("export"))


@pytest.fixture
def here(tmp_path):
    """Checkout B, whose store holds three runs of its own site `local`."""
    b = make_root(tmp_path / "b", references=False)
    _runs(b.parent / "store", "local")
    return b


def _doc(path):
    raw = path.read_bytes()
    assert raw[:2] == b"\x1f\x8b"       # gzip
    return json.loads(gzip.decompress(raw))


def test_the_export_file_holds_runs_samples_verdicts_and_capabilities(shared_export):
    _, out, ids = shared_export
    doc = _doc(out)
    assert doc["format"] == "hpc-health-export" and doc["version"] == 1
    assert doc["sites"]["other"]["capabilities"] == {"other:default": CAPS}
    assert [r["run_id"] for r in doc["runs"]] == ids
    run = doc["runs"][0]
    files = run["files"]
    assert set(files) == {"run.json", "report.json", "verdicts.json",
                          "output/case0/hpc-health-samples.json"}
    assert files["output/case0/hpc-health-samples.json"] == {"triad": [v * 0.8 for v in TRIAD[:3]]}
    # Portable: the testcases' directories relative to the run.
    assert files["report.json"]["runs"][0]["testcases"][0]["outputdir"] == "output/case0"
    canonical = json.dumps(files, sort_keys=True, separators=(",", ":")).encode()
    assert run["sha256"] == hashlib.sha256(canonical).hexdigest()


def test_nothing_an_import_writes_is_writable_by_everyone_whatever_the_umask(shared_export,
                                                                            tmp_path):
    _, out, _ = shared_export
    b = make_root(tmp_path / "b", references=False)
    old = os.umask(0)       # as cron or a service may start the suite
    try:
        res = hpc_health(b, "import", str(out))
    finally:
        os.umask(old)
    assert res.returncode == 0, res.stderr
    store = b.parent / "store"
    written = [p for p in store.rglob("*")]
    assert any(p.name == "run.json" for p in written)
    assert [p for p in written if p.lstat().st_mode & stat.S_IWOTH] == []


def test_import_into_an_empty_store_then_compare_with_a_local_site(shared_export, tmp_path):
    _, out, ids = shared_export
    b = make_root(tmp_path / "b", references=False)       # no site folder `other` here
    res = hpc_health(b, "import", str(out))
    assert res.returncode == 0, res.stderr
    assert [f"imported other:{rid}" for rid in ids] == res.stdout.splitlines()[:3]
    assert f"imported 3 runs from {out}" in res.stdout
    run_dir = b.parent / "store" / "runs" / "other" / ids[0]
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["imported"]["from_file"] == out.name
    assert meta["imported"]["hostname"] and meta["imported"]["at"]
    tc = json.loads((run_dir / "report.json").read_text())["runs"][0]["testcases"][0]
    assert tc["outputdir"] == str(run_dir / "output" / "case0")
    assert not (b.parent / "store" / ".import-tmp").exists()
    listed = hpc_health(b, "runs", "other:last:3")
    assert listed.returncode == 0 and listed.stdout.count("(imported)") == 3, listed.stderr

    _runs(b.parent / "store", "local")
    cmp = hpc_health(b, "compare", "local:last:3", "other:last:3", "--normalise", "--json")
    assert cmp.returncode == 1, cmp.stderr          # other is 20 % slower: REGRESSED
    row = json.loads(cmp.stdout)["rows"][0]
    assert row["word"] == "REGRESSED" and row["change"] == pytest.approx(-0.2, abs=0.01)
    # The samples came along (3 runs of 3), and the declared capability.
    assert row["samples_b"] == 9 and row["runs_b"] == 3
    assert row["norm_b"] == pytest.approx(row["centre_b"] / CAPS["memory_bandwidth_mbs"])
    assert any(s["what"] == "host" for s in json.loads(cmp.stdout)["stack"])


def test_importing_twice_adds_nothing_and_a_round_trip_is_recognised(exported, here):
    a, out, ids = exported
    store = here.parent / "store"
    assert hpc_health(here, "import", str(out)).returncode == 0
    before = _listing(store)
    again = hpc_health(here, "import", str(out))
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "nothing new: 3 runs already in the store"
    assert _listing(store) == before
    # Exported again from here, the imported runs are the same runs: their
    # home store already has them.
    back = here.parent / "back.json"
    res = hpc_health(here, "export", "other:last:3", "local:latest", "-o", str(back))
    assert res.returncode == 0, res.stderr
    assert "4 runs (3 of other, 1 of local)" in res.stdout
    assert back.read_bytes()[:1] == b"{"       # .json: plain JSON
    home = _listing(a.parent / "store")
    res = hpc_health(a, "import", str(back))
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [f"imported local:{ids[-1]}",
                                       f"imported 1 run from {back} (3 runs already in the store)"]
    after = _listing(a.parent / "store")
    assert {k: v for k, v in after.items() if k in home} == home     # its own runs untouched
    assert sorted(k for k in after if k not in home)[0] == "runs/local"


def test_a_stored_run_is_never_overwritten(shared_export, here):
    _, out, ids = shared_export
    store = here.parent / "store"
    # A run of the same site and id, measured here: other content.
    write_run(store, "other", ids[1], [case("StreamTriadScaling", "triad", 1.0, "MB/s")],
              started=ids[1])
    before = _listing(store)
    res = hpc_health(here, "import", str(out))
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1, res.stderr
    assert f"run other:{ids[1]} is already in the store" in res.stderr
    assert "never overwritten; nothing imported" in res.stderr and str(out) in res.stderr
    assert _listing(store) == before


def _tamper(doc):
    doc["runs"][1]["files"]["output/case0/hpc-health-samples.json"]["triad"][0] *= 2
    return doc


def _newer(doc):
    doc["version"] = 2
    doc["hpc_health"] = "9.0.0"
    return doc


def _resealed(change):
    """An export altered by *change* (a run's files) with its checksum made
    again: what a crafted file looks like, the checksum being no signature."""
    from hpc_health.store.portable import checksum

    def make(raw):
        doc = json.loads(gzip.decompress(raw))
        files = doc["runs"][1]["files"]
        change(files)
        doc["runs"][1]["sha256"] = checksum(files)
        return gzip.compress(json.dumps(doc).encode())
    return make


def _first_testcase(files):
    return files["report.json"]["runs"][0]["testcases"][0]


def _tarball():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b'{"hello": "world"}'
        info = tarfile.TarInfo("run.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


BAD = {
    "tampered": (lambda raw: gzip.compress(json.dumps(_tamper(json.loads(
        gzip.decompress(raw)))).encode()), "run other:20261102T020000Z: checksum mismatch"),
    "newer": (lambda raw: gzip.compress(json.dumps(_newer(json.loads(
        gzip.decompress(raw)))).encode()),
        "export format version 2 (written by hpc-health 9.0.0); this hpc-health 0.1.0 reads "
        "version 1: import it with a newer hpc-health"),
    "truncated": (lambda raw: raw[:len(raw) // 2], "truncated: the compressed data ends early"),
    "truncated-plain": (lambda raw: gzip.decompress(raw)[:300], "truncated or damaged export"),
    "foreign-json": (lambda raw: b'{"runs": [], "name": "something else"}',
                     "not an hpc-health export (a JSON document without"),
    "foreign-binary": (lambda raw: os.urandom(4096).replace(b"\x1f\x8b", b"xx"),
                       "not an hpc-health export"),
    "foreign-tarball": (lambda raw: _tarball(), "not an hpc-health export (a tar archive inside gzip)"),
    "empty": (lambda raw: b"", "not an hpc-health export (not JSON)"),
    "escapes": (_resealed(lambda f: f["run.json"].update(hostname="n1\x1b]0;owned\x07\x1b[2J")),
                "run.json.hostname holds control characters (a terminal escape sequence?)"),
    "nul-path": (_resealed(lambda f: _first_testcase(f).update(outputdir="output/a\x00b")),
                 "a testcase's outputdir 'output/a\\x00b' is not relative to the run"),
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_a_bad_file_is_refused_with_one_line_and_nothing_written(shared_export, here, kind):
    _, out, _ = shared_export
    make, message = BAD[kind]
    bad = here.parent / f"{kind}.json.gz"
    bad.write_bytes(make(out.read_bytes()))
    store = here.parent / "store"
    before = _listing(store)
    res = hpc_health(here, "import", str(bad))
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith(f"hpc-health: error: {bad}: ") and message in res.stderr, res.stderr
    assert res.stdout == ""
    assert _listing(store) == before
    assert not (store / ".import.lock").exists()      # refused before touching the store


def test_an_export_that_unpacks_past_the_limit_is_refused_before_it_fills_memory(
        shared_export, here):
    """A few KiB that unpack to more than the limit (here 1 MiB instead of
    512, by its variable): refused while unpacking, nothing written."""
    bomb = here.parent / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b'{"format": "hpc-health-export", ' + b" " * (8 << 20) + b"}"))
    assert bomb.stat().st_size < 64 << 10
    store = here.parent / "store"
    before = _listing(store)
    res = hpc_health(here, "import", str(bomb), env=dict(os.environ, HPC_HEALTH_IMPORT_MAX_MIB="1"))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "unpacks to more than 1 MiB" in res.stderr and "HPC_HEALTH_IMPORT_MAX_MIB" in \
        res.stderr, res.stderr
    assert "Traceback" not in res.stderr and _listing(store) == before


def test_a_missing_file_and_an_empty_store_stay_untouched(tmp_path):
    b = make_root(tmp_path / "b", references=False)
    res = hpc_health(b, "import", str(tmp_path / "nope.json.gz"))
    assert res.returncode == 2 and "nope.json.gz: no such file" in res.stderr
    assert not (tmp_path / "b" / "store").exists()


def test_export_errors_write_no_file(shared_export, tmp_path):
    a, _, _ = shared_export
    res = hpc_health(a, "export", "other:nope", "-o", str(tmp_path / "x.json.gz"))
    assert res.returncode == 2 and "no run 'nope'" in res.stderr
    res = hpc_health(a, "export", "other", "-o", str(tmp_path / "no-such-dir" / "x.json.gz"))
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert not (tmp_path / "x.json.gz").exists() and not (tmp_path / "no-such-dir").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def _popen(root, *args):
    env = without_spack(dict(os.environ, HPC_HEALTH_ROOT=str(root),
                             HPC_HEALTH_STORE=str(root.parent / "store")), root)
    return subprocess.Popen([sys.executable, "-m", "hpc_health", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _line(stream, timeout):
    ready, _, _ = select.select([stream], [], [], timeout)
    assert ready, f"nothing said within {timeout} s"
    return stream.readline()


def test_a_second_import_waits_for_the_first_or_refuses_clearly(shared_export, here):
    _, out, _ = shared_export
    store = here.parent / "store"
    with open(store / ".import.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.write("pid 4242 on elsewhere\n")
        lock.flush()
        before = _listing(store)
        res = hpc_health(here, "import", "--wait", "0.5", str(out))
        assert res.returncode == 2
        assert "waiting up to 0.5 s" in res.stderr
        assert "another import (pid 4242 on elsewhere) still holds the lock after 0.5 s: " \
               "nothing imported" in res.stderr
        assert _listing(store) == before
        # Waiting: it goes on once the first one is done.
        waiting = _popen(here, "import", "--wait", "120", str(out))
        said = _line(waiting.stderr, timeout=60)
        assert f"another import into {store} is running (pid 4242 on elsewhere): waiting" in said
        time.sleep(0.5)
        assert waiting.poll() is None and _listing(store) == before
    stdout, stderr = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, stderr
    assert "imported 3 runs" in stdout


def test_two_imports_at_once_import_each_run_once(shared_export, here):
    _, out, _ = shared_export
    procs = [_popen(here, "import", str(out)) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    said = sorted(o[0].splitlines()[-1] for o in outs)
    assert said == ["imported 3 runs from " + str(out), "nothing new: 3 runs already in the store"]
    runs = sorted(p.name for p in (here.parent / "store" / "runs" / "other").iterdir())
    assert len(runs) == 3
    assert not (here.parent / "store" / ".import-tmp").exists()


# --- in-process: what the file carries, and an import that fails half-way ----------

def _store(monkeypatch, path):
    monkeypatch.setenv("HPC_HEALTH_STORE", str(path))
    return path


def test_samples_in_stage_dirs_and_moved_stores_are_carried_those_outside_are_not(
        tmp_path, monkeypatch):
    from hpc_health.model import results
    from hpc_health.store import importer, portable, rundirs
    src = _store(monkeypatch, tmp_path / "src")
    rid = "20261101T020000Z"
    tcs = [case("A", "triad", 1.0, "MB/s"), case("B", "triad", 2.0, "MB/s"),
           case("C", "triad", 3.0, "MB/s"), case("D", "triad", 4.0, "MB/s")]
    d = write_run(src, "other", rid, tcs, started=rid, samples={0: {"triad": [1.0]}})
    (d / "stage" / "b").mkdir(parents=True)
    (d / "stage" / "b" / "hpc-health-samples.json").write_text('{"triad": [2.0]}')
    (d / "output" / "c").mkdir(parents=True)
    (d / "output" / "c" / "hpc-health-samples.json").write_text('{"triad": [3.0]}')
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "hpc-health-samples.json").write_text('{"triad": [4.0]}')
    tcs[1]["stagedir"] = str(d / "stage" / "b")
    tcs[2]["outputdir"] = f"/old/store/runs/other/{rid}/output/c"     # the store moved
    tcs[3]["outputdir"] = str(tmp_path / "elsewhere")                  # not the run's
    (d / "report.json").write_text(json.dumps({"runs": [{"testcases": tcs}]}))
    out = tmp_path / "x.json.gz"
    written = portable.export([("other", rid, rundirs.runs_dir("other") / rid)], out)
    assert written.runs == [("other", rid)]
    files = portable.read(out).runs[0].files
    assert sorted(files) == ["output/c/hpc-health-samples.json",
                             "output/case0/hpc-health-samples.json", "report.json", "run.json",
                             "stage/b/hpc-health-samples.json"]

    _store(monkeypatch, tmp_path / "dst")
    done = importer.import_file(out, say=lambda line: None)
    assert [e.name for e, _ in done.added] == [f"other:{rid}"]
    report = results.load_report(done.added[0][1] / "report.json")
    got = [results.case_samples(tc) for tc in report["runs"][0]["testcases"]]
    assert got == [{"triad": [1.0]}, {"triad": [2.0]}, {"triad": [3.0]}, {}]
    assert report["runs"][0]["testcases"][3]["outputdir"] is None


@pytest.mark.parametrize("where", ["staging", "placing"])
def test_an_import_that_fails_half_way_leaves_the_store_as_it_was(
        shared_export, tmp_path, monkeypatch, where):
    import errno

    from hpc_health.store import importer, portable, rundirs
    _, out, _ = shared_export
    dst = _store(monkeypatch, tmp_path / "dst")
    _runs(dst, "local")
    before = _listing(dst)
    calls = []
    if where == "staging":                  # the disk fills while writing the runs
        real = rundirs.write_json

        def write_json(path, data):
            calls.append(path)
            if len(calls) == 7:
                raise OSError(errno.ENOSPC, "No space left on device", str(path))
            return real(path, data)
        monkeypatch.setattr(rundirs, "write_json", write_json)
    else:                                   # the second run cannot be renamed into place
        real = os.rename

        def rename(a, b):
            calls.append(b)
            if len(calls) == 2:
                raise OSError(errno.EIO, "Input/output error", str(b))
            return real(a, b)
        monkeypatch.setattr(portable.os, "rename", rename)
    with pytest.raises(OSError):
        importer.import_file(out, say=lambda line: None)
    assert calls
    assert _listing(dst) == before
    assert not (dst / "runs" / "other").exists() and not (dst / importer.STAGING).exists()


def test_runs_of_a_site_measured_here_are_imported_with_a_note(tmp_path, monkeypatch):
    from hpc_health.store import importer, portable, rundirs
    src = _store(monkeypatch, tmp_path / "src")
    _runs(src, "local", n=1, first=20)
    out = tmp_path / "x.json"
    portable.export([("local", "20261120T020000Z",
                      rundirs.runs_dir("local") / "20261120T020000Z")], out)
    _runs(_store(monkeypatch, tmp_path / "dst"), "local", n=2)
    done = importer.import_file(out, say=lambda line: None)
    assert len(done.added) == 1
    assert done.notes == ["site local also has runs measured in this store: the imported ones "
                          "join its history and run sets"]
