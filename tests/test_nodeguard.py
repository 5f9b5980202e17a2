"""Acting on a per-node run's findings: the reason Slurm keeps, and the
guards (hpc_health.judge.nodeguard), as plain functions on plain values."""

import json

from store_fixtures import case, series

from hpc_health.judge import nodeguard, verdicts
from hpc_health.judge.nodeguard import DRAIN, KEEP, RESUME, Finding, NodeState
from hpc_health.model import results
from hpc_health.model.results import Measurement
from hpc_health.run import slurm

TRIAD = series("stream_triad_1t")


def _finding(node, change=-0.38, rounds_named=1, rounds=1, check="StreamBandwidth"):
    return Finding(node, "s:p", check, "Triad", change, 4, 4, rounds_named, rounds)


def _in_service(*nodes):
    return {n: NodeState(n, False) for n in nodes}


# --- the reason --------------------------------------------------------------

def test_the_reason_says_check_figure_and_change_against_the_peers_and_the_run():
    reason = slurm.drain_reason(_finding("n2"), "20261127T030012Z")
    assert reason == "hpc-health: StreamBandwidth Triad -38% vs peers (run 20261127T030012Z)"
    assert reason.startswith(slurm.PREFIX)
    slower = slurm.drain_reason(_finding("n2", 10.66, 3, 3, "HaloExchange"), "R", more=1)
    assert slower == "hpc-health: HaloExchange Triad +1066% vs peers in 3/3 rounds, +1 check (run R)"


def test_the_reason_holds_no_character_slurm_or_a_shell_trips_over_and_stays_short():
    f = Finding("n", "s:p", 'Check"; rm -rf /=\n', "var`$(x)'\\", -0.5, 1, 1)
    reason = slurm.drain_reason(f, "R" * 300)
    assert len(reason) <= slurm.MAX_REASON and reason.endswith("...")
    assert not set(reason) & set("\"'`$\\=\n\t|&<>")
    assert reason.startswith("hpc-health: Check; rm -rf / var(x) -50% vs peers")


def test_the_printed_command_is_the_one_run_with_the_reason_quoted_for_a_shell():
    import shlex
    cmd = slurm.drain_command("node02", "hpc-health: X y -38% vs peers (run R)")
    assert cmd == ["scontrol", "update", "NodeName=node02", "State=DRAIN",
                   "Reason=hpc-health: X y -38% vs peers (run R)"]
    assert shlex.split(shlex.join(cmd)) == cmd


# --- the share of a partition -------------------------------------------------

def test_the_share_is_one_node_or_ten_per_cent_whichever_is_more():
    assert [nodeguard.share_limit(n) for n in (1, 2, 9, 10, 19, 20, 128)] == \
        [1, 1, 1, 1, 1, 2, 12]
    assert nodeguard.share_limit(10, 0.5) == 5


def test_only_the_worst_nodes_within_the_share_are_drained():
    found = [_finding("n1", -0.25), _finding("n2", -0.60), _finding("n3", -0.40)]
    plan = nodeguard.plan_drains(found, 10, _in_service(*(f"n{i}" for i in range(10))))
    assert [(d.node, d.action) for d in plan] == [("n2", DRAIN), ("n3", KEEP), ("n1", KEEP)]
    assert "at most 1 at once" in plan[1].why


def test_nodes_hpc_health_holds_drained_already_count_against_the_share():
    states = {**_in_service("n1", "n3"),
              "n2": NodeState("n2", True, "hpc-health: X y -50% vs peers (run R)", ours=True)}
    plan = nodeguard.plan_drains([_finding("n1")], 3, states)
    assert plan[0].action == KEEP and "1 of the partition's 3 nodes" in plan[0].why
    # Someone else's drain is not hpc-health's share.
    states["n2"] = NodeState("n2", True, "admin: DIMM", ours=False)
    assert nodeguard.plan_drains([_finding("n1")], 3, states)[0].action == DRAIN


# --- rounds, a stopped run, a partition broadly worse, someone else's drain ----

def test_a_node_named_in_one_round_of_several_is_not_drained():
    plan = nodeguard.plan_drains([_finding("n2", rounds_named=1, rounds=3)], 2,
                                 _in_service("n1", "n2"))
    assert plan[0].action == KEEP and plan[0].why.startswith("named in 1 of 3 rounds")
    plan = nodeguard.plan_drains([_finding("n2", rounds_named=2, rounds=3)], 2,
                                 _in_service("n1", "n2"))
    assert plan[0].action == DRAIN
    # One round asked: its one round is the evidence.
    assert nodeguard.plan_drains([_finding("n2")], 2, _in_service("n1", "n2"))[0].action == DRAIN


def test_nothing_is_drained_after_a_stopped_run_or_when_the_peers_are_broadly_worse():
    found, states = [_finding("n2")], _in_service("n1", "n2")
    stopped = nodeguard.plan_drains(found, 2, states, interrupted=True)
    broad = nodeguard.plan_drains(found, 2, states, broadly_worse=True)
    assert [d.action for d in stopped + broad] == [KEEP, KEEP]
    assert "stopped" in stopped[0].why and "BROADLY WORSE" in broad[0].why


def test_a_node_someone_else_drained_keeps_their_reason_and_is_never_resumed():
    states = {"n1": NodeState("n1", False),
              "n2": NodeState("n2", True, "admin: fan replaced, burn-in", ours=False)}
    plan = nodeguard.plan_drains([_finding("n2")], 2, states)
    assert plan[0].action == KEEP and "admin: fan replaced, burn-in" in plan[0].why
    resumes = nodeguard.plan_resumes({"n1", "n2"}, states)
    assert [(d.node, d.action) for d in resumes] == [("n2", KEEP)]


def test_only_hpc_healths_drained_nodes_found_healthy_are_resumed():
    ours = "hpc-health: X y -50% vs peers (run R)"
    states = {"n1": NodeState("n1", False), "n2": NodeState("n2", True, ours, ours=True),
              "n3": NodeState("n3", True, ours, ours=True)}
    plan = nodeguard.plan_resumes({"n1", "n2"}, states)
    assert [(d.node, d.action) for d in plan] == [("n2", RESUME), ("n3", KEEP)]
    assert [d.action for d in nodeguard.plan_resumes({"n1", "n2"}, states, interrupted=True)] \
        == [KEEP, KEEP]
    # Healthy beside a sick peer only (n1 was OUTLIER): not judged healthy.
    plan = nodeguard.plan_resumes({"n2"}, states)
    assert plan[0].action == KEEP and "no healthy peer" in plan[0].why


# --- the evidence, from a judged per-node run -----------------------------------

def _m(node, samples, var="Triad", test="StreamBandwidth"):
    return Measurement(test=test, check=test, system="s", partition="p", environ="e",
                       variable=var, value=sorted(samples)[len(samples) // 2], unit="MB/s",
                       node=node, samples=list(samples), better="higher")


def test_a_finding_is_the_worst_figure_signed_as_it_moved():
    ms = [_m("n1", TRIAD[:15]), _m("n2", TRIAD[15:]), _m("n3", [v * 0.5 for v in TRIAD[:15]]),
          _m("n1", TRIAD[:15], "Copy"), _m("n2", TRIAD[15:], "Copy"),
          _m("n3", [v * 0.7 for v in TRIAD[:15]], "Copy")]
    vs = verdicts.node_outliers([verdicts.Verdict(m, "PASS") for m in ms])
    (f,) = nodeguard.findings(vs)
    assert (f.node, f.check, f.variable, f.figures, f.of) == ("n3", "StreamBandwidth", "Triad", 2, 2)
    assert -0.55 < f.change < -0.45
    assert nodeguard.healthy_nodes(vs) == {"n1", "n2"}


def _copy(node, samples, tmp_path, rnd):
    out = tmp_path / f"r{rnd}-{node}"
    out.mkdir()
    (out / results.SAMPLES_FILE).write_text(json.dumps({"time_1MiB": samples}))
    tc = case("HaloExchange", "time_1MiB", sorted(samples)[len(samples) // 2], "us",
              params={"dims": 1}, outputdir=str(out))
    tc["display_name"] += f" /abcd %.part=default %.nid={node}"
    tc["unique_name"] += f"_{node}"
    return tc


def test_rounds_named_counts_the_rounds_that_name_a_node_on_their_own(tmp_path):
    # node02 slow in rounds 1 and 2; in round 0 node01 was disturbed.
    rounds = [[_copy("node01", [3000, 3100, 2900], tmp_path, 0),
               _copy("node02", [1000, 1010, 990], tmp_path, 0)]]
    for r in (1, 2):
        rounds.append([_copy("node01", [1000, 1010, 990], tmp_path, r),
                       _copy("node02", [2500, 2550, 2480], tmp_path, r)])
    report = {"session_info": {"cmdline": "reframe --distribute=all --reruns=2 -r"},
              "runs": [{"run_index": i, "testcases": tcs} for i, tcs in enumerate(rounds)]}
    counts = nodeguard.rounds_named(report, 0.5)
    assert counts == {("local:default", "node02", "HaloExchange"): 2,
                      ("local:default", "node01", "HaloExchange"): 1}
    # One round: nothing to count.
    assert nodeguard.rounds_named({"session_info": {}, "runs": report["runs"][:1]}, 0.5) == {}


# --- node-check: a gross fault against the node's own record --------------------

def test_a_gross_fault_is_two_and_a_half_times_worse_than_the_nodes_own_usual():
    from hpc_health.judge import grossfault
    better = {"bw": "higher", "t": "lower"}
    record = {"bw": [10000.0, 12000.0, 11000.0], "t": [0.05, 0.06, 0.05]}
    assert grossfault.judge({"bw": 6000.0, "t": 0.11}, better, record) == []   # an episode
    (g,) = grossfault.judge({"bw": 9000.0, "t": 0.5}, better, record)
    assert (g.name, g.usual, g.records) == ("t", 0.05, 3) and g.times == 10.0
    assert [x.name for x in grossfault.judge({"bw": 1100.0, "t": 0.5}, better, record)] == \
        ["bw", "t"]
    # Too few records: nothing is judged yet.
    assert grossfault.judge({"t": 5.0}, better, {"t": [0.05, 0.05]}) == []


def test_the_record_keeps_the_last_healthy_checks():
    from hpc_health.judge import grossfault
    rec = {"t": [float(i) for i in range(grossfault.KEEP)]}
    after = grossfault.recorded({"t": 99.0, "bw": 1.0}, rec)
    assert after["t"][-1] == 99.0 and len(after["t"]) == grossfault.KEEP and after["bw"] == [1.0]


def test_the_site_opts_in_for_the_nightly_run():
    from types import SimpleNamespace

    from hpc_health.run import nodecare
    site = SimpleNamespace(settings={"per_node_drain": True}, partitions={"b": {}})
    assert nodecare.wanted(site, False, False) == (True, False)
    assert nodecare.wanted(SimpleNamespace(settings={}), False, True) == (False, True)
    assert nodecare.slurm_partition(SimpleNamespace(partitions={"b": {"slurm_partition": "x"}}),
                                    "b") == "x"
    assert nodecare.slurm_partition(site, "b") == "b"
