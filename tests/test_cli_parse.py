"""`hpc-health parse`: figures of a real output as JSON; exit 2 on bad input."""

import json
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).parent / "data"


def _parse(kind, path):
    return subprocess.run([sys.executable, "-m", "hpc_health", "parse", kind, str(path)],
                          capture_output=True, text=True, timeout=120)


def test_stream_figures_as_json():
    res = _parse("stream", DATA / "stream" / "stream_c_omp2.txt")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["validated"] is True and out["kernels"]["triad"]["best_rate_mbs"] > 0


def test_osu_figures_as_json():
    res = _parse("osu", DATA / "osu" / "osu_latency_np2.txt")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["kind"] == "latency" and out["rows"][0]["size"] == 1


def test_truncated_output_exits_2_naming_the_file(tmp_path):
    text = (DATA / "stream" / "stream_c_omp2.txt").read_text()
    cut = tmp_path / "cut.txt"
    cut.write_text(text[: len(text) // 2])
    res = _parse("stream", cut)
    assert res.returncode == 2
    assert str(cut) in res.stderr and "not a complete stream output" in res.stderr
    assert res.stdout == ""


def test_failed_run_and_missing_file_exit_2(tmp_path):
    res = _parse("osu", DATA / "osu" / "osu_latency_np1_FAIL.txt")
    assert res.returncode == 2 and "osu" in res.stderr
    res = _parse("ior", tmp_path / "nope.txt")
    assert res.returncode == 2 and "nope.txt" in res.stderr


def test_unknown_kind_is_a_usage_error():
    res = _parse("hpl", DATA / "stream" / "stream_c_omp2.txt")
    assert res.returncode == 2 and "Invalid value" in res.stderr
