"""Run sets, the store's index and `hpc-health compare`, on stored runs built
from the recorded 30-run noise series (real measurements of this kind of
machine), with injected changes where a change is wanted."""

import json
import os
import shutil

import numpy as np
import pytest
from sandbox import add_site, hpc_health, make_root
from store_fixtures import case, series, write_run

from hpc_health import stats
from hpc_health.errors import ConfigError
from hpc_health.judge import comparison
from hpc_health.store import index, runsets

LAT = series("osu_latency_4KiB")           # us, lower is better
TRIAD = series("stream_triad_1t")          # MB/s, higher is better


def _store(root):
    return root.parent / "store"


def _write(root, n_runs, start, *, lat_factor=1.0, tags=(), site="local", system="local",
           partition="default", offset=0, meta=None, nodes=None):
    """*n_runs* stored runs of 3 samples each, taken from the recorded
    series from sample *offset* on, latency scaled by *lat_factor*."""
    ids = []
    for k in range(n_runs):
        lat = [x * lat_factor for x in LAT[offset + 3 * k: offset + 3 * k + 3]]
        tri = TRIAD[offset + 3 * k: offset + 3 * k + 3]
        tcs = [case("OsuPointToPoint", "latency_4KiB", float(np.median(lat)), "us",
                    system=system, partition=partition, params={"placement": "intra"}),
               case("StreamTriadScaling", "triad", float(np.median(tri)), "MB/s",
                    system=system, partition=partition)]
        if nodes:
            for tc in tcs:
                tc["job_nodelist"] = nodes
        tcs[1]["figure_capability"] = {"triad": "memory_bandwidth_mbs"}
        rid = f"2026110{start // 10}T0{start % 10}{k:02d}00Z"
        write_run(_store(root), site, rid, tcs,
                  started=f"2026-11-0{start // 10}T0{start % 10}:{k:02d}:00Z",
                  samples={0: {"latency_4KiB": lat}, 1: {"triad": tri}},
                  meta={"tags": list(tags), **(meta or {})})
        ids.append(rid)
    return ids


def test_compare_runs_sees_an_injected_step_and_not_the_noise():
    runs = [LAT[i:i + 3] for i in range(0, 30, 3)]
    same = stats.compare_runs(runs[:5], runs[5:], "lower")
    assert same.p_value > 0.05 and same.low < 0 < same.high
    worse = stats.compare_runs(runs[:5], [[x * 1.4 for x in r] for r in runs[5:]], "lower")
    assert worse.p_value < 0.01 and worse.worse_by > 0.25 and worse.low > 0
    # Higher is better: a drop is worse.
    tri = [TRIAD[i:i + 3] for i in range(0, 30, 3)]
    drop = stats.compare_runs(tri[:5], [[x * 0.7 for x in r] for r in tri[5:]], "higher")
    assert drop.worse_by > 0.1 and drop.change < 0 and drop.p_value < 0.05
    # One run a side: the night-to-night spread cannot be estimated.
    one = stats.compare_runs(runs[:1], runs[1:2], "lower")
    assert one.p_value is None and one.low is None and one.mdc is None


def test_more_runs_shrink_the_detectable_change():
    runs = [LAT[i:i + 3] for i in range(0, 30, 3)]
    mdcs = [stats.compare_runs(runs[:n], runs[5:5 + n], "lower").mdc for n in (2, 3, 5)]
    assert mdcs[0] > mdcs[1] > mdcs[2]
    # The episode floor: never below what 5 % night-to-night spread allows.
    assert mdcs[2] > 2 * stats.EPISODE_FLOOR * (2 / 5) ** 0.5


def test_run_set_grammar(tmp_path, monkeypatch):
    root = make_root(tmp_path, references=False)
    monkeypatch.setenv("HPC_HEALTH_STORE", str(_store(root)))
    monkeypatch.setenv("HPC_HEALTH_ROOT", str(root))
    before = _write(root, 3, 10, tags=("before",))
    after = _write(root, 2, 20, tags=("after", "nightly"), offset=9)
    with index.open_index(say=lambda _: None) as idx:
        def ids(text):
            return [r.run_id for r in runsets.resolve(idx, text, "local").runs]
        assert ids("latest") == after[-1:]
        assert ids("local") == after[-1:]
        assert ids("last:2") == after
        assert ids("tag:before") == before
        assert ids("local:tag:nightly@default") == after
        assert ids(f"{before[1]}..{after[0]}") == before[1:] + after[:1]
        assert ids(before[0]) == before[:1]
        assert ids("since:2026-11-02") == after
        assert ids(f"since:{before[2]}") == before[2:] + after      # a DRIFTING line's run
        for text, said in (("tag:befor", "did you mean before"),
                           (before[0][:-3] + "99Z", "did you mean"),
                           ("last:0", "positive whole number"),
                           ("since:yesterday", "since:DATE takes"),
                           (f"{after[0]}..{before[0]}", "write"),
                           ("other:latest", "no stored run of site 'other'"),
                           ("latest@nope", "no partition 'nope'")):
            with pytest.raises(ConfigError, match=said):
                runsets.resolve(idx, text, "local")


def test_compare_regressed_same_and_the_exit_codes(tmp_path):
    root = make_root(tmp_path, references=False)
    before = _write(root, 5, 10, tags=("before",))
    clean = _write(root, 5, 20, tags=("clean",), offset=15)
    _write(root, 5, 30, tags=("after",), offset=15, lat_factor=1.5)
    res = hpc_health(root, "compare", "--site", "local", "tag:before", "tag:after")
    assert res.returncode == 1, res.stdout + res.stderr
    line = next(x for x in res.stdout.splitlines() if "latency_4KiB" in x and "OsuP" in x)
    assert "REGRESSED" in line and "5/5" in line
    assert "REGRESSED: OsuPointToPoint %placement=intra latency_4KiB: +" in res.stdout
    triad = next(x for x in res.stdout.splitlines() if x.startswith("StreamTriad"))
    assert "REGRESSED" not in triad
    assert "exit 1" in res.stdout.splitlines()[-1]

    res = hpc_health(root, "compare", "--site", "local", "tag:before", "tag:clean",
                     "--margin", "0.3")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "REGRESSED" not in res.stdout and "SAME" in res.stdout

    # Too few runs to promise anything: INCONCLUSIVE with the reason, exit 0.
    res = hpc_health(root, "compare", "--site", "local", before[0], clean[0])
    assert res.returncode == 0, res.stdout
    assert "INCONCLUSIVE" in res.stdout


def test_compare_json_lists_figures_on_one_side_only(tmp_path):
    root = make_root(tmp_path, references=False)
    _write(root, 3, 10, tags=("a",))
    ids = _write(root, 3, 20, tags=("b",), offset=9)
    # One more figure on side B only.
    run_dir = _store(root) / "runs" / "local" / ids[-1]
    report = json.loads((run_dir / "report.json").read_text())
    report["runs"][0]["testcases"].append(case("BarrierLatency", "mpi_init", 0.2, "s"))
    (run_dir / "report.json").write_text(json.dumps(report))
    res = hpc_health(root, "compare", "--site", "local", "tag:a", "tag:b", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["format"] == "hpc-health-compare/1"
    assert {r["variable"] for r in data["rows"]} == {"latency_4KiB", "triad"}
    assert data["only_b"] == ["BarrierLatency mpi_init on default (gnu-mpi)"]
    assert all(r["word"] in ("SAME", "INCONCLUSIVE") for r in data["rows"])
    assert data["a"]["runs"] and len(data["b"]["runs"]) == 3


def test_two_sites_mapped_and_normalised_with_their_stack_diff(tmp_path):
    root = make_root(tmp_path, references=False)
    add_site(root, "other")
    caps = {"capabilities": {"local:default": {"memory_bandwidth_mbs": 20000.0}}}
    _write(root, 3, 10, meta={**caps, "stack": {"mpirun": "mpirun (Open MPI) 4.1.4"},
                               "spack": {"output/x": {"specs": {"osu-micro-benchmarks": {
                                   "version": "7.4", "variants": "~cuda", "hash": "a" * 32,
                                   "compiler": "gcc@12.2.0"}}}}}, nodes=["n1"])
    _write(root, 3, 20, site="other", system="other", partition="cpu", offset=9,
           meta={"capabilities": {"other:cpu": {"memory_bandwidth_mbs": 40000.0}},
                 "stack": {"mpirun": "mpirun (Open MPI) 5.0.3"},
                 "spack": {"output/x": {"specs": {"osu-micro-benchmarks": {
                     "version": "7.4", "variants": "~cuda", "hash": "b" * 32,
                     "compiler": "gcc@13.1.0"}}}}}, nodes=["c1"])
    res = hpc_health(root, "compare", "--site", "local", "last:3", "other:last:3",
                     "--normalise")
    assert res.returncode in (0, 1), res.stderr
    out = res.stdout
    triad = next(x for x in out.splitlines() if x.startswith("StreamTriad"))
    assert "default=cpu" in triad and "A/declared" in out
    data = json.loads(hpc_health(root, "compare", "--site", "local", "last:3",
                                 "other:last:3", "--normalise", "--json").stdout)
    row = next(r for r in data["rows"] if r["variable"] == "triad")
    # Each centre as a fraction of its own partition's declared bandwidth.
    assert row["norm_a"] == pytest.approx(row["centre_a"] / 20000.0)
    assert row["norm_b"] == pytest.approx(row["centre_b"] / 40000.0)
    assert f"{100 * row['norm_a']:.0f} %" in triad
    assert "MPI: mpirun (Open MPI) 4.1.4 -> mpirun (Open MPI) 5.0.3" in out
    assert "spack changed osu-micro-benchmarks: @7.4 ~cuda /aaaaaaa %gcc@12.2.0 -> " \
           "@7.4 ~cuda /bbbbbbb %gcc@13.1.0" in out
    assert "nodes: n1 -> c1" in out
    # Several partitions a side and no --map: nothing in common is an error.
    res = hpc_health(root, "compare", "--site", "local", "last:3", "other:last:3",
                     "--map", "default=nope")
    assert res.returncode == 2 and "side B has no partition 'nope'" in res.stderr


def test_normalised_fraction_uses_the_runs_declared_capability(tmp_path, monkeypatch):
    root = make_root(tmp_path, references=False)
    monkeypatch.setenv("HPC_HEALTH_STORE", str(_store(root)))
    monkeypatch.setenv("HPC_HEALTH_ROOT", str(root))
    caps = {"capabilities": {"local:default": {"memory_bandwidth_mbs": 20000.0}}}
    _write(root, 3, 10, tags=("a",), meta=caps)
    _write(root, 3, 20, tags=("b",), meta=caps, offset=9)
    with index.open_index(say=lambda _: None) as idx:
        sets = [runsets.resolve(idx, t, "local") for t in ("tag:a", "tag:b")]
        res = comparison.compare(idx, *sets, normalise=True)
    row = next(r for r in res.rows if r.variable == "triad")
    assert row.norm_a == pytest.approx(row.centre_a / 20000.0)
    lat = next(r for r in res.rows if r.variable == "latency_4KiB")
    assert lat.norm_a is None       # no capability declared for it


def test_the_index_is_rebuilt_when_missing_and_updated_when_stale(tmp_path):
    root = make_root(tmp_path, references=False)
    _write(root, 3, 10)
    res = hpc_health(root, "history", "--site", "local", "--check", "StreamTriadScaling", "--var", "triad")
    assert res.returncode == 0, res.stderr
    assert "index: building it from 3 run directories" in res.stderr
    db = _store(root) / index.INDEX_FILE
    assert db.exists()
    res = hpc_health(root, "history", "--site", "local", "--check", "StreamTriadScaling", "--var", "triad")
    assert "index" not in res.stderr         # up to date: nothing said
    # Runs added and removed behind its back: noticed and said.
    _write(root, 2, 20, offset=9)
    shutil.rmtree(_store(root) / "runs" / "local" / sorted(
        os.listdir(_store(root) / "runs" / "local"))[0])
    res = hpc_health(root, "history", "--site", "local", "--check", "StreamTriadScaling",
                     "--var", "triad")
    assert "2 run(s) new or changed, 1 gone" in res.stderr
    assert len([x for x in res.stdout.splitlines() if "stack s1" in x]) == 4
    # Deleting it loses nothing; a damaged file is set aside and rebuilt.
    db.write_bytes(b"not a database at all" * 100)
    res = hpc_health(root, "history", "--site", "local", "--check", "StreamTriadScaling", "--var", "triad")
    assert res.returncode == 0 and "is damaged" in res.stderr
    assert (_store(root) / (index.INDEX_FILE + ".damaged")).exists()


def test_an_index_another_process_holds_is_waited_for_said_and_never_renamed(
        tmp_path, monkeypatch):
    """Busy is not damaged: a lock held past the wait leaves the index as it
    is for its holder; this command reads the run directories."""
    import sqlite3
    root = make_root(tmp_path, references=False)
    _write(root, 3, 10)
    res = hpc_health(root, "history", "--site", "local", "--check", "StreamTriadScaling", "--var", "triad")
    assert res.returncode == 0, res.stderr
    db_path = _store(root) / index.INDEX_FILE
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    monkeypatch.setattr(index, "LOCK_NOTICE_S", 0.2)
    monkeypatch.setattr(index, "LOCK_WAIT_S", 0.5)
    monkeypatch.setenv("HPC_HEALTH_STORE", str(_store(root)))
    said = []
    try:
        with index.open_index(say=said.append) as idx:
            listing = idx.listing("local")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert len(listing.runs) == 3
    assert any("is locked by another process" in line and "waiting up to 0.5 s" in line
               for line in said), said
    assert any("still locked after 0.5 s" in line and "reading the run directories" in line
               for line in said), said
    assert not (_store(root) / (index.INDEX_FILE + ".damaged")).exists()
    res = hpc_health(root, "history", "--site", "local", "--check", "StreamTriadScaling", "--var", "triad")
    assert res.returncode == 0 and "index" not in res.stderr, res.stderr


def test_damaged_runs_are_named_by_compare(tmp_path):
    root = make_root(tmp_path, references=False)
    ids = _write(root, 4, 10)
    (_store(root) / "runs" / "local" / ids[1] / "report.json").write_text("{truncated")
    res = hpc_health(root, "compare", "--site", "local", ids[0], f"{ids[2]}..{ids[3]}")
    assert res.returncode == 0, res.stderr
    assert f"skipped 1 damaged run: {ids[1]}: not a ReFrame JSON run report" in res.stderr


@pytest.mark.parametrize("a,b,said", [
    ("latest", "latest", "both sides are the same run(s)"),
    ("last:3", "last:2", "2 run(s) are on both sides"),
])
def test_a_run_on_both_sides_is_an_error_that_says_so(tmp_path, a, b, said):
    root = make_root(tmp_path, references=False)
    _write(root, 3, 10)
    res = hpc_health(root, "compare", "--site", "local", a, b)
    assert res.returncode == 2, res.stdout + res.stderr
    assert said in res.stderr and "a run compared with itself" in res.stderr, res.stderr
    assert "take more runs" not in res.stdout + res.stderr


def test_sets_with_nothing_in_common_are_an_error(tmp_path):
    root = make_root(tmp_path, references=False)
    _write(root, 2, 10, tags=("a",))
    write_run(_store(root), "local", "20261105T000000Z",
              [case("BarrierLatency", "mpi_init", 0.2, "s")], started="2026-11-05",
              meta={"tags": ["b"]})
    res = hpc_health(root, "compare", "--site", "local", "tag:a", "tag:b")
    assert res.returncode == 2
    assert "the two run sets have no figure in common (2 and 1 figures" in res.stderr


def test_a_store_whose_index_cannot_be_written_is_read_from_its_run_directories(
        tmp_path, monkeypatch):
    root = make_root(tmp_path, references=False)
    monkeypatch.setenv("HPC_HEALTH_STORE", str(_store(root)))
    monkeypatch.setenv("HPC_HEALTH_ROOT", str(root))
    ids = _write(root, 3, 10)
    said = []
    real = index.Index._ingest
    calls = []

    def read_only(self, site, run_dir):
        # The first write to the file fails as on a read-only file system.
        calls.append(run_dir)
        if len(calls) == 1:
            import sqlite3
            raise sqlite3.OperationalError("attempt to write a readonly database")
        return real(self, site, run_dir)

    monkeypatch.setattr(index.Index, "_ingest", read_only)
    with index.open_index(say=said.append) as idx:
        assert [r.run_id for r in idx.listing("local").runs] == ids
    assert any("cannot write the index" in s and "readonly" in s for s in said)
