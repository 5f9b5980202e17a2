"""What the suite prints or writes from stored, imported or served text,
and under a locale that cannot encode all of it: escapes and control
characters never reach a terminal or a file raw, a field never forges a
line, a JUnit file parses, and a latin-1 or ASCII terminal costs no night.
Also which run is "latest" when one is dated in the future."""

import json
import locale
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from sandbox import barrier_root, environ, hpc_health, make_root, store
from store_fixtures import case, write_run

from hpc_health.render import escape

HOSTILE = "\x1b]0;owned\x07\x1b[2J\x9b31m"      # OSC retitle, clear screen, C1 CSI


def _latin1_env(root):
    """The environment of a terminal whose encoding is not UTF-8: ISO-8859-1
    where that locale exists (`localedef -i en_US -f ISO-8859-1
    en_US.ISO-8859-1`), else ASCII (the C locale with Python's UTF-8 mode
    and locale coercion off)."""
    env = environ(root)
    env.pop("PYTHONIOENCODING", None)
    try:
        locale.setlocale(locale.LC_ALL, "en_US.ISO-8859-1")
        env["LC_ALL"] = "en_US.ISO-8859-1"
    except locale.Error:
        env.update(LC_ALL="C", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0")
    finally:
        locale.setlocale(locale.LC_ALL, "")
    return env


def _run_in(env, *args):
    return subprocess.run([sys.executable, "-m", "hpc_health", *args], env=env,
                          capture_output=True, timeout=600)


def _hostile_store(root):
    """A run as an import could bring it: escapes in its check, reason,
    host and tags, a tag with a newline and a figure in a character
    latin-1 lacks; and a run dated 2099."""
    tcs = [case(f"Stream{HOSTILE}Triad", "triad", 35000, "MB/s"),
           case("IorBandwidth", None, None, "MiB/s", result="fail", fail_phase="sanity",
                fail_reason=f"bad → output {HOSTILE}\x00\x0b end")]
    write_run(store(root), "local", "20261120T020000Z", tcs, started="2026-11-20T02:00:00Z",
              meta={"tags": ["x\nlocal:20261121T020000Z  2026-11-21T02:00:00Z  exit 0"],
                    "hostname": f"node{HOSTILE}", "note": "a\rb"})
    write_run(store(root), "local", "20991231T000000Z",
              [case("StreamTriadScaling", "triad", 1.0, "MB/s")],
              started="2099-12-31T00:00:00Z")


def _no_raw_control(text):
    assert not [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) < 0xa0], \
        repr(text)


def test_the_escapers_keep_what_text_said_visibly():
    assert escape.one_line("a\nb\x1b[31m\x9b") == "a\\nb\\x1b[31m\\x9b"
    assert escape.lines("a\nb\x1b\tc") == "a\nb\\x1b\tc"
    assert escape.xml("ok\x00\x0b\x1b\n\t\ud800é") == "ok\\x00\\x0b\\x1b\n\t\\ud800é"


def test_stored_escapes_and_newlines_never_reach_the_terminal_or_forge_a_line(tmp_path):
    root = make_root(tmp_path, references=False)
    _hostile_store(root)
    res = hpc_health(root, "runs", "--site", "local")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("local:") for line in lines), lines
    assert "tags x\\nlocal:20261121T020000Z" in lines[0]
    _no_raw_control(res.stdout + res.stderr)
    res = hpc_health(root, "report", "--site", "local", "20261120T020000Z")
    assert res.returncode == 1, res.stderr
    assert "node\\x1b]0;owned\\x07\\x1b[2J\\x9b31m" in res.stdout
    assert "bad → output \\x1b]0;owned" in res.stdout
    _no_raw_control(res.stdout + res.stderr)
    res = hpc_health(root, "compare", "--site", "local", "20261120T020000Z", "20991231T000000Z")
    assert "Traceback" not in res.stderr, res.stderr
    _no_raw_control(res.stdout + res.stderr)
    res = hpc_health(root, "report", "--site", "local", "20261120T020000Z", "--markdown")
    assert "| IorBandwidth" in res.stdout and "\\x1b]0;owned" in res.stdout
    _no_raw_control(res.stdout)


def test_junit_parses_whatever_control_characters_a_stored_run_holds(tmp_path):
    root = make_root(tmp_path, references=False)
    _hostile_store(root)
    out = tmp_path / "j.xml"
    res = hpc_health(root, "report", "--site", "local", "last:2", "--junit", str(out))
    assert res.returncode == 1 and f"wrote {out}" in res.stderr, res.stderr
    suites = ET.parse(out).getroot().findall("testsuite")       # it parses
    (failed,) = [c for s in suites for c in s.iter("failure")]
    assert "bad → output \\x1b]0;owned\\x07" in failed.get("message")
    assert "\\x00" in failed.text
    (ahead,) = [p for s in suites for p in s.iter("property")]
    assert ahead.get("name") == "hpc-health.dated_in_the_future"
    assert suites[1].get("name") == "hpc-health local 20991231T000000Z"


def test_latest_is_the_run_last_finished_by_this_clock_and_a_future_one_is_named(tmp_path):
    parser = pytest.importorskip("prometheus_client.parser")
    root = make_root(tmp_path, references=False)
    _hostile_store(root)
    tonight = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() - 60))
    write_run(store(root), "local", tonight, [case("StreamTriadScaling", "triad", 35000, "MB/s")],
              started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 60)))
    res = hpc_health(root, "report", "--site", "local")
    assert res.stdout.startswith(f"run {tonight} "), res.stdout + res.stderr
    res = hpc_health(root, "report", "--site", "local", "--markdown")
    assert f"run `{tonight}`" in res.stdout and "IN THE FUTURE" not in res.stdout
    res = hpc_health(root, "runs", "--site", "local")
    (future,) = [line for line in res.stdout.splitlines() if "DATED IN THE FUTURE" in line]
    assert future.startswith("local:20991231T000000Z ") and "this machine's clock says" in future
    prom = tmp_path / "h.prom"
    res = hpc_health(root, "export", "--site", "local", "--prometheus", str(prom))
    assert res.returncode == 0 and f"run {tonight}," in res.stderr, res.stderr
    # Asked for by name, it is written, and named as such.
    res = hpc_health(root, "export", "--site", "local", "20991231T000000Z", "--prometheus",
                     str(prom))
    assert "DATED IN THE FUTURE" in res.stderr
    text = prom.read_text()
    assert text.startswith("# hpc-health: run 20991231T000000Z is DATED IN THE FUTURE")
    list(parser.text_string_to_metric_families(text))       # still parses
    res = hpc_health(root, "report", "--site", "local", "20991231T000000Z")
    assert "DATED IN THE FUTURE" in res.stdout.splitlines()[0]


def test_per_node_figures_are_one_prometheus_series_per_node(tmp_path):
    parser = pytest.importorskip("prometheus_client.parser")
    root = make_root(tmp_path, references=False)
    tcs = []
    for node, bw in (("n1", 35000), ("n2", 34000)):
        tc = case("StreamTriadScaling", "triad", bw, "MB/s")
        # What --distribute makes of a test: one copy per node.
        tc["display_name"] += f" /abcd %.part=default %.nid={node}"
        tc["unique_name"] += f"_{node}"
        tc["job_nodelist"] = [node]
        tcs.append(tc)
    write_run(store(root), "local", "20261120T020000Z", tcs, started="2026-11-20T02:00:00Z",
              meta={"per_node": True})
    prom = tmp_path / "h.prom"
    res = hpc_health(root, "export", "--site", "local", "--prometheus", str(prom))
    assert res.returncode == 0, res.stderr
    families = {f.name: f for f in parser.text_string_to_metric_families(prom.read_text())}
    values = {s.labels.get("node"): s.value
              for s in families["hpc_health_figure_bytes_per_second"].samples}
    assert values == {"n1": 35000e6, "n2": 34000e6}
    keys = [(s.name, tuple(sorted(s.labels.items())))
            for f in families.values() for s in f.samples]
    assert len(keys) == len(set(keys)), "duplicate series"


def test_a_latin1_or_ascii_terminal_reads_runs_holding_what_it_cannot_encode(tmp_path):
    root = make_root(tmp_path, references=False)
    _hostile_store(root)
    env = _latin1_env(root)
    for args in (("runs", "--site", "local"), ("report", "--site", "local", "last:2"),
                 ("report", "--site", "local", "--markdown")):
        res = _run_in(env, *args)
        assert b"Traceback" not in res.stderr and b"UnicodeEncodeError" not in res.stderr, \
            res.stderr.decode(errors="replace")
        assert res.returncode in (0, 1), res.stderr
    out = _run_in(env, "report", "--site", "local", "last:2").stdout
    if env["LC_ALL"] == "C":
        # Click takes an ASCII stdout for a misconfigured one and writes
        # UTF-8 to it: the arrow arrives whole, no escape needed.
        assert "→".encode() in out or b"\\u2192" in out, out
    else:
        assert b"\\u2192" in out, out


@pytest.mark.slow
def test_a_run_whose_check_timed_out_keeps_its_night_under_a_latin1_locale(tmp_path):
    root = barrier_root(tmp_path)
    env = _latin1_env(root)
    res = _run_in(env, "run", "--site", "local", "--", "-S", "BarrierLatency.time_limit=5s",
                  "-S", "BarrierLatency.iters=100000000")
    out, err = res.stdout.decode("latin-1"), res.stderr.decode("latin-1")
    assert res.returncode == 1, out + err
    assert "Traceback" not in err and "UnicodeEncodeError" not in err, err
    fail = [line for line in out.splitlines() if line.startswith("FAIL: BarrierLatency")]
    assert fail and "job timed out" in fail[0], out
    (run_dir,) = (store(root) / "runs" / "local").iterdir()
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["exit_code"] == 1
    for args in (("runs", "--site", "local"), ("report", "--site", "local")):
        res = _run_in(env, *args)
        assert res.returncode in (0, 1) and b"Traceback" not in res.stderr, res.stderr


@pytest.mark.slow
@pytest.mark.parametrize("form", ["python -m", "console script"])
def test_a_stop_signal_while_python_imports_the_command_prints_no_traceback(tmp_path, form):
    """A traceback through Python's own start-up (site, runpy and the
    standard library they import, before any line of the suite) is not
    ours to change: bench/startup_signal.py counts those."""
    from bench.startup_signal import classify
    root = make_root(tmp_path, references=False)
    env = environ(root)
    script = Path(sys.executable).with_name("hpc-health")
    if form == "console script" and not script.exists():
        pytest.skip(f"no console script beside {sys.executable}")
    cmd = [sys.executable, "-m", "hpc_health"] if form == "python -m" else [str(script)]
    codes = []
    for i in range(16):
        sig = (signal.SIGINT, signal.SIGTERM)[i % 2]
        proc = subprocess.Popen([*cmd, "runs", "--site", "local"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(0.01 * (i // 2))         # 0 to 0.07 s: while Python imports
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        kind = classify(err)
        assert kind != "ours", err
        if kind != "quiet":
            codes.append("python's start-up")
            continue
        # Killed by the signal before Python set its handler, or 128 + it.
        assert proc.returncode in (-sig, 128 + sig), (sig, proc.returncode, err)
        codes.append(proc.returncode)
    assert {130, 143} & set(codes), codes       # some fell inside the imports



def test_a_stop_while_click_parses_the_command_line_exits_128_plus_the_signal(tmp_path):
    """CI at 84f848b: a SIGINT that came after the imports but before the
    command's own handling of a stop made click say "Aborted!" and exit 1,
    the code of a failing night.  Here the signal comes while click builds
    the command's context, every time."""
    root = make_root(tmp_path, references=False)
    code = ("import os, signal, time, hpc_health.cli.main as m\n"
            "make = m.cli.make_context\n"
            "def slow(*a, **k):\n"
            "    os.kill(os.getpid(), signal.SIGINT); time.sleep(2)\n"
            "    return make(*a, **k)\n"
            "m.cli.make_context = slow\n"
            "import sys; sys.argv = ['hpc-health', 'runs', '--site', 'local']\n"
            "m.main()\n")
    res = subprocess.run([sys.executable, "-c", code], env=environ(root), capture_output=True,
                         timeout=60)
    assert res.returncode == 130 and b"Aborted" not in res.stderr, (res.returncode, res.stderr)


def test_a_run_dated_in_the_future_does_not_hide_tonights_drift(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from test_drift_nightly import LAT_KEY, LATENCY, TRIAD, TRIAD_KEY, _store

    from hpc_health.run import session
    quiet = TRIAD[:15]
    values = quiet + [v * 0.9 for v in quiet[:9]]   # -10 % from night 16 on
    store_dir = _store(tmp_path, monkeypatch,
                       [{TRIAD_KEY: v, LAT_KEY: lat} for v, lat in zip(values, LATENCY)])
    tonight = sorted(p.name for p in (store_dir / "runs" / "local").iterdir())[-1]
    write_run(store_dir, "local", "20991231T000000Z", [case(*TRIAD_KEY[:2], 1.0, "MB/s")],
              started="20991231T000000Z")
    found, _ = session._across_nights(SimpleNamespace(name="local", settings={}), None,
                                      tonight)
    assert [(d.trend.check, d.trend.variable) for d in found] == [TRIAD_KEY[:2]]


def test_history_all_scans_the_nights_a_future_run_would_hide(tmp_path, monkeypatch):
    from test_drift_nightly import LAT_KEY, LATENCY, TRIAD, TRIAD_KEY, _store
    quiet = TRIAD[:15]
    values = quiet + [v * 0.9 for v in quiet[:9]]   # -10 % from night 16 on
    store_dir = _store(tmp_path, monkeypatch,
                       [{TRIAD_KEY: v, LAT_KEY: lat} for v, lat in zip(values, LATENCY)])
    write_run(store_dir, "local", "20991231T000000Z", [case(*TRIAD_KEY[:2], 1.0, "MB/s")],
              started="20991231T000000Z")
    root = make_root(tmp_path, references=False)
    res = subprocess.run([sys.executable, "-m", "hpc_health", "history", "--site", "local",
                          "--all"], capture_output=True, text=True, timeout=120,
                         env=dict(environ(root), HPC_HEALTH_STORE=str(store_dir)))
    assert res.returncode == 1, res.stdout + res.stderr
    assert res.stdout.startswith("StreamTriadScaling triad on local:default: DEGRADED since")
