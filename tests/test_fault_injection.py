"""bench/fault_injection: schedule, calibration step, verdict bookkeeping and
the results table (pure Python), the fault modules' interface, the table
command, and the removal of what a killed run left behind (real namespaces,
cgroups, loop devices when run as root)."""

import contextlib
import json
import math
import re

import numpy as np
import pytest

from bench.fault_injection import analysis, measure, results_file, run, system, workloads
from bench.fault_injection.faults import FAULTS, Fault
from bench.fault_injection.workloads import Metric, Workload
from hpc_health import stats

BENCH = run.HERE


def test_schedule_alternates_clean_and_faulty_when_counts_match():
    order = analysis.schedule(n_clean=4, trials=2)
    assert order.count("clean") == 4
    assert order.count("10%") == 2 and order.count("25%") == 2
    # no two faulty nights next to each other when there are enough clean ones
    for a, b in zip(order, order[1:]):
        assert not (a != "clean" and b != "clean")


def test_schedule_spreads_fewer_clean_nights_and_keeps_all_nights():
    order = analysis.schedule(n_clean=30, trials=20)
    assert len(order) == 70 and order.count("clean") == 30
    # clean nights are spread over the whole run, not bunched at one end
    idx = [i for i, k in enumerate(order) if k == "clean"]
    assert idx[0] < 5 and idx[-1] > 60
    # both sizes appear in both halves (no size measured in one block)
    half = order[:35]
    assert "10%" in half and "25%" in half and "10%" in order[35:] and "25%" in order[35:]


def test_next_strength_linear_then_fitted():
    # one point, slope 1: scale by target / effect
    assert analysis.next_strength([(100.0, 0.05)], 0.10, 1, 1e6) == pytest.approx(200.0)
    # two points on effect = 1e-3 * s**2: the fitted power finds the target
    pts = [(5.0, 1e-3 * 25), (8.0, 1e-3 * 64)]
    s = analysis.next_strength(pts, 0.25, 1, 1e6)
    assert 1e-3 * s ** 2 == pytest.approx(0.25, rel=1e-6)


def test_next_strength_no_effect_doubles_and_bounds_stop():
    assert analysis.next_strength([(10.0, 0.0)], 0.1, 1, 100) == 20.0
    assert analysis.next_strength([(0.95, 0.1)], 0.25, 0.01, 0.95) is None


def test_worse_by_directions():
    assert analysis.worse_by(110, 100, stats.LOWER) == pytest.approx(0.10)
    assert analysis.worse_by(75, 100, stats.HIGHER) == pytest.approx(0.25)
    assert analysis.from_log_worse(analysis.log_worse(75, 100, stats.HIGHER),
                                   stats.HIGHER) == pytest.approx(0.25)


def _night(kind, values, refs, metrics, phase="trial"):
    n = {"phase": phase, "kind": kind, "values": values}
    if phase == "trial":
        n["verdicts"] = analysis.judge(refs, metrics, values)
    return n


def test_judge_and_summary_on_synthetic_nights():
    rng = np.random.default_rng(1)
    metrics = [Metric("bw", "MB/s", stats.HIGHER), Metric("lat", "us", stats.LOWER)]

    def draw(bw_scale=1.0, lat_scale=1.0):
        return {"bw": list(1000 * bw_scale * np.exp(rng.normal(0, 0.01, 3))),
                "lat": list(2.0 * lat_scale * np.exp(rng.normal(0, 0.01, 3)))}

    base = [_night("clean", draw(), None, metrics, "baseline") for _ in range(20)]
    refs = {m.name: analysis.reference_for(base, m) for m in metrics}
    nights = base[:]
    for kind in analysis.schedule(10, 5):
        scale = {"clean": 1.0, "10%": 0.9, "25%": 0.75}[kind]
        nights.append(_night(kind, draw(bw_scale=scale), refs, metrics))
    fault = {"name": "demo", "status": "ok", "primary": "bw", "samples": 3,
             "metrics": [m.__dict__ for m in metrics], "nights": nights,
             "calibration": {"25%": {"knob": {"x": 1.5}}}}
    rows, fa = analysis.summarize_fault(fault)
    by = {(r["size"], r["metric"]): r for r in rows}
    big = by[("25%", "bw")]
    assert big["trials"] == 5 and big["detection_rate"] == 1.0
    assert big["induced"] == pytest.approx(0.25, abs=0.02)
    assert big["target"] == "met"
    # the 5 % episode floor makes every MDC larger than 10 %: not claimed
    assert by[("10%", "bw")]["target"].startswith("not claimed")
    assert fa["clean_nights"] == 10 and fa["verdicts"] == 20 and fa["degraded"] == 0
    table = analysis.render_table({"faults": {"demo": fault,
                                              "gone": {"status": "skipped",
                                                       "reason": "no workload"}}})
    # a record without ``estimator`` predates it: its nights were judged by medians
    assert re.search(r"\| demo \| bw \| 3 \| median \| 25% \| 2[45]\.\d % \| x=1\.5 \| 5 \| 5/5",
                     table)
    assert "Not measured: `gone`: no workload." in table
    assert "10 clean nights" in table and "NOT met" in table   # < 30 clean nights
    summary = analysis.render_summary({"faults": {"demo": fault}}, {"demo": "a demo fault"})
    rows = [line for line in summary.splitlines() if line.startswith("| a demo")]
    # the 25 % size of the primary metric only
    assert len(rows) == 1 and re.match(r"\| a demo fault: `bw` \| 3 \| median \| 2[45] % \| 5/5 \|",
                                       rows[0])
    assert "0 `DEGRADED` in 20 verdicts over 10 clean runs" in summary


def test_table_command_prints_the_markdown_of_a_results_file_and_writes_nothing(
        tmp_path, capsys):
    doc = results_file.load(BENCH / "results.json")
    copy = tmp_path / "results.json"
    copy.write_text(json.dumps(doc))
    readme = (BENCH / "README.md").read_text()
    assert run.main(["--table", str(copy)]) == 0
    printed = capsys.readouterr().out
    assert printed == analysis.render_table(doc) + "\n"
    assert printed.startswith("| fault | metric |")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]
    assert (BENCH / "README.md").read_text() == readme
    assert run.main(["--table", str(copy), "--summary"]) == 0
    assert "| memory-bandwidth hog: `stream_triad_1t` |" in capsys.readouterr().out


def test_results_md_is_the_table_of_the_committed_results():
    """RESULTS.md is generated by the table command, never typed in; the
    README links it and the data, and holds no table of its own."""
    table = analysis.render_table(results_file.load(BENCH / "results.json"))
    assert (BENCH / "RESULTS.md").read_text() == table + "\n"
    readme = (BENCH / "README.md").read_text()
    assert "(RESULTS.md)" in readme and "(results.json)" in readme
    assert "<!--" not in readme and "| memory | stream_triad_1t |" not in readme


def test_every_fault_module_implements_the_interface():
    assert set(FAULTS) == {"memory", "network", "network-link", "latency", "io", "slow-rank",
                           "slow-rank-quota", "latency-barrier"}
    for name, cls in FAULTS.items():
        assert issubclass(cls, Fault) and cls.name == name
        for method in ("candidates", "initial_strength", "setting", "apply"):
            assert getattr(cls, method) is not getattr(Fault, method), (name, method)
        described = cls({}, None).describe()
        assert described["name"] == name and described["label"] and described["what"]


def test_the_latency_faults_delay_lives_only_inside_apply():
    slow = FAULTS["slow-rank"]({"pmpi_delay": "/x/libpmpi_delay.so"}, None)
    assert slow.clean_env() == {"LD_PRELOAD": "/x/libpmpi_delay.so", "FI_DELAY_NS": "0",
                                "FI_DELAY_RANK": "1"}
    with slow.apply(1234.4) as (env, _):
        assert env["FI_DELAY_NS"] == "1234" and env["FI_DELAY_RANK"] == "1"
    assert slow.setting(1234.4) == {"delay_ns": 1234, "rank": 1}
    assert "FI_DELAY_RANK" not in FAULTS["latency"]({"pmpi_delay": "l"}, None).clean_env()


def test_dd_rate_and_size_names():
    from bench.fault_injection.workloads import _dd_rate, _size_name
    err = ("512+0 records in\n512+0 records out\n"
           "536870912 bytes (537 MB, 512 MiB) copied, 0.25 s, 2.1 GB/s\n")
    assert _dd_rate(err) == pytest.approx(536870912 / 0.25 / 1e6)
    assert _size_name(8) == "8B" and _size_name(4096) == "4KiB" and _size_name(1 << 20) == "1MiB"
    assert math.isnan(workloads.median([]))


def test_fit_strength_averages_noisy_tries():
    # effect = 0.01 * s**0.8 with +-20 % noise on every try
    pts = [(s, 0.01 * s ** 0.8 * f) for s, f in ((10, 1.2), (20, 0.8), (40, 1.1), (30, 0.9))]
    s = analysis.fit_strength(pts, 0.12, 1, 1e6)
    assert 0.01 * s ** 0.8 == pytest.approx(0.12, rel=0.15)
    # far outside the tried strengths the fit is not trusted
    assert analysis.fit_strength(pts, 2.0, 1, 1e6) is None
    # no trend (or the wrong one): no fit
    assert analysis.fit_strength([(10, 0.2), (20, 0.1)], 0.25, 1, 1e6) is None
    assert analysis.fit_strength([(10, 0.0), (20, 0.0)], 0.25, 1, 1e6) is None


def test_append_keeps_the_other_faults_and_replaces_the_one_run_again(tmp_path):
    out = tmp_path / "results.json"
    first = results_file.Recorder(out, {"started": "a", "argv": ["--samples", "3"]})
    for name in ("io", "memory"):
        first.fault(name)["nights"].append({"phase": "baseline", "values": {"x": [1.0]}})
    first.save()
    again = results_file.Recorder(out, {"started": "b"}, append=True)
    again.fault("memory")["samples"] = 10
    again.save()
    doc = json.loads(out.read_text())
    assert doc["faults"]["io"]["nights"] == [{"phase": "baseline", "values": {"x": [1.0]}}]
    assert doc["faults"]["memory"] == {"name": "memory", "status": "running", "nights": [],
                                       "samples": 10}
    assert doc["meta"]["earlier_runs"][0]["argv"] == ["--samples", "3"]


def test_small_size_not_trialled_when_the_baseline_promises_no_more():
    rng = np.random.default_rng(3)
    metric = Metric("lat", "us", stats.LOWER)
    base = [_night("clean", {"lat": list(2.0 * np.exp(rng.normal(0, 0.15, 5)))}, None,
                   [metric], "baseline") for _ in range(20)]
    ref = analysis.reference_for(base, metric)
    promised = analysis.promised_mdc(ref, stats.LOWER, 5)
    # the MDC a real night reports is the one promised before it was run
    night = _night("clean", {"lat": [2.1] * 5}, {"lat": ref}, [metric])
    assert night["verdicts"]["lat"]["mdc"] == pytest.approx(promised)
    run, skip = analysis.sizes_to_trial(promised)
    assert promised > 0.10 and list(run) == ["25%"] and skip == {"10%": promised}
    assert analysis.sizes_to_trial(0.08) == (dict(analysis.SIZES), {})
    # the skipped size still has its row, and it claims nothing
    nights = base + [_night(k, {"lat": [2.6] * 5 if k == "25%" else [2.0] * 5},
                            {"lat": ref}, [metric])
                     for k in analysis.schedule(4, 2, tuple(run))]
    fault = {"name": "lat", "status": "ok", "primary": "lat", "samples": 5,
             "metrics": [metric.__dict__], "nights": nights, "not_trialled": skip}
    rows, _ = analysis.summarize_fault(fault)
    assert [r["size"] for r in rows] == ["10%", "25%"]
    assert rows[0]["trials"] == 0 and "not trialled" in rows[0]["target"]
    assert "| 10% | – | – | 0 | 0/0 = – |" in analysis.render_table({"faults": {"lat": fault}})
    # a size skipped on a pilot's promise, where the final reference promises
    # less than 10 %, is a gap in the table, not a claim avoided
    fault["not_trialled"] = {"10%": 0.08}
    rows, _ = analysis.summarize_fault(fault)
    assert rows[0]["target"].startswith("NOT met: not trialled")


# ---- what a killed run leaves behind ------------------------------------------

def _dead_pid():
    import subprocess
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_clean_stale_removes_a_dead_runs_objects_and_nothing_else(tmp_path):
    import os
    import shutil
    import subprocess
    dead, live = _dead_pid(), os.getpid()
    scratch, images = tmp_path / "scratch", tmp_path / "images"
    images.mkdir()
    made = {}
    for pid in (dead, live):
        d = scratch / f"hpc-health-fi-{pid}-abc"
        d.mkdir(parents=True)
        (images / f"fi-loop-{pid}.img").write_bytes(b"")
        made[pid] = [("scratch", str(d)), ("image", str(images / f"fi-loop-{pid}.img"))]
    (scratch / "hpc-health-fi-notapid").mkdir()     # not named by us: never touched
    root = os.geteuid() == 0
    if root and shutil.which("ip"):
        for pid in (dead, live):
            subprocess.run(["ip", "netns", "add", f"hhfi-{pid}"], check=True)
            made[pid].append(("netns", f"hhfi-{pid}"))
    if root and system.cgroup_v1_available("blkio"):
        for pid in (dead, live):
            cg = system.CGROUP_ROOT / "blkio" / f"hpc-health-fi-{pid}"
            cg.mkdir()
            made[pid].append(("cgroup", str(cg)))
    loop = None
    if root and shutil.which("losetup"):
        img = scratch / f"hpc-health-fi-{dead}-abc" / f"fi-loop-{dead}.img"
        img.write_bytes(b"\0" * (1 << 20))
        got = subprocess.run(["losetup", "--find", "--show", str(img)],
                             capture_output=True, text=True)
        if got.returncode == 0:
            loop = got.stdout.strip()
            made[dead] += [("loop", loop), ("image", str(img))]
    try:
        stale = system.find_stale([scratch], [images])
        assert sorted(stale) == sorted(made[dead])
        assert system.clean_stale(stale, log=lambda msg: None) == []
        for kind, what in made[dead]:
            if kind in ("scratch", "image", "cgroup"):
                assert not os.path.exists(what), what
        if loop:
            assert loop not in system._loop_devices()
        assert system.find_stale([scratch], [images]) == []
        for kind, what in made[live]:
            assert (what in system._netns_list() if kind == "netns"
                    else os.path.exists(what)), what
        assert (scratch / "hpc-health-fi-notapid").is_dir()
    finally:
        for kind, what in made[live] + made[dead]:
            if kind == "netns":
                subprocess.run(["ip", "netns", "delete", what], capture_output=True)
            elif kind == "cgroup" and os.path.isdir(what):
                os.rmdir(what)
            elif kind == "loop":
                subprocess.run(["losetup", "-d", what], capture_output=True)


def test_rejudge_recomputes_verdicts_from_the_recorded_nights_only():
    """Nights judged by an older rule (a stale verdict and reference planted
    here) are judged again from their own baseline nights."""
    rng = np.random.default_rng(2)
    metrics = [Metric("bw", "MB/s", stats.HIGHER)]
    draw = lambda scale=1.0: {"bw": list(1000 * scale * np.exp(rng.normal(0, 0.02, 8)))}  # noqa: E731
    base = [_night("clean", draw(), None, metrics, "baseline") for _ in range(20)]
    refs = {"bw": analysis.reference_for(base, metrics[0])}
    nights = base + [_night(k, draw(0.7 if k == "25%" else 1.0), refs, metrics)
                     for k in analysis.schedule(6, 6, sizes={"25%": 0.25})]
    for n in nights[20:]:
        n["verdicts"]["bw"]["verdict"] = "PASS"          # what an older rule said
    fault = {"name": "demo", "status": "ok", "primary": "bw", "samples": 8,
             "metrics": [m.__dict__ for m in metrics], "nights": nights,
             "reference": {"bw": {"value": 1.0}}, "not_trialled": {"10%": 9.9}}
    doc = {"meta": {}, "faults": {"demo": fault}}
    again = analysis.rejudge(doc)
    f = again["faults"]["demo"]
    verdicts = [(n["kind"], n["verdicts"]["bw"]["verdict"]) for n in f["nights"][20:]]
    assert all(v == ("DEGRADED" if k == "25%" else "PASS") for k, v in verdicts)
    assert f["reference"]["bw"]["value"] == pytest.approx(1000, rel=0.02)
    assert f["not_trialled"]["10%"] == pytest.approx(f["promised_mdc"])
    assert f["promised_mdc"] < 1
    assert again["meta"]["rejudged"]["estimator"] == stats.ESTIMATOR
    assert f["estimator"] == stats.ESTIMATOR and "estimator" not in fault
    assert fault["nights"][20]["verdicts"]["bw"]["verdict"] == "PASS"   # input untouched


def test_split_samples():
    assert measure.split_samples(40, 1) == [40]
    assert measure.split_samples(40, 8) == [5] * 8
    assert measure.split_samples(10, 4) == [3, 3, 2, 2]
    with pytest.raises(ValueError):
        measure.split_samples(3, 4)


def _tick_fault():
    """A fault whose every sample is the next tick of a clock, so a night's
    samples show when they were taken."""
    clock = iter(range(1, 10 ** 6))

    class Ticks(Workload):
        name, primary = "ticks", "t"
        metrics = [Metric("t", "s", stats.LOWER)]

        def night(self, k, renv, extra_env=None):
            return {"t": [float(next(clock)) for _ in range(k)]}

    class Demo(Fault):
        name, label = "demo", "demo"
        s_min, s_max = 0.0, 1.0

        def candidates(self):
            yield Ticks()

        def initial_strength(self, target):
            return target

        def setting(self, strength):
            return {"s": strength}

        @contextlib.contextmanager
        def apply(self, strength):
            yield {}, {}

    return Demo


def _measure(fault_cls, opts, path):
    rec = results_file.Recorder(path, {"options": {}})
    budget = measure.QuietBudget(opts.foreign_cpu, opts.max_wait)
    measure.FaultMeasurement(fault_cls({}, opts), opts, rec, budget).run()
    return rec.doc["faults"]["demo"]


def test_rounds_spread_every_night_over_the_block(tmp_path):
    """With --rounds R each round visits every night in turn: a night's
    samples come from R moments spread over the whole block, and every
    night is judged once its last round is in."""
    opts = run.parse_args(["--samples", "4", "--rounds", "2", "--baseline-runs", "3",
                           "--trials", "2", "--clean-runs", "2", "--calibration-steps", "1",
                           "--calibration-pairs", "1", "--max-wait", "0", "--reruns", "0",
                           "--baseline", "before"])
    fault = _measure(_tick_fault(), opts, tmp_path / "r.json")
    assert fault["status"] == "ok" and fault["rounds"] == 2 and "in_progress" not in fault
    assert fault["baseline_placement"] == "before"
    base = [n["values"]["t"] for n in fault["nights"] if n["phase"] == "baseline"]
    # ticks 1-4 are the warm-up; round 1 takes 5-10 (2 per night), round 2 11-16
    assert base == [[5, 6, 11, 12], [7, 8, 13, 14], [9, 10, 15, 16]]
    trials = [n for n in fault["nights"] if n["phase"] == "trial"]
    assert len(trials) == 4 and all("verdicts" in n and n["span_s"] >= 0 for n in trials)
    first = trials[0]["values"]["t"]
    assert first[2] - first[1] == 2 * 4 - 1      # the other 3 nights' round-1 samples between
    calib = [n["values"]["t"] for n in fault["nights"] if n["phase"] == "calibration"]
    assert all(v == list(range(int(v[0]), int(v[0]) + 4)) for v in calib)   # in one go


def test_interleaved_baseline_is_taken_among_the_nights_it_judges(tmp_path):
    """--baseline interleaved: a pilot sets the scale, then the reference's
    nights are spread through the trial block (their samples interleaved
    with the trial nights'), and the trial nights are judged against it
    once the block is done."""
    opts = run.parse_args(["--samples", "2", "--rounds", "2", "--baseline-runs", "4",
                           "--pilot-runs", "2", "--trials", "2", "--clean-runs", "2",
                           "--calibration-steps", "1", "--calibration-pairs", "1",
                           "--max-wait", "0", "--reruns", "0"])
    fault = _measure(_tick_fault(), opts, tmp_path / "r.json")
    assert fault["status"] == "ok" and fault["baseline_placement"] == "interleaved"
    nights = fault["nights"]
    assert [n["phase"] for n in nights[:2]] == ["pilot", "pilot"]
    assert "pilot_reference" in fault and "reference" in fault
    base = [n["values"]["t"] for n in nights if n["phase"] == "baseline"]
    trials = [n for n in nights if n["phase"] == "trial"]
    assert len(base) == 4 and len(trials) == 4   # the ~10 % size is not claimable
    first_trial = min(n["values"]["t"][0] for n in trials)
    last_trial = max(n["values"]["t"][-1] for n in trials)
    # baseline nights start after trial nights have, and finish before they all have
    assert any(b[0] > first_trial for b in base) and any(b[-1] < last_trial for b in base)
    # the reference is the baseline's, not the pilot's, and it judged every trial night
    pilot_value = fault["pilot_reference"]["t"]["value"]
    assert fault["reference"]["t"]["value"] > pilot_value
    assert all(n["verdicts"]["t"]["verdict"] for n in trials)

