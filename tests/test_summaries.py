"""What other tools read of stored runs: `report --markdown`, `report
--junit`, `export --prometheus`."""

import json
import os
import xml.etree.ElementTree as ET

import pytest
import yaml
from sandbox import hpc_health, make_root
from store_fixtures import case, write_run

REFERENCE = {"StreamTriadScaling": {"$index": ["$partition", "$environ"],
                                    "local:default": {"gnu-mpi": {
                                        "triad": [35000, -0.1, 0.1, "MB/s"]}}},
             "OsuPointToPoint": {"$index": ["$partition", "$environ", "placement"],
                                 "local:default": {"gnu-mpi": {"intra": {
                                     "latency_4KiB": [2.3, -0.2, 0.2, "us"]}}}},
             "$provenance": {"StreamTriadScaling": {"local:default/gnu-mpi/triad": {
                 "runs": ["a", "b", "c", "d", "e"], "samples": 15, "spread": 0.03,
                 "between_run_spread": 0.03, "within_run_spread": 0.02}}}}


def _store(tmp_path, triad_tonight):
    root = make_root(tmp_path, references=False)
    (root / "reference" / "local.yaml").write_text(yaml.safe_dump(REFERENCE))
    store = root.parent / "store"
    stacks = {"20261120T020000Z": "gcc@12.2.0", "20261121T020000Z": "gcc@13.1.0"}
    for (rid, compiler), triad in zip(stacks.items(), (35100, triad_tonight)):
        tcs = [case("StreamTriadScaling", "triad", triad, "MB/s"),
               case("OsuPointToPoint", "latency_4KiB", 2.31, "us", params={"placement": "intra"}),
               case("IorBandwidth", None, None, "MiB/s", result="skip",
                    fail_reason="no scratch directory for partition default")]
        write_run(store, "local", rid, tcs, started=rid,
                  meta={"stack": {"mpicc": compiler}, "hostname": "node1"})
    return root


def test_markdown_gives_the_verdict_the_failing_rows_and_the_stack_change(tmp_path):
    root = _store(tmp_path, 20000)
    res = hpc_health(root, "report", "--site", "local", "--markdown")
    assert res.returncode == 1, res.stdout + res.stderr
    out = res.stdout
    assert out.startswith("### hpc-health `local` run `20261121T020000Z`: **UNHEALTHY** (")
    rows = [line for line in out.splitlines() if line.startswith("| StreamTriadScaling")]
    assert len(rows) == 1 and "| DEGRADED |" in rows[0] and "-42.9" in rows[0]
    assert "OsuPointToPoint" not in out          # passing rows stay in the table
    assert "**Software stack since run `20261120T020000Z`:**" in out
    assert "- compiler: `gcc@12.2.0` → `gcc@13.1.0`" in out


def test_junit_has_a_case_per_figure_and_failures_with_their_reason(tmp_path):
    root = _store(tmp_path, 20000)
    out = tmp_path / "ci" / "junit.xml"
    out.parent.mkdir()
    res = hpc_health(root, "report", "--site", "local", "last:2", "--junit", str(out))
    assert res.returncode == 1, res.stdout + res.stderr
    suites = ET.parse(out).getroot().findall("testsuite")
    assert [s.get("name") for s in suites] == ["hpc-health local 20261120T020000Z",
                                               "hpc-health local 20261121T020000Z"]
    first, tonight = suites
    assert (first.get("tests"), first.get("failures"), first.get("skipped")) == ("3", "0", "1")
    assert (tonight.get("tests"), tonight.get("failures")) == ("3", "1")
    (failed,) = [c for c in tonight.findall("testcase") if c.find("failure") is not None]
    assert failed.get("classname") == "local.StreamTriadScaling"
    assert failed.get("name") == "triad [local:default gnu-mpi]"
    assert failed.find("failure").get("type") == "DEGRADED"
    assert "worse" in failed.find("failure").get("message")
    skipped = [c for c in tonight.findall("testcase") if c.find("skipped") is not None]
    assert "no scratch directory" in skipped[0].find("skipped").get("message")


def test_junit_into_a_missing_directory_is_refused_and_writes_nothing(tmp_path):
    root = _store(tmp_path, 35000)
    res = hpc_health(root, "report", "--site", "local", "--junit", str(tmp_path / "no" / "j.xml"))
    assert res.returncode == 2 and "no directory" in res.stderr
    assert not (tmp_path / "no").exists()
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    res = hpc_health(root, "report", "--site", "local", "--junit", str(a_file / "j.xml"))
    assert res.returncode == 2 and "no directory" in res.stderr
    assert a_file.read_text() == ""


def test_prometheus_textfile_parses_with_base_units_and_one_gauge_per_state(tmp_path):
    parser = pytest.importorskip("prometheus_client.parser")
    root = _store(tmp_path, 20000)
    out = tmp_path / "hpc_health.prom"
    res = hpc_health(root, "export", "--site", "local", "--prometheus", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".hpc_health.prom")]
    families = {f.name: f for f in parser.text_string_to_metric_families(out.read_text())}
    assert all(f.type == "gauge" for f in families.values())
    assert all(s.timestamp is None for f in families.values() for s in f.samples)
    triad = {"site": "local", "partition": "local:default", "check": "StreamTriadScaling",
             "figure": "triad", "environ": "gnu-mpi"}

    def value(family, **labels):
        (s,) = [s for s in families[family].samples if s.labels == labels]
        return s.value

    assert value("hpc_health_figure_bytes_per_second", **triad) == pytest.approx(20000e6)
    assert value("hpc_health_reference_bytes_per_second", **triad) == pytest.approx(35000e6)
    assert 0 < value("hpc_health_mdc_ratio", **triad) < 1
    assert value("hpc_health_verdict", **triad, state="DEGRADED") == 1
    assert value("hpc_health_verdict", **triad, state="PASS") == 0
    lat = {**triad, "check": "OsuPointToPoint %placement=intra", "figure": "latency_4KiB"}
    assert value("hpc_health_figure_seconds", **lat) == pytest.approx(2.31e-6)
    run = {"site": "local", "run": "20261121T020000Z"}
    assert value("hpc_health_run_healthy", **run) == 0
    assert value("hpc_health_run_timestamp_seconds", **run) == 1795226400   # 2026-11-21 02:00Z


def test_prometheus_and_an_export_file_are_one_or_the_other(tmp_path):
    root = _store(tmp_path, 35000)
    res = hpc_health(root, "export", "--site", "local", "latest", "-o", str(tmp_path / "x"),
                     "--prometheus", str(tmp_path / "y.prom"))
    assert res.returncode == 2 and "either" in res.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "y.prom").exists()


class _Dashboard:
    """A small HTTP server on 127.0.0.1 that records what it is sent and
    can be told to answer 500."""

    def __init__(self):
        import http.server
        import threading
        self.bodies, self.auth, self.status = [], [], 200
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if outer.status == 200:
                    outer.bodies.append(json.loads(body))
                    outer.auth.append(self.headers.get("Authorization"))
                self.send_response(outer.status)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hpc-health"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_push_delivers_each_run_once_and_keeps_the_rest_across_an_outage(tmp_path):
    root = _store(tmp_path, 20000)
    store = root.parent / "store"
    board = _Dashboard()
    try:
        env = {**os.environ, "HPC_HEALTH_PUSH_TOKEN": "s3cret"}
        res = hpc_health(root, "push", "--site", "local", board.url, env=env)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "2 run(s) of local sent" in res.stdout and "s3cret" not in res.stdout + res.stderr
        assert [b[0]["run"] for b in board.bodies] == ["20261120T020000Z", "20261121T020000Z"]
        (triad,) = [r for r in board.bodies[1] if r["figure"] == "triad"]
        assert triad["verdict"] == "DEGRADED" and triad["value"] == 20000 and triad["mdc"] > 0
        assert board.auth == ["Bearer s3cret"] * 2
        # Nothing new: nothing sent.
        res = hpc_health(root, "push", "--site", "local", board.url, env=env)
        assert res.returncode == 0 and "0 run(s) of local sent" in res.stdout
        assert len(board.bodies) == 2
        # Two more nights while the dashboard answers 500: both wait.
        for rid in ("20261122T020000Z", "20261123T020000Z"):
            write_run(store, "local", rid, [case("StreamTriadScaling", "triad", 35000, "MB/s")],
                      started=rid)
        board.status = 500
        res = hpc_health(root, "push", "--site", "local", board.url, "--retries", "1", env=env)
        assert res.returncode == 1 and "2 run(s) of local wait for" in res.stderr, res.stderr
        assert "answered 500" in res.stderr and len(board.bodies) == 2
        # Back up: exactly the two that waited.
        board.status = 200
        res = hpc_health(root, "push", "--site", "local", board.url, env=env)
        assert res.returncode == 0 and "2 run(s) of local sent" in res.stdout
        assert [b[0]["run"] for b in board.bodies[2:]] == ["20261122T020000Z", "20261123T020000Z"]
    finally:
        board.close()
    # A server that is not there at all: exit 1, the runs still queued, the
    # token in no file of the store.
    res = hpc_health(root, "push", "--site", "local", "http://127.0.0.1:9/x", "--retries", "0",
                     env=env)
    assert res.returncode == 1 and "did not answer" in res.stderr and "4 run(s)" in res.stderr
    assert not [p for p in store.rglob("*") if p.is_file() and b"s3cret" in p.read_bytes()]


def test_a_run_says_where_it_is_between_reframes_lines():
    from hpc_health.run.console import Progress
    now = [0.0]
    with_previous = Progress(300.0, clock=lambda: now[0])
    now[0] = 130.0
    line = ("[ \x1b[32m      OK\x1b[0m ] (12/40) OsuPointToPoint %benchmark=osu_latency "
            "/9529f780 @local:default+gnu-mpi")
    assert with_previous(line) == ("hpc-health: [12/40] OsuPointToPoint: 2m10s elapsed, "
                                   "~2m50s left (as long as the previous run)")
    now[0] = 400.0
    assert with_previous(line).endswith("longer than the previous run (5m00s)")
    first_run = Progress(None, clock=lambda: now[0])
    now[0] = 410.0
    assert first_run(line).endswith(": 10s elapsed, ~23s left")
    assert first_run("[ RUN      ] OsuPointToPoint") == ""
    assert first_run("[ \x1b[33m    SKIP\x1b[0m ] (40/40) IorBandwidth /x @p+e").endswith("done")


def test_the_time_left_counts_the_previous_runs_checks_not_its_spack_builds(tmp_path,
                                                                             monkeypatch):
    # A cold first run spent 253 of its 500 s building; the clock of the
    # next run starts after its own (warm) pre-build.
    from hpc_health.run.console import previous_duration
    monkeypatch.setenv("HPC_HEALTH_STORE", str(tmp_path))
    write_run(tmp_path, "local", "20261127T061000Z", [], "2026-11-27T06:10:00Z",
              meta={"finished": "2026-11-27T06:18:20Z", "prebuild": {"seconds": 253.0}})
    assert previous_duration("local", {"run_id": "20261127T062000Z"}) == pytest.approx(247.0)
