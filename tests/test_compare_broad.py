"""compare across a step that made every figure 10 % worse: no figure SAME,
the printed interval the one decided on, and the figures together BROADLY
WORSE -- on stored runs made of the recorded 30-run series of this kind of
machine (each of 132 figures one of the nine series, rotated)."""

import json

import pytest
from sandbox import hpc_health, make_root, store
from store_fixtures import case, series, write_run

SERIES = {"ior_tmp_fsync_write": "MiB/s", "ior_tmp_read": "MiB/s", "ior_tmp_write": "MiB/s",
          "osu_allreduce_8B_np2": "us", "osu_bw_4MiB": "MB/s", "osu_latency_4KiB": "us",
          "osu_latency_8B": "us", "stream_triad_1t": "MB/s", "stream_triad_2t": "MB/s"}
FIGURES = 132
STEP = 1.10


def _figure(j):
    name = sorted(SERIES)[j % len(SERIES)]
    values = series(name)
    turn = (7 * j) % len(values)
    return name, SERIES[name], values[turn:] + values[:turn]


def _write(root, runs_a, runs_b, step):
    """Side A then side B, *runs_a* and *runs_b* runs, each of as many
    samples as the 30 recorded values allow (at most 3); B *step* worse."""
    per_run = min(3, 30 // (runs_a + runs_b))
    ids = []
    for k in range(runs_a + runs_b):
        worse = step if k >= runs_a else 1.0
        tcs, samples = [], {}
        for j in range(FIGURES):
            _name, unit, values = _figure(j)
            vals = values[k * per_run:(k + 1) * per_run]
            vals = [v * worse if unit == "us" else v / worse for v in vals]
            var = f"f{j}"
            tcs.append(case("Many", var, sorted(vals)[len(vals) // 2], unit, params={"j": j}))
            samples[j] = {var: vals}
        rid = f"20261101T{k // 60:02d}{k % 60:02d}00Z"
        write_run(store(root), "local", rid, tcs, started=rid, samples=samples)
        ids.append(rid)
    return ids[:runs_a], ids[runs_a:]


def _compare(tmp_path, runs_a, runs_b, step):
    root = make_root(tmp_path, references=False)
    a, b = _write(root, runs_a, runs_b, step)
    res = hpc_health(root, "compare", "--site", "local", f"{a[0]}..{a[-1]}",
                     f"{b[0]}..{b[-1]}", "--json")
    assert res.returncode in (0, 1), res.stdout + res.stderr
    return res.returncode, json.loads(res.stdout)


@pytest.mark.parametrize("runs", [10, 5, 3])
def test_a_ten_percent_step_on_every_figure_is_broadly_worse_and_never_same(tmp_path, runs):
    code, data = _compare(tmp_path, runs, runs, STEP)
    words = [r["word"] for r in data["rows"]]
    assert len(words) == FIGURES and "SAME" not in words
    broad = data["broad"]
    assert broad["word"] == "BROADLY WORSE", broad
    assert broad["worse"] > 0.8 * FIGURES
    assert broad["low"] > 0.05 and broad["low"] < broad["change"] < broad["high"]
    assert code == 1
    for r in data["rows"]:
        # The interval printed is the decision's: it does not contain 0
        # exactly when the figure is REGRESSED.
        excludes = r["low"] > 0 or r["high"] < 0
        assert (r["word"] == "REGRESSED") == (excludes and abs(r["worse_by"]) >= 0.03), r


def test_the_same_machine_twice_is_no_broad_shift(tmp_path):
    code, data = _compare(tmp_path, 5, 5, 1.0)
    assert data["broad"]["word"] == "NO BROAD SHIFT", data["broad"]
    assert code == 0 and "REGRESSED" not in [r["word"] for r in data["rows"]]


def test_same_means_the_interval_lies_within_the_margin(tmp_path):
    _, data = _compare(tmp_path, 5, 5, 1.0)
    same = [r for r in data["rows"] if r["word"] == "SAME"]
    for r in same:
        assert -0.10 <= r["low"] and r["high"] <= 0.10, r
    for r in data["rows"]:
        if r["word"] == "INCONCLUSIVE":
            assert r["low"] < -0.10 or r["high"] > 0.10 or r["low"] > 0 or r["high"] < 0, r
