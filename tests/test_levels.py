"""Two levels in a baseline (hpc_health.stats.levels), on samples of
newcomer walk 3's baseline (2026-11-28, this 2-vCPU guest), and what the
capture says of a figure whose samples fall at two."""

import dataclasses

import numpy as np
import pytest
from sandbox import hpc_health, make_root
from store_fixtures import case, write_run

from hpc_health.judge import baselines, gating
from hpc_health.judge.nights import Night
from hpc_health.stats.levels import MIN_GAP, split_as, two_levels, worse_launches
from hpc_health.store import capture, references

# StreamBandwidth Triad, MB/s: the host ran the two vCPUs on one core for
# runs 1-3 and the end of run 5, on two for run 4 and the start of run 5.
TRIAD = [[48744.6, 49168.9, 50358.3, 49768.1, 49690.1], [48704.3, 49275.1, 48839.2, 49383.2, 49004.2],
         [48141.2, 48664.2, 48758.5, 48427.3, 48490.4], [76488.4, 75413.2, 73857.4, 75750.3, 75303.7],
         [75609.8, 76134.5, 48289.3, 47563.2, 48421.8]]
# The 2-thread Triad of the same runs: at the high level in run 4 alone.
TRIAD_2T = [[49210.0, 49009.8, 48768.2, 48832.2, 48892.2], [48733.5, 48927.2, 48762.6, 48698.8, 49340.5],
            [48530.3, 48358.9, 48491.8, 48588.2, 48658.6], [77143.6, 75810.7, 73847.8, 74481.0, 77258.5],
            [47314.6, 47464.2, 47381.5, 47287.2, 47988.7]]
# osu_latency 8 B, us: 0.12 on one core, 0.36 on two.
LAT_8B = [[0.12, 0.12, 0.12], [0.12, 0.11, 0.13], [0.11, 0.11, 0.12], [0.36, 0.36, 0.37],
          [0.36, 0.36, 0.36]]
# osu_put_latency 8 B, us: one printed step (0.01 us) apart, not two states.
PUT_8B = [[0.08, 0.08, 0.08], [0.08, 0.07, 0.08], [0.08, 0.08, 0.08], [0.07, 0.07, 0.07],
          [0.08, 0.08, 0.08]]
# 1-thread Triad, MB/s: one level, 3 % spread.
TRIAD_1T = [[37561.8, 39758.3, 40168.9, 40295.7, 40347.9], [37638.6, 39489.5, 40601.6, 39785.1, 39696.5],
            [39747.2, 39800.8, 39742.6, 39584.5, 39910.4], [35312.4, 37297.3, 37225.9, 36770.0, 37250.2],
            [38320.4, 38468.6, 38045.3, 37981.1, 38808.8]]


def test_two_states_of_the_node_are_two_levels():
    lv = two_levels(TRIAD)
    assert (lv.n_low, lv.n_high) == (18, 7)
    assert round(lv.low, -2) == 48900 and round(lv.high, -2) == 75500
    lat = two_levels(LAT_8B, resolution=0.01 / 0.2)
    assert (lat.n_low, lat.n_high) == (9, 6) and 0.11 < lat.low < 0.12 < 0.36 < lat.high


def test_one_level_a_lone_run_and_a_printed_step_are_not_two():
    assert two_levels(TRIAD_1T) is None
    assert two_levels(TRIAD_2T) is None          # run 4 alone: an episode, not a state
    assert two_levels(PUT_8B, resolution=0.01 / 0.078) is None
    assert two_levels(TRIAD[:1]) is None         # too few samples to say


def test_a_lone_run_at_the_better_level_is_enough_to_judge_at_the_worse():
    """Judged at its worse level, a figure passes a night at the better one
    whether that was a state or one run's episode: the better level may
    have been seen once, the worse level not."""
    lv = two_levels(TRIAD_2T, direction="higher")
    assert lv is not None and (lv.n_low, lv.n_high) == (20, 5)
    assert two_levels(TRIAD_2T, direction="lower") is None   # its worse level in one run
    # 8 B latency: 0.36 us (worse) in one run alone, four at 0.12 us.
    lat = [LAT_8B[0], LAT_8B[1], LAT_8B[2], LAT_8B[3], LAT_8B[0]]
    assert two_levels(lat, resolution=0.01 / 0.2, direction="lower") is None
    assert two_levels(lat, resolution=0.01 / 0.2, direction="higher") is not None


def test_noise_of_one_level_is_seldom_called_two():
    rng = np.random.default_rng(43)
    draws = [np.exp(0.05 * rng.standard_t(3, size=(5, 5))) for _ in range(500)]
    called = sum(two_levels(d.tolist()) is not None for d in draws)
    assert called <= 2, called
    one_run = sum(two_levels(d.tolist(), direction=way) is not None
                  for d in draws for way in ("higher", "lower"))
    assert one_run <= 4, one_run
    assert MIN_GAP >= 6


def test_the_capture_says_a_figure_falls_at_two_levels(tmp_path):
    root = make_root(tmp_path, references=False)
    store = root.parent / "store"
    ids = []
    for k, (tri, one) in enumerate(zip(TRIAD, TRIAD_1T)):
        rid = f"202611{k + 1:02d}T020000Z"
        write_run(store, "local", rid, [case("StreamBandwidth", "triad", sorted(tri)[2], "MB/s"),
                                        case("StreamTriadScaling", "one", sorted(one)[2], "MB/s")],
                  started=rid, samples={0: {"triad": tri}, 1: {"one": one}})
        ids.append(rid)
    res = hpc_health(root, "reference", "capture", "--site", "local", "--from", ",".join(ids))
    assert res.returncode == 0, res.stderr
    (triad,) = [line for line in res.stdout.splitlines() if " triad:" in line]
    assert "; judged at the worse of two levels, 48868 and 75504 MB/s, from its 4 runs at it)" in triad, triad
    (one,) = [line for line in res.stdout.splitlines() if " one:" in line]
    assert "two levels" not in one, one
    assert "; 1 of the figures with samples at two levels (1 judged at the worse one)" \
        in res.stdout, res.stdout


def test_a_weak_figures_reason_names_its_two_levels():
    logs = np.log([np.median(r) for r in TRIAD])
    base = baselines.Baseline(list("abcde"), logs, "higher", "MB/s", levels=two_levels(TRIAD))
    fig = gating.Noise(spread=base.spread, df=4, runs=5)
    said = capture._spread_said(fig, base)
    assert said == ("its 5 runs spread by 19.4 % (log SD), its 25 samples at two levels, "
                    "48868 and 75504 MB/s (18 and 7): the node switches between two states "
                    "(a VM's vCPU placement; on a cluster, two kinds of node or of placement)")
    assert "one level" in gating.when_strong(None, fig, 0.5, two_levels=True)


def _written(tmp_path, samples, unit="MB/s", said=None):
    root = make_root(tmp_path, references=False)
    store = root.parent / "store"
    ids = []
    for k, tri in enumerate(samples):
        rid = f"202611{k + 1:02d}T020000Z"
        write_run(store, "local", rid, [case("StreamBandwidth", "triad", sorted(tri)[len(tri) // 2],
                                             unit)],
                  started=rid, samples={0: {"triad": tri}})
        ids.append(rid)
    res = hpc_health(root, "reference", "capture", "--site", "local", "--write", "--from",
                     ",".join(ids))
    assert res.returncode == 0, res.stderr
    if said is not None:
        said.append(res.stdout)
    refs = references.load(root / "reference" / "local.yaml")
    return refs.lookup("StreamBandwidth", "local:default", "gnu-mpi", {}, "triad")


def test_a_figure_at_two_levels_is_judged_at_its_worse_one(tmp_path):
    """Walk 3's StreamBandwidth Triad: runs 1-3 and 5 saw the low level
    (48.9 GB/s, quiet to about 1 %), runs 4 and 5 the high one (75.5).  Its
    reference is the low level, from the low samples of those four runs; a
    night at the high level passes (ReFrame's bound too, and no IMPROVED
    hint), and the walk's hog night (-47.9 %) fails on one night, where the
    reference of all five runs (spread 19 %) let it pass."""
    ref = _written(tmp_path, TRIAD)
    prov = ref.provenance
    assert prov["levels"] == [48867.6, 75504.2] and prov["level_runs"] == 4
    low = [[x for x in run if x < 60000] for run in TRIAD]
    logs = [np.log(np.median(r)) for r in low if r]
    assert abs(np.log(ref.value) - np.mean(logs)) < 0.002
    assert ref.value * (1 + ref.upper) > 75504.2 * 1.01 and -0.2 < ref.lower < -0.03

    def night(value, past=()):
        return gating.judge_night(value, ref.value, "higher", prov, list(past), 10, 1.0)

    assert night(75504.2).verdict == "PASS"
    assert night(25434.0).verdict == "DEGRADED"
    mixed = two_levels(TRIAD).at_worse(TRIAD, "higher")
    assert [len(r) for r in mixed] == [5, 5, 5, 0, 3]
    # Nights at the better level do not feed the level's spread.
    high = [Night(f"2026120{k}T020000Z", f"2026-12-0{k}T02:00:00Z", 75000.0, True, True)
            for k in range(1, 8)]
    assert night(48000.0, high).noise.nights == 0
    low_nights = [dataclasses.replace(n, value=48500.0) for n in high]
    assert night(48000.0, low_nights).noise.nights == 5


def test_a_lone_better_run_leaves_the_reference_at_the_four_runs_level(tmp_path):
    """Walk 6's shape: the 2-thread Triad at 77 GB/s in one baseline run and
    at 47-49 in the four others.  The reference is the four runs' level with
    their own spread (about 1 %), not a 5-run spread of 20 % that left the
    hog's third of the bandwidth uncaught; a night at the high level passes."""
    ref = _written(tmp_path, TRIAD_2T)
    prov = ref.provenance
    assert prov["level_runs"] == 4 and "weak" not in prov
    assert 48000 < ref.value < 49000 and -0.15 < ref.lower < -0.03
    assert gating.judge_night(77000.0, ref.value, "higher", prov, [], 10, 1.0).verdict == "PASS"
    assert gating.judge_night(32500.0, ref.value, "higher", prov, [], 10, 1.0).verdict == "DEGRADED"


def test_a_worse_level_of_two_runs_borrows_the_better_levels_spread(tmp_path):
    """8 B latency at 0.36 us (the worse level) in runs 4 and 5 and at
    0.12 us in runs 1-3: two runs give the worse level's spread one degree
    of freedom, so it is pooled with the better level's, each about its own
    level (3 degrees of freedom); the reference is the worse level, from its
    two runs."""
    said = []
    ref = _written(tmp_path, LAT_8B, unit="us", said=said)
    prov = ref.provenance
    assert prov["level_runs"] == 2 and prov["night_df"] == 3 and "weak" not in prov
    assert 0.359 < ref.value < 0.365
    logs = [np.log(np.median(r)) for r in LAT_8B]
    pooled = np.sqrt((np.var(logs[:3]) * 3 + np.var(logs[3:]) * 2) / 3)
    assert abs(prov["night_spread"] - pooled) < 1e-3
    assert "from its 2 runs at it" in said[0], said[0]
    assert gating.noise_of(prov).rests_on() == "2+0 df 3"

    def night(value):
        return gating.judge_night(value, ref.value, "lower", prov, [], 10, 1.0).verdict

    assert night(0.12) == "PASS" and night(0.37) == "PASS"
    assert night(0.9) == "DEGRADED"


def test_runs_that_each_mix_the_levels_alike_keep_their_own_location(tmp_path):
    """Five runs each with three samples at the low level and two at the
    high one (as the gate bench's nights, all scaled from one run): the
    runs' locations are steady, and the reference is theirs, not a level's."""
    mixed = [[48900 * f, 48700 * f, 49100 * f, 75500 * f, 75300 * f]
             for f in (1.0, 1.01, 0.99, 1.005, 0.995)]
    assert two_levels(mixed) is not None and two_levels(mixed).pure_runs(mixed) == 0
    ref = _written(tmp_path, mixed)
    assert "levels" not in ref.provenance
    assert two_levels(TRIAD).pure_runs(TRIAD) == 4


def test_runs_of_one_level_in_two_clumps_are_not_two_levels():
    """Five runs each quiet to 0.1 %, their figures 6 % apart in two clumps
    (as five nights of 10 % noise can fall): a gap of many within-run
    spreads, but not two states of the node."""
    clumps = [[48000 * f * (1 + 0.001 * k) for k in range(5)] for f in (0.95, 0.96, 0.97, 1.03, 1.04)]
    assert two_levels(clumps) is None


# Newcomer walk 17's baseline (2026-11-29): StreamBandwidth in runs 1-2 at
# 57-64 GB/s, in runs 3-5 at 41-47.  Copy's gap showed two levels; Add's
# and Triad's sample noise hid theirs (4.4-5.3 within-level SDs).
W17_COPY = [[58761.3, 63806.0, 61567.8, 62815.3, 61905.2], [63285.7, 62242.9, 60728.8, 63788.1, 60648.1],
            [42255.3, 40773.8, 42840.8, 41870.7, 42420.3], [42302.3, 44385.9, 43863.7, 41661.2, 44627.2],
            [41006.8, 41994.0, 42739.7, 42374.6, 43304.3]]
W17_TRIAD = [[64220.2, 63810.7, 62510.1, 62537.5, 57304.2], [62432.5, 59371.9, 56578.6, 61077.7, 59310.2],
             [45977.3, 42571.2, 44026.8, 44126.7, 43419.1], [43423.5, 47452.4, 47032.5, 44623.7, 47048.0],
             [44551.7, 44772.0, 44864.7, 43791.3, 45216.8]]


def test_a_split_another_figure_of_the_same_runs_found_is_followed_where_the_samples_bear_it_out():
    copy = two_levels(W17_COPY, direction="higher")
    assert copy is not None and two_levels(W17_TRIAD, direction="higher") is None
    worse = worse_launches(copy, W17_COPY, "higher")
    assert worse == [[False] * 5, [False] * 5, [True] * 5, [True] * 5, [True] * 5]
    triad = split_as(W17_TRIAD, worse, "higher")
    assert triad is not None and 44000 < triad.low < 45500 and 59000 < triad.high < 62000
    assert [len(r) for r in triad.at_worse(W17_TRIAD, "higher")] == [0, 0, 5, 5, 5]
    # A time of the same runs is worse where the bandwidth is lower.
    times = [[1.0 / x for x in run] for run in W17_TRIAD]
    assert split_as(times, worse, "lower") is not None
    # A figure one level: the 1-thread Triad of walk 3, or Triad parted otherwise.
    assert split_as(TRIAD_1T, [[True] * len(r) for r in TRIAD_1T[:2]]
                    + [[False] * len(r) for r in TRIAD_1T[2:]], "higher") is None
    assert split_as(W17_TRIAD, [[False] * 5, [True] * 5, [False] * 5, [True] * 5, [True] * 5],
                    "higher") is None
    # Not the same launches (a run with a sample fewer): nothing to follow.
    assert split_as([run[:4] for run in W17_TRIAD], worse, "higher") is None


# Newcomer walk 18's baseline (2026-11-29): its second run switched state
# between launches (1, 2 and 5 at 65-70 GB/s, 3 and 4 at 45), so a split by
# run could not be carried over; Add's own gap was 3.7 within-level SDs.
W18_COPY = [[44691.9, 45394.3, 45004.0, 44677.9, 43856.9], [69725.6, 64652.1, 44869.5, 44444.7, 69530.1],
            [77382.5, 76016.2, 75453.1, 74952.4, 78382.0], [47692.4, 47652.6, 47436.6, 47519.6, 47668.5],
            [46871.4, 46871.4, 47140.6, 47353.9, 46944.7]]
W18_ADD = [[47201.1, 46885.6, 47875.9, 46799.7, 46838.1], [66711.2, 60906.0, 47414.3, 47575.1, 72163.1],
           [76205.7, 73711.1, 72008.2, 71577.5, 74264.5], [49872.5, 50308.0, 49945.3, 50240.0, 50502.5],
           [49750.7, 49316.3, 49829.0, 49890.0, 49726.2]]


def test_a_split_is_followed_launch_by_launch_when_a_run_switched_state_within_it():
    copy = two_levels(W18_COPY, direction="higher")
    assert copy is not None and two_levels(W18_ADD, direction="higher") is None
    assert copy.pure_runs(W18_COPY) == 4
    add = split_as(W18_ADD, worse_launches(copy, W18_COPY, "higher"), "higher")
    assert add is not None and 48000 < add.low < 49500
    assert [len(r) for r in add.at_worse(W18_ADD, "higher")] == [5, 2, 0, 5, 5]


@pytest.mark.parametrize("copy, other, runs", [(W17_COPY, W17_TRIAD, 3), (W18_COPY, W18_ADD, 4)],
                         ids=["walk17-by-run", "walk18-by-launch"])
def test_the_capture_judges_a_figure_at_the_levels_its_check_showed(tmp_path, copy, other, runs):
    """Walk 17's capture: Copy at its worse level (MDC 19 %), Triad from
    all five runs (+-74 %, weak); walk 18's Add from all five (MDC 50 %)
    beside Copy at its worse level.  Each now follows Copy's split."""
    root = make_root(tmp_path, references=False)
    store = root.parent / "store"
    ids = []
    for k, (cp, tri) in enumerate(zip(copy, other)):
        rid = f"202611{k + 1:02d}T020000Z"
        tc = case("StreamBandwidth", "Copy", sorted(cp)[2], "MB/s")
        tc["perfvalues"]["local:default:Triad"] = [sorted(tri)[2], 0, None, None, "MB/s", "pass"]
        tc["figure_better"]["Triad"] = "higher"
        write_run(store, "local", rid, [tc], started=rid, samples={0: {"Copy": cp, "Triad": tri}})
        ids.append(rid)
    res = hpc_health(root, "reference", "capture", "--site", "local", "--from", ",".join(ids))
    assert res.returncode == 0, res.stderr
    (triad,) = [line for line in res.stdout.splitlines() if " Triad:" in line]
    assert "judged at the worse of two levels" in triad and f"from its {runs} runs at it" in triad, \
        triad
    assert "WEAK" not in triad, triad
