"""The night as a whole: many figures a little worse tonight, judged against
the site's own recent nights (hpc_health.judge.broad), on stored nights made
from the nine recorded noise series, one figure each."""

from pathlib import Path

import yaml
from store_fixtures import BETTER, RECORDINGS, case, recording, write_run

from hpc_health.judge import broad, drift
from hpc_health.run.console import broad_line, next_step
from hpc_health.store import index, references

FIGURES = {name: recording(name) for name in RECORDINGS}


def _night(n, factor=None):
    """Night *n* of every recording; *factor* (name -> fraction worse)."""
    cases = []
    for name, (values, unit) in FIGURES.items():
        v = values[n % 30]
        worse = (factor or {}).get(name, 0.0)
        v = v * (1 + worse) if BETTER[unit] == "lower" else v / (1 + worse)
        cases.append(case(f"Check_{name}", "value", v, unit))
    return cases


def _store(tmp_path, monkeypatch, tonight_factor):
    store = tmp_path / "store"
    monkeypatch.setenv("HPC_HEALTH_STORE", str(store))
    for n in range(30):
        rid = f"202611{n + 1:02d}T020000Z"
        write_run(store, "local", rid, _night(n), started=rid)
    write_run(store, "local", "20261201T020000Z", _night(7, tonight_factor),
              started="20261201T020000Z")
    refs = {f"Check_{name}": {"local:default": {"value": [
        sorted(values[:10])[5], -0.5, 0.5, unit]}} for name, (values, unit) in FIGURES.items()}
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump(refs))
    return references.load(path)


def _whole(refs):
    with index.open_index() as idx:
        runs = idx.listing("local").runs
        return drift.across_nights(idx, runs, refs, runs[-1].run_id)[1]


def test_every_figure_eight_percent_worse_tonight_is_broadly_worse(tmp_path, monkeypatch):
    refs = _store(tmp_path, monkeypatch, {name: 0.08 for name in FIGURES})
    whole = _whole(refs)
    assert whole.word == broad.BROADLY_WORSE and whole.figures == 9 and whole.nights == 30
    assert whole.worse >= 7
    assert 0.05 < whole.beyond < 0.12
    line = broad_line(whole)
    assert line.startswith(f"BROADLY WORSE tonight: {whole.worse} of 9 figures worse")
    assert "than usual" in line
    assert whole.previous == "20261130T020000Z"        # the night before tonight
    step = next_step(_Site, [], _NoBaseline(), Path("/x") / "20261201T020000Z", whole=whole)
    assert step.startswith("Next: tonight's figures are broadly worse than on the recent nights")
    assert " compare --site local 20261130T020000Z 20261201T020000Z; if it stays" in step


class _Site:
    name = "local"


class _NoBaseline:
    complete = collecting = False
    cases = ()


def test_an_ordinary_night_and_one_figure_far_worse_are_not_broad(tmp_path, monkeypatch):
    whole = _whole(_store(tmp_path / "a", monkeypatch, {}))
    assert whole is not None and whole.word is None
    # One figure 60 % worse: that figure's verdict's business, not the night's.
    whole = _whole(_store(tmp_path / "b", monkeypatch, {"osu_bw_4MiB": 0.6}))
    assert whole.word is None


def test_too_few_nights_or_no_reference_give_no_broad_verdict(tmp_path, monkeypatch):
    store = tmp_path / "store"
    monkeypatch.setenv("HPC_HEALTH_STORE", str(store))
    for n in range(5):
        rid = f"202611{n + 1:02d}T020000Z"
        write_run(store, "local", rid, _night(n, {name: 0.2 * (n == 4) for name in FIGURES}),
                  started=rid)
    refs = _store(tmp_path / "x", monkeypatch, {})   # references of the nine figures
    monkeypatch.setenv("HPC_HEALTH_STORE", str(store))
    assert _whole(refs) is None                       # 4 earlier nights
    assert _whole(None) is None                       # nothing to be against


def test_next_names_the_failed_figure_that_moved_most():
    from hpc_health.judge.verdicts import Verdict
    from hpc_health.model.results import Measurement

    def failed(test, variable, deviation):
        m = Measurement(test=test, check=test, system="local", partition="default",
                        environ="gnu-mpi", variable=variable, value=1.0)
        return Verdict(m, "DEGRADED", deviation=deviation)
    night = [failed("BarrierLatency", "mpi_init", 0.06), failed("OsuPointToPoint", "bw_4MiB", -0.6),
             failed("OsuCollective", "latency_8B", 0.9)]
    step = next_step(_Site, night, _NoBaseline(), Path("/x") / "20261201T020000Z")
    # A bandwidth at 40 % (log 0.92) moved further than a latency at 190 % (log 0.64).
    assert step.endswith("--check 'OsuPointToPoint' --var bw_4MiB"), step


def test_one_checks_many_figures_moving_together_are_not_the_night(tmp_path, monkeypatch):
    """Walk 4's clean night 7 after capture (2026-11-28) was BROADLY WORSE,
    89 of 123 figures worse: the host had moved the two vCPUs, and the halo
    check's sixty times moved as one.  Twelve figures of one check 30 %
    worse tonight, beside nine checks as usual: one check's episode.  The
    same twelve beside the nine all 8 % worse: the night."""
    lat, unit = FIGURES["osu_latency_4KiB"]

    def many(n, worse):
        tc = case("Many", "t0", lat[n % 30] * (1 + worse), unit)
        for k in range(1, 12):      # twelve figures of one test case
            tc["perfvalues"][f"local:default:t{k}"] = tc["perfvalues"]["local:default:t0"]
            tc["figure_better"][f"t{k}"] = tc["figure_better"]["t0"]
        return [tc]

    def with_many(tmp, others):
        store = tmp / "store"
        monkeypatch.setenv("HPC_HEALTH_STORE", str(store))
        for n in range(30):
            rid = f"202611{n + 1:02d}T020000Z"
            write_run(store, "local", rid, _night(n) + many(n, 0.0), started=rid)
        write_run(store, "local", "20261201T020000Z", _night(7, others) + many(7, 0.3),
                  started="20261201T020000Z")
        refs = {f"Check_{name}": {"local:default": {"value": [
            sorted(values[:10])[5], -0.5, 0.5, unit]}} for name, (values, unit) in FIGURES.items()}
        refs["Many"] = {"local:default": {f"t{k}": [sorted(lat[:10])[5], -0.5, 0.5, unit]
                                          for k in range(12)}}
        (tmp / "local.yaml").write_text(yaml.safe_dump(refs))
        return _whole(references.load(tmp / "local.yaml"))

    one = with_many(tmp_path / "a", {})
    assert one.figures == 21 and one.worse >= 12 and one.word is None
    every = with_many(tmp_path / "b", {name: 0.08 for name in FIGURES})
    assert every.word == broad.BROADLY_WORSE


def test_nights_on_a_busy_node_do_not_widen_the_usual_night(tmp_path, monkeypatch):
    """Walk 4's three hog nights (every figure of the night judged 'node
    busy') widened the recent nights' spread of the index from 5 % to 20 %:
    a machine a tenth worse on every figure the next week would have passed.
    Five busy nights 40 % worse among the thirty, then a night 8 % worse on
    every figure: BROADLY WORSE, as without the busy nights; the same
    nights not known to be busy hide it."""
    import json

    from hpc_health.jobside.nodeload import BUSY
    store = tmp_path / "store"
    monkeypatch.setenv("HPC_HEALTH_STORE", str(store))
    hogged = range(22, 27)
    for n in range(30):
        rid = f"202611{n + 1:02d}T020000Z"
        d = write_run(store, "local", rid,
                      _night(n, {name: 0.4 for name in FIGURES} if n in hogged else None),
                      started=rid)
        if n in hogged:
            (d / "verdicts.json").write_text(json.dumps([
                {"check": f"Check_{name}", "partition": "local:default", "environ": "gnu-mpi",
                 "variable": "value", "verdict": "DEGRADED",
                 "reason": f"+40 %; {BUSY}: other processes used 1.9 cores"}
                for name in FIGURES]))
    write_run(store, "local", "20261201T020000Z", _night(7, {name: 0.08 for name in FIGURES}),
              started="20261201T020000Z")
    refs = {f"Check_{name}": {"local:default": {"value": [
        sorted(values[:10])[5], -0.5, 0.5, unit]}} for name, (values, unit) in FIGURES.items()}
    (tmp_path / "local.yaml").write_text(yaml.safe_dump(refs))
    refs = references.load(tmp_path / "local.yaml")
    whole = _whole(refs)
    assert whole.word == broad.BROADLY_WORSE and whole.nights == 25, whole
    for n in hogged:
        (store / "runs" / "local" / f"202611{n + 1:02d}T020000Z" / "verdicts.json").unlink()
    hidden = _whole(refs)
    assert hidden.nights == 30 and hidden.word is None, hidden
