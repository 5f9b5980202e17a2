"""Rounds (``--reruns``) of a per-node run: samples pooled over the rounds,
a failure in any round is a failure; retries keep their own meaning."""

import json

import pytest
from store_fixtures import case

from hpc_health import stats
from hpc_health.judge import verdicts
from hpc_health.model import results
from hpc_health.run import command
from hpc_health.site import sites
from hpc_health.store import capture

ROUNDS_CMD = "reframe -C x --system s --distribute=all --reruns=2 -r"
RETRY_CMD = "reframe -C x --system s --max-retries=2 -r"


def _copy(node, samples, tmp_path, rnd, result="pass"):
    out = tmp_path / f"r{rnd}-{node}"
    out.mkdir()
    (out / results.SAMPLES_FILE).write_text(json.dumps({"time_1MiB": samples}))
    tc = case("HaloExchange", "time_1MiB", sorted(samples)[len(samples) // 2], "us",
              params={"dims": 1}, outputdir=str(out), result=result,
              fail_phase=None if result == "pass" else "sanity",
              fail_reason=None if result == "pass" else "halo crashed")
    # What --distribute makes of a test: one copy per node.
    tc["display_name"] += f" /abcd %.part=default %.nid={node}"
    tc["unique_name"] += f"_{node}"
    return tc


def _report(cmdline, rounds):
    return {"session_info": {"cmdline": cmdline},
            "runs": [{"run_index": i, "testcases": tcs} for i, tcs in enumerate(rounds)]}


def test_rounds_pool_samples_and_outvote_one_disturbed_round(tmp_path):
    # node01 is hit by an episode in round 0 only; node02 is slow in all.
    rounds = [[_copy("node01", [3000, 3100, 2900], tmp_path, 0),
               _copy("node02", [2900, 3000, 3100], tmp_path, 0)]]
    for r in (1, 2):
        rounds.append([_copy("node01", [1000, 1010, 990], tmp_path, r),
                       _copy("node02", [2000, 2050, 1980], tmp_path, r)])
    ms = results.measurements(_report(ROUNDS_CMD, rounds))
    by_node = {m.node: m for m in ms}
    assert by_node["node01"].rounds == 3
    assert sorted(by_node["node01"].samples) == sorted([3000, 3100, 2900] + [1000, 1010, 990] * 2)
    # The figure shown is the one the verdict judges: the location of every
    # round's samples (it used to be the median of the rounds' figures).
    assert by_node["node01"].value == pytest.approx(stats.location(by_node["node01"].samples))
    vs = verdicts.node_outliers(verdicts.judge_all(ms, None), min_change=0.5)
    named = {v.measurement.node for v in vs if v.verdict == verdicts.OUTLIER}
    assert named == {"node02"}


def test_one_disturbed_copy_without_rounds_would_name_the_wrong_node(tmp_path):
    # The same disturbance in a single-round run: node01 looks slow.  This is
    # why local-slurm runs --per-node in rounds.
    rounds = [[_copy("node01", [3000, 3100, 2900], tmp_path, 0),
               _copy("node02", [1000, 1010, 990], tmp_path, 0)]]
    ms = results.measurements(_report("reframe -r", rounds))
    vs = verdicts.node_outliers(verdicts.judge_all(ms, None), min_change=0.5)
    assert {v.measurement.node for v in vs if v.verdict == verdicts.OUTLIER} == {"node01"}


def test_a_failure_in_any_round_is_a_failure(tmp_path):
    rounds = [[_copy("node01", [1000, 1010], tmp_path, 0)],
              [_copy("node01", [1000], tmp_path, 1, result="fail")],
              [_copy("node01", [1000, 1020], tmp_path, 2)]]
    (m,) = results.measurements(_report(ROUNDS_CMD, rounds))
    assert m.result == "fail" and m.fail_reason == "halo crashed"
    assert verdicts.exit_code(verdicts.judge_all([m], None)) == 1


def test_a_retry_that_passes_replaces_the_failed_attempt(tmp_path):
    rounds = [[_copy("node01", [1000], tmp_path, 0, result="fail")],
              [_copy("node01", [1000, 1020], tmp_path, 1)]]
    (m,) = results.measurements(_report(RETRY_CMD, rounds))
    assert m.result == "pass" and sorted(m.samples) == [1000, 1020]


def test_per_node_runs_take_the_sites_rounds():
    site = sites.load("local-slurm")
    assert command.rounds_for(site, per_node=True) == site.settings["per_node_rounds"] > 1
    assert command.rounds_for(site, per_node=False) == 1
    assert command.rounds_for(site, per_node=True, rounds=5) == 5
    cmd = command.reframe_command(site, "batch", per_node=True, rounds=3,
                                 prefix="/tmp/p", report="/tmp/r.json")
    assert "--reruns=2" in cmd and "--distribute=all" in cmd
    assert "--reruns" not in " ".join(command.reframe_command(site, "batch", prefix="/tmp/p",
                                                             report="/tmp/r.json"))


def test_samples_of_a_case_that_failed_reframes_bounds_come_from_its_stage(tmp_path):
    # ReFrame fails the performance stage of a figure outside its bounds and
    # never fills the output directory; the stage directory keeps the samples.
    tc = _copy("node01", [1000, 1010, 990], tmp_path, 0, result="fail")
    tc.update(fail_phase="performance", stagedir=tc["outputdir"],
              outputdir=str(tmp_path / "empty-output"))
    rounds = [[tc], [_copy("node01", [1200, 1210, 1190], tmp_path, 1)]]
    (m,) = results.measurements(_report(ROUNDS_CMD, rounds))
    assert sorted(m.samples) == [990, 1000, 1010, 1190, 1200, 1210]
    (v,) = verdicts.judge_all([m], None)
    assert v.verdict != verdicts.FAIL


def test_a_skipped_round_is_not_a_failed_one(tmp_path):
    skipped = _copy("node01", [1000], tmp_path, 0)
    skipped.update(result="skip", perfvalues={})
    rounds = [[skipped], [_copy("node01", [1000, 1010, 990], tmp_path, 1)]]
    (tc,) = results.testcases(_report(ROUNDS_CMD, rounds))
    assert tc["result"] == "pass"


def test_other_runs_and_captures_take_the_sites_rounds():
    site = sites.load("local")
    assert command.rounds_for(site, per_node=False) == 1
    site.settings["rounds"] = 4
    assert command.rounds_for(site, per_node=False) == 4
    assert command.rounds_for(site, per_node=False, rounds=2) == 2
    assert command.rounds_for(site, per_node=True) == 1      # per_node_rounds unset


def test_references_record_their_rounds_and_a_run_with_fewer_is_told(tmp_path):
    key = ("HaloExchange", ("$partition", "$environ"), ("s:p", "e"), "time_1MiB")
    found = {key: {"unit": "us", "better": "lower", "runs": ["a", "b", "c"],
                   "samples_by_run": [[10, 11, 10.5], [10.2, 10.8], [10.1, 10.7]]}}
    assert "rounds" not in capture.propose(found, rounds=[1, 1, 1])[key]["provenance"]
    prov = capture.propose(found, rounds=[4, 4, 4])[key]["provenance"]
    assert prov["rounds"] == 4
    (m,) = results.measurements(_report("reframe -r", [[_copy("node01", [10.4, 10.6], tmp_path, 0)]]))
    assert m.rounds == 1
    assert "captured with 4 rounds, this run had 1" in verdicts._rounds_note(m, prov)
    m.rounds = 4
    assert verdicts._rounds_note(m, prov) == ""
