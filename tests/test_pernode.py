"""Per-node outlier detection on recorded series (one series per node)."""

from store_fixtures import series

from hpc_health.judge import pernode
from hpc_health.model.results import Measurement

TRIAD = series("stream_triad_1t")
LAT = series("osu_latency_4KiB")


def _m(node, samples, var="triad", unit="MB/s"):
    return Measurement(test="StreamTriad", check="StreamTriad", system="s", partition="p",
                       environ="e", variable=var, value=sorted(samples)[len(samples) // 2],
                       unit=unit, nodes=[node], samples=list(samples),
                       better="lower" if unit == "us" else "higher")


def test_two_identical_nodes_name_none():
    # The same machine measured twice, in two different noise episodes
    # (the halves' medians are 12.5 % apart): not a node problem.
    assert pernode.outliers([_m("n1", TRIAD[:15]), _m("n2", TRIAD[15:])]) == []


def test_two_nodes_the_slow_one_and_only_it_is_named():
    found = pernode.outliers([_m("n1", TRIAD[:15]), _m("n2", [v * 0.7 for v in TRIAD[15:]])])
    assert [(f[1], round(f[3], 2) >= 0.2) for f in found] == [("n2", True)]


def test_latency_worse_is_higher():
    found = pernode.outliers([_m(n, LAT[i * 10:(i + 1) * 10], "latency_4KiB", "us")
                              for i, n in enumerate(["a", "b"])] +
                             [_m("c", [v * 1.5 for v in LAT[20:]], "latency_4KiB", "us")])
    assert [f[1] for f in found] == ["c"]
    # Faster than its peers is not a health problem, nor does one fast node
    # make its peers look slow.
    found = pernode.outliers([_m("a", LAT[:10], "latency_4KiB", "us"),
                              _m("b", [v * 0.5 for v in LAT[10:20]], "latency_4KiB", "us"),
                              _m("c", LAT[20:], "latency_4KiB", "us")])
    assert found == []


def test_small_difference_with_tight_spread_is_not_an_alarm():
    quiet = [100.0, 100.1, 99.9, 100.0, 100.05]
    found = pernode.outliers([_m("a", quiet), _m("b", [v * 0.85 for v in quiet])])
    assert found == []      # 15 % slower: z is huge, but below MIN_CHANGE


def test_single_node_and_single_sample_groups():
    assert pernode.outliers([_m("a", TRIAD)]) == []
    found = pernode.outliers([_m("a", [40000.0]), _m("b", [40100.0]), _m("c", [20000.0])])
    assert [f[1] for f in found] == ["c"]
