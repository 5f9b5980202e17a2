"""DRIFTING in the nightly run, on stored series made from recorded noise:
the figure that stayed 10 % worse is named with the run it began at and the
stack change beside it; a clean recorded series, and a figure tonight's run
did not measure, are not."""

import json
import os
from pathlib import Path

import numpy as np
from store_fixtures import case, series, write_run

from hpc_health.judge import drift
from hpc_health.run.console import drift_lines, next_step
from hpc_health.stats import stepscan
from hpc_health.store import index

TRIAD = series("stream_triad_1t")          # MB/s, higher is better
LATENCY = series("osu_latency_4KiB")       # us, lower is better


def _store(tmp_path, monkeypatch, nights, stacks=None, only_first=0):
    """One run a night; night n holds every figure of ``nights[n]``
    (name -> value); *stacks*: night -> stack hash from then on."""
    store = tmp_path / "store"
    monkeypatch.setenv("HPC_HEALTH_STORE", str(store))
    stack = "s1"
    for n, figures in enumerate(nights):
        stack = (stacks or {}).get(n, stack)
        rid = f"2026{10 + n // 28:02d}{n % 28 + 1:02d}T020000Z"
        cases = [case(test, var, value, unit) for (test, var, unit), value in figures.items()]
        write_run(store, "local", rid, cases, started=rid, stack=stack)
    return store


def _drifting(tonight=None):
    with index.open_index() as idx:
        runs = idx.listing("local").runs
        return drift.drifting(idx, runs, None, tonight or runs[-1].run_id), runs


TRIAD_KEY = ("StreamTriadScaling", "triad", "MB/s")
LAT_KEY = ("OsuPointToPoint", "latency_4KiB", "us")


def test_a_ten_percent_step_is_drifting_since_its_night_with_the_stack_change(
        tmp_path, monkeypatch):
    quiet = TRIAD[:15]                        # one episode: quiet within itself
    values = quiet + [v * 0.9 for v in quiet[:9]]   # -10 % from night 16 on
    nights = [{TRIAD_KEY: v, LAT_KEY: lat} for v, lat in zip(values, LATENCY)]
    _store(tmp_path, monkeypatch, nights, stacks={15: "s2"})
    found, runs = _drifting()
    (d,) = found                              # the latency series is clean
    assert (d.trend.check, d.trend.variable) == ("StreamTriadScaling", "triad")
    began = [r.run_id for r in runs].index(d.run)
    assert abs(began - 15) <= 1
    assert -0.14 < d.change < -0.06 and 0 < d.half_width < 0.1
    assert d.nights == len(runs) - began
    assert d.stack_changed_at == runs[15].run_id
    (head, line) = drift_lines(found, drift.DRIFT_NIGHTS)
    assert line.startswith("DRIFTING  StreamTriadScaling  triad on local:default: since run "
                           f"{d.run}")
    assert f"stack changed at run {runs[15].run_id}" in line and " % \u00b1 " in line

    step = next_step(_Site, [], _NoBaseline(), Path("/x") / runs[-1].run_id, drifts=found)
    assert "--check 'StreamTriadScaling' --var triad" in step
    # The re-baseline captures the drifting figure's check alone, from the
    # runs since: every other reference keeps the five nights it rests on.
    assert "re-baseline its check from the runs since: " in step
    assert step.endswith(" reference capture --site local --check 'StreamTriadScaling' --from "
                         f"{d.run}..{runs[-1].run_id} --write"), step
    few = _NoBaseline()
    few.needed = d.nights + 1
    step = next_step(_Site, [], few, Path("/x") / runs[-1].run_id, drifts=found)
    assert f"from the runs since, once there are {d.nights + 1} ({d.nights} so far): " in step


def test_a_clean_recorded_month_and_a_figure_not_measured_tonight_are_not_drifting(
        tmp_path, monkeypatch):
    nights = [{TRIAD_KEY: v, LAT_KEY: lat} for v, lat in zip(TRIAD, LATENCY)]
    _store(tmp_path, monkeypatch, nights)
    assert _drifting()[0] == []

    # The step is there, but tonight's run measured only the latency.
    other = tmp_path / "other"
    stepped = TRIAD[:15] + [v * 0.9 for v in TRIAD[:9]]
    nights = [{TRIAD_KEY: v, LAT_KEY: lat} for v, lat in zip(stepped, LATENCY)]
    nights.append({LAT_KEY: LATENCY[-1]})
    _store(other, monkeypatch, nights)
    assert _drifting()[0] == []


def test_only_the_last_nights_are_read(tmp_path, monkeypatch):
    """A step older than the window is the level the window starts at: the
    same series is drifting when the window reaches back before it."""
    quiet = (TRIAD[:15] * 6)[:drift.DRIFT_NIGHTS + 10]
    values = quiet[:8] + [v * 0.85 for v in quiet[8:]]    # worse from night 9 on
    _store(tmp_path, monkeypatch, [{TRIAD_KEY: v} for v in values])
    assert _drifting()[0] == []
    monkeypatch.setattr(drift, "DRIFT_NIGHTS", len(values))
    (d,), runs = _drifting()
    # Eight nights before the step are few to place it by: found, late.
    assert 8 <= [r.run_id for r in runs].index(d.run) <= 15 and d.change < -0.06


class _NoBaseline:
    complete = collecting = False
    cases = ()
    needed = 5


def test_a_drift_test_that_fails_costs_the_test_not_the_night(tmp_path, monkeypatch, capsys):
    from hpc_health.run import session
    _store(tmp_path, monkeypatch, [{TRIAD_KEY: v} for v in TRIAD[:3]])
    # A damaged index is rebuilt (the index's own tests); anything else that
    # goes wrong reading across runs must not lose the judged night.
    (tmp_path / "store" / "index.sqlite").write_text("not a database")
    assert session._across_nights(_Site, None, "20261003T020000Z") == ([], None)
    assert "is damaged" in capsys.readouterr().err

    def broken(*args):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(drift, "across_nights", broken)
    assert session._across_nights(_Site, None, "20261003T020000Z") == ([], None)
    err = capsys.readouterr().err
    assert "the drift test over the stored runs could not run (OSError" in err
    assert "No space left on device" in err and "tonight's verdicts stand" in err


class _Site:
    name = "local"
    settings: dict = {}


def test_report_shows_what_the_run_found_across_nights(tmp_path):
    from sandbox import hpc_health, make_root
    root = make_root(tmp_path, references=False)
    found = [{"check": "StreamTriadScaling", "variable": "triad", "partition": "local:default",
              "since": "20261016T020000Z", "change": -0.096, "runs": 9,
              "stack_changed_at": None}]
    write_run(root.parent / "store", "local", "20261024T020000Z",
              [case("StreamTriadScaling", "triad", 30000.0, "MB/s")], started="x",
              meta={"exit_code": 3, "drifting": found})
    res = hpc_health(root, "report", "--site", "local")
    assert res.returncode == 0, res.stderr
    assert ("DRIFTING  StreamTriadScaling  triad on local:default: since run 20261016T020000Z: "
            "-9.6 %, 9 runs (found by this run)") in res.stdout


QUIET_KEY = ("OsuPointToPoint", "bw_4MiB", "MB/s")


def test_a_five_percent_step_on_a_quiet_figure_is_drifting(tmp_path, monkeypatch):
    """20 nights of a figure quiet to 1.5 % (seeded), then 5 % worse: by the
    tenth night after the step the nightly run names it, at its night."""
    rng = np.random.default_rng(5)
    values = list(10000 * np.exp(rng.normal(0.0, 0.015, 30)))
    values[20:] = [v * 0.95 for v in values[20:]]
    _store(tmp_path, monkeypatch, [{QUIET_KEY: v} for v in values])
    (d,), runs = _drifting()
    assert abs([r.run_id for r in runs].index(d.run) - 20) <= 1
    assert -0.08 < d.change < -0.03


def test_no_night_of_a_long_clean_series_is_drifting(tmp_path, monkeypatch):
    """200 clean nights (3 %, seeded): no window of the nightly test finds a
    step, and the stored series' last night is not DRIFTING."""
    rng = np.random.default_rng(6)
    values = list(10000 * np.exp(rng.normal(0.0, 0.03, 200)))
    for night in range(6, 201):
        window = values[max(0, night - drift.DRIFT_NIGHTS):night]
        assert stepscan.scan(window, "higher") is None, night
    _store(tmp_path, monkeypatch, [{QUIET_KEY: v} for v in values])
    assert _drifting()[0] == []


def _busy(run_dir):
    """Mark a stored night as measured on a busy node, as its verdicts say it."""
    from hpc_health.jobside.nodeload import BUSY
    (run_dir / "verdicts.json").write_text(json.dumps([{
        "check": "StreamTriadScaling", "partition": "local:default", "environ": "gnu-mpi",
        "variable": "triad", "verdict": "PASS",
        "reason": f"-50.0 %, within -82 %; {BUSY}: other processes used 1.7 cores"}]))


def test_nights_on_a_busy_node_neither_make_a_drift_nor_hide_one(tmp_path, monkeypatch):
    """Three nights beside a memory hog (their verdicts say the node was busy)
    then a clean night still a fifth down (the walk's night after the hogs):
    one clean night is not DRIFTING for the hog's nights, as it was before;
    a step on clean nights with a busy night inside it is still DRIFTING
    since its first night, counting the clean nights."""
    quiet = TRIAD[:15]                        # one episode: quiet within itself
    values = quiet + [v * 0.5 for v in quiet[:3]] + [quiet[3] * 0.8]
    store = _store(tmp_path / "hog", monkeypatch, [{TRIAD_KEY: v} for v in values])
    found, runs = _drifting()
    assert found, "the hog's nights alone drift when not known to be busy"
    for run in runs[15:18]:
        _busy(store / "runs" / "local" / run.run_id)
    assert _drifting()[0] == []

    values = quiet + [v * 0.85 for v in quiet[:6]]
    store = _store(tmp_path / "step", monkeypatch, [{TRIAD_KEY: v} for v in values])
    _busy(store / "runs" / "local" / sorted(os.listdir(store / "runs" / "local"))[17])
    (d,), runs = _drifting()
    began = [r.run_id for r in runs].index(d.run)
    assert abs(began - 15) <= 1 and d.nights == len(runs) - began - 1


def _two_level_refs(tmp_path, worse, better):
    """A reference at the worse of two levels of the 1-thread Triad, as
    capture writes one for a node seen in two states."""
    from hpc_health.store import references
    path = tmp_path / "local.yaml"
    path.write_text(f"""
StreamTriadScaling:
  $index: [$partition, $environ]
  local:default:
    gnu-mpi:
      triad: [{worse}, -0.1, {better / worse * 1.1 - 1:.4f}, MB/s]
$provenance:
  StreamTriadScaling:
    local:default/gnu-mpi/triad:
      captured: '2026-09-01T00:00:00Z'
      night_spread: 0.03
      night_df: 3
      levels: [{worse}, {better}]
      level_runs: 4
""")
    return references.load(path)


def test_a_node_in_its_other_state_is_not_drifting_a_step_beyond_its_worse_level_is(
        tmp_path, monkeypatch):
    """Walk 5's STREAM: a reference at the worse of two levels (48 and
    77 GB/s); a fortnight at the better level then nights at the worse one
    is the node's other state, not a step (as it was, exit 3 on a clean
    night); a step of -15 % below the worse level still is, every fourth
    night at the better level."""
    scale = [v / float(np.median(TRIAD)) for v in TRIAD]
    refs = _two_level_refs(tmp_path, 48000.0, 77000.0)
    values = [77000.0 * f for f in scale[:15]] + [48000.0 * f for f in scale[15:24]]
    _store(tmp_path / "states", monkeypatch, [{TRIAD_KEY: v} for v in values])
    with index.open_index() as idx:
        runs = idx.listing("local").runs
        assert drift.drifting(idx, runs, None, runs[-1].run_id), "a step without the levels"
        assert drift.drifting(idx, runs, refs, runs[-1].run_id) == []

    values = [48000.0 * f for f in scale[:15]] + [40800.0 * f for f in scale[:9]]
    values = [v if k % 4 else 77000.0 * scale[k] for k, v in enumerate(values)]
    _store(tmp_path / "step", monkeypatch, [{TRIAD_KEY: v} for v in values])
    with index.open_index() as idx:
        runs = idx.listing("local").runs
        (d,) = drift.drifting(idx, runs, refs, runs[-1].run_id)
        assert -0.2 < d.change < -0.1
