"""Tests of the verdict statistics, mostly on real recorded noise.

tests/data/noise holds 30 back-to-back runs (one sample each) of nine
benchmark figures on a KVM guest; see its README.  Where a test needs several
samples per run it takes consecutive samples, which keeps the episodes inside
a run, as they would be in a real nightly run.
"""

import csv
import json
import math
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml

from hpc_health import stats as st
from hpc_health.stats import DEGRADED, HIGHER, IMPROVED, LOWER, NO_REFERENCE, PASS, Reference
from hpc_health.stats import changepoint as cp

NOISE = Path(__file__).parent / "data" / "noise"


# Which way is better for each recorded series, declared as the checks
# declare their figures (never guessed from a name).
SERIES_BETTER = {"MB/s": HIGHER, "MiB/s": HIGHER, "us": LOWER, "µs": LOWER}


def _load():
    series = {}
    for path in sorted(NOISE.glob("*.csv")):
        with open(path, newline="") as fh:
            rows = list(csv.DictReader(fh))
        name, unit = path.stem, rows[0]["unit"]
        series[name] = dict(values=np.array([float(r["value"]) for r in rows]), unit=unit,
                            timestamps=[r["timestamp"] for r in rows],
                            direction=SERIES_BETTER[unit])
    return series


SERIES = _load()


def runs_of(values, m):
    """Consecutive samples grouped into runs of m (episodes stay inside a run)."""
    return [list(values[i:i + m]) for i in range(0, len(values) - m + 1, m)]


def worse(values, frac, direction):
    """Values made worse by frac: bandwidth down, latency up."""
    return np.asarray(values) * ((1 - frac) if direction == HIGHER else (1 + frac))


def test_recorded_data_is_there():
    assert len(SERIES) == 9
    assert all(len(s["values"]) == 30 for s in SERIES.values())


def test_recorded_units_give_a_direction():
    assert SERIES["osu_latency_8B"]["direction"] == LOWER
    assert SERIES["ior_tmp_read"]["direction"] == HIGHER


# --- clean / spreads -----------------------------------------------------------

def test_clean_drops_nan_and_inf():
    x, dropped = st.clean([1.0, float("nan"), 2.0, float("inf"), -float("inf"), None, 3.0])
    assert x.tolist() == [1.0, 2.0, 3.0]
    assert dropped == 4


def test_robust_spread_is_sigma_for_normal_data():
    x = np.random.default_rng(0).normal(100, 5, 5000)
    assert st.robust_spread(x) == pytest.approx(5, rel=0.05)
    assert st.relative_spread(x) == pytest.approx(0.05, rel=0.05)


def test_robust_spread_quantised_falls_back():
    # 0.01 us steps, more than half the values identical: MAD is 0.
    x = [0.15] * 8 + [0.16] * 16 + [0.17] * 6
    assert np.median(np.abs(np.array(x) - 0.16)) == 0
    assert st.robust_spread(x) == pytest.approx(0.0075 / 1.349, rel=0.01)  # IQR
    x = [0.16] * 29 + [0.17]                                              # IQR 0 too
    assert st.robust_spread(x) == pytest.approx(0.005, rel=1e-6)          # half a step
    assert st.quantisation_step(SERIES["osu_latency_8B"]["values"]) == pytest.approx(0.01)


def test_robust_spread_constant_and_tiny():
    assert st.robust_spread([5.0] * 10) == 0.0
    assert st.robust_spread([5.0]) == 0.0
    assert st.relative_spread([]) == 0.0


def test_within_run_spread():
    rng = np.random.default_rng(1)
    runs = [list(100 * np.exp(rng.normal(0, 0.04, 3))) for _ in range(300)]
    assert st.within_run_spread(runs) == pytest.approx(0.04, rel=0.1)
    assert st.within_run_spread([[1.0], [2.0]]) is None


# --- references -------------------------------------------------------------------

def test_propose_reference_fields():
    v = SERIES["stream_triad_1t"]["values"]
    ref = st.propose_reference(runs_of(v, 3), "MB/s", HIGHER)
    assert ref.value == pytest.approx(st.location(v))
    assert (ref.n, ref.runs) == (30, 10)
    assert ref.lower < 0 < ref.upper and ref.lower == -ref.upper
    assert st.BOUND_FLOOR <= ref.upper <= st.BOUND_CAP
    assert ref.spread > 0 and ref.between_run_spread > 0 and ref.within_run_spread > 0
    assert "only 10 runs" in ref.note
    assert Reference.from_dict({**ref.to_dict(), "unknown": 1}) == ref
    # plain types: the reference files are YAML
    assert Reference.from_dict(yaml.safe_load(yaml.safe_dump(ref.to_dict()))) == ref


def test_bounds_include_between_run_episodes():
    # stream 1t: each run of 3 is tight (~2 %) but runs sit ~13 % apart.
    v = SERIES["stream_triad_1t"]["values"]
    ref = st.propose_reference(runs_of(v, 3), "MB/s", HIGHER)
    assert ref.within_run_spread < 0.03
    assert ref.between_run_spread > 0.05
    assert ref.upper > 0.20       # what within-run noise alone would give: ~0.1


def test_constant_series_floor_applies():
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # no division by zero, no nan
        ref = st.propose_reference([[5.0, 5.0, 5.0]] * 30, "s", LOWER)
        assert ref.spread == 0 and ref.between_run_spread == 0
        # the episode floor (5 %) sets the bound: 3 sigma ~ 16 %
        assert ref.upper == pytest.approx(math.expm1(3 * 0.05 * math.sqrt(1 + 1 / 30)))
        assert st.verdict(ref, [5.0, 5.0, 5.0], LOWER).verdict == PASS
        # the episode floor keeps a 10 % change from being "infinitely" significant
        assert st.verdict(ref, [5.5] * 3, LOWER).verdict == PASS
        assert st.verdict(ref, [6.5] * 3, LOWER).verdict == DEGRADED
        # with every floor disabled it still divides by MIN_SPREAD, not zero
        ref0 = st.propose_reference([[5.0, 5.0, 5.0]] * 30, "s", LOWER, episode_floor=0.0)
        assert ref0.upper == pytest.approx(st.BOUND_FLOOR)
        r = st.verdict(ref0, [5.5], LOWER)
        assert r.verdict == DEGRADED and math.isfinite(r.mdc)


def test_bound_never_below_printed_resolution():
    # the quiet part of 8 B latency: 0.12-0.17 us in 0.01 us steps
    v = SERIES["osu_latency_8B"]["values"][:21]
    ref = st.propose_reference(runs_of(v, 3), "us", LOWER, episode_floor=0.0)
    assert ref.upper >= 0.01 / ref.value
    assert "resolution" in ref.note
    assert st.verdict(ref, [ref.value + 0.01] * 3, LOWER).verdict == PASS


def test_too_noisy_reference_says_so():
    # 8 B latency: 5 of 30 runs at 2.6x (an episode): cannot gate at +-50 %.
    s = SERIES["osu_latency_8B"]
    ref = st.propose_reference(runs_of(s["values"], 3), s["unit"], LOWER)
    assert ref.too_noisy and "too noisy" in ref.note
    # The bound printed is what the test enforces, not the 50 % cap: nothing
    # inside it is ever flagged, and just beyond it is.
    assert ref.upper > st.BOUND_CAP and ref.mdc > ref.upper
    assert st.verdict(ref, [ref.value * (1 + 0.98 * ref.upper)] * 3, LOWER).verdict == PASS
    assert st.verdict(ref, [ref.value * (1 + 1.02 * ref.upper)] * 3, LOWER).verdict == DEGRADED
    r = st.verdict(ref, s["values"][21:24], LOWER)      # a run inside the episode
    assert r.verdict == PASS and r.mdc > 1.0
    assert "too noisy" in r.reason


def test_bounds_never_narrower_than_the_test_enforces():
    # Two runs of STREAM (the issue's capture from two stored runs): the
    # bounds printed were +-17 % while the test flagged only changes of 100 %.
    s = SERIES["stream_triad_1t"]
    two = runs_of(s["values"][:10], 5)
    ref = st.propose_reference(two, s["unit"], HIGHER, family=4)
    worse = ref.value * (1 + 0.98 * ref.lower)      # just inside the lower bound
    assert st.decide_many([(ref, [worse] * 5, HIGHER)] * 4)[0].verdict == PASS
    assert ref.mdc > -ref.lower > 0.5
    # Five runs of the same series: a usable reference that says what it catches.
    five = st.propose_reference(runs_of(s["values"][:25], 5), s["unit"], HIGHER, family=4)
    assert five.mdc < ref.mdc and -five.lower < 0.5


def test_figures_that_measure_nothing_get_no_reference():
    # IOR's close times on this machine: 0 s in nearly every sample.
    for runs in ([[0, 0.0001, 0]] * 5, [[0, 0, 0]] * 5, [[0.0001, 0.0002, 0.0001]] * 5):
        with pytest.raises(st.NoReference, match="below the timer's resolution"):
            st.propose_reference(runs, "s", LOWER)


def test_an_overlap_of_none_is_not_called_a_timer_too_coarse():
    # osu_iallreduce's overlap in newcomer walk 16: 0 % on three of five
    # runs.  OSU prints 0 % when nothing overlapped; no timer missed it.
    runs = [[0.0, 0.0, 0.0]] * 3 + [[12.3, 10.1, 11.0], [9.0, 8.2, 7.5]]
    with pytest.raises(st.NoReference) as err:
        st.night_logs(runs, "%")
    assert str(err.value).startswith("a share of none (0 %: nothing overlapped) on 3 of 5 runs")
    assert "timer" not in str(err.value)
    with pytest.raises(st.NoReference, match="a share of none"):
        st.night_logs([[0.0, 0.0, 0.0]] * 5, "%")
    with pytest.raises(st.NoReference, match="below the timer's resolution on 3 of 5"):
        st.night_logs([[0.0, 0.0, 0.0]] * 3 + [[1.2, 1.1, 1.0]] * 2, "s")


def test_single_sample_runs_are_flagged():
    v = SERIES["osu_bw_4MiB"]["values"]
    assert "wild sample" in st.propose_reference(runs_of(v, 1), "MB/s", HIGHER).note
    assert "wild sample" not in st.propose_reference(runs_of(v, 3), "MB/s", HIGHER).note


def test_reference_validation():
    with pytest.raises(ValueError):
        Reference(1.0, lower=0.1)
    with pytest.raises(ValueError):
        Reference(1.0, upper=-0.1)
    with pytest.raises(ValueError):
        st.propose_reference([[float("nan")]], "s", LOWER)
    with pytest.raises(ValueError):
        st.propose_reference([[1.0]], "s", "sideways")


# --- single verdicts ------------------------------------------------------------

def test_no_reference():
    r = st.verdict(None, [1.0, 2.0], LOWER)
    assert r.verdict == NO_REFERENCE and r.value == 1.5 and r.n == 2


def test_no_finite_sample_raises():
    ref = Reference(1.0, -0.1, 0.1)
    with pytest.raises(ValueError):
        st.verdict(ref, [float("inf"), float("nan")], LOWER)


def test_bound_only_reference():
    ref = Reference(100.0, -0.10, 0.10, "MB/s")
    r = st.verdict(ref, [85.0], HIGHER)
    assert r.verdict == DEGRADED and r.method == "bound-only"
    assert r.p_value is None and "bound-only" in r.reason
    assert r.deviation == pytest.approx(-0.15) and r.worse_by == pytest.approx(0.15)
    assert st.verdict(ref, [95.0], HIGHER).verdict == PASS
    assert st.verdict(ref, [120.0], HIGHER).verdict == IMPROVED
    # None = unbounded on that side, as in ReFrame
    assert st.verdict(Reference(100.0, None, 0.1), [10.0], HIGHER).verdict == PASS
    lat = Reference(2.0, -0.1, 0.1, "us")
    assert st.verdict(lat, [2.5], LOWER).verdict == DEGRADED
    assert st.verdict(lat, [1.5], LOWER).verdict == IMPROVED


def test_reference_with_spread_only():
    # A reference that knows its pooled spread but not runs: the episode
    # floor stands in for the between-run noise, and the reason says so.
    ref = Reference(100.0, -0.2, 0.2, "MB/s", spread=0.02, n=20)
    r = st.verdict(ref, [70.0, 71.0, 69.0], HIGHER)
    assert r.verdict == DEGRADED and "not measured" in r.reason


def test_degraded_needs_bound_and_significance():
    v = SERIES["osu_latency_4KiB"]["values"]
    ref = st.propose_reference(runs_of(v, 3), "us", LOWER)
    # significant but inside the bound: PASS
    ref_wide = Reference(**{**ref.to_dict(), "upper": 0.9, "lower": -0.9})
    assert st.verdict(ref_wide, worse(v[:6], 0.5, LOWER), LOWER).verdict == PASS
    # beyond a tiny bound but not significant: PASS, and the reason says why
    ref_tight = Reference(**{**ref.to_dict(), "upper": 0.01, "lower": -0.01})
    r = st.verdict(ref_tight, worse(v[:3], 0.06, LOWER), LOWER)
    assert r.verdict == PASS and "not significant" in r.reason


def test_single_sample_verdict():
    s = SERIES["stream_triad_2t"]
    ref = st.propose_reference(runs_of(s["values"], 3), s["unit"], HIGHER)
    one = st.verdict(ref, [ref.value * 0.6], HIGHER)
    assert one.verdict == DEGRADED and one.n == 1
    assert st.verdict(ref, [ref.value], HIGHER).verdict == PASS
    five = st.verdict(ref, [ref.value] * 5, HIGHER)
    assert one.mdc > five.mdc


def test_nan_inf_samples_are_dropped_not_judged():
    s = SERIES["stream_triad_1t"]
    ref = st.propose_reference(runs_of(s["values"], 3), s["unit"], HIGHER)
    cur = list(worse(s["values"][15:20], 0.4, HIGHER))
    a = st.verdict(ref, cur, HIGHER)
    b = st.verdict(ref, cur + [float("inf"), float("nan")], HIGHER)
    assert b.dropped == 2 and b.n == 5
    assert (a.verdict, a.value, a.p_value) == (b.verdict, b.value, b.p_value)


@pytest.mark.parametrize("name", ["stream_triad_1t", "osu_bw_4MiB", "osu_latency_4KiB",
                                  "ior_tmp_write"])
def test_one_wild_sample_does_not_flip(name):
    s = SERIES[name]
    d, v = s["direction"], s["values"]
    ref = st.propose_reference(runs_of(v, 3), s["unit"], d)
    healthy = list(v[10:15])
    bad = list(worse(v[10:15], 0.45, d))
    for cur in (healthy, bad):
        base = st.verdict(ref, cur, d).verdict
        for wild in (0.1, 10.0):          # one sample 10x off, either way
            assert st.verdict(ref, cur[:-1] + [cur[-1] * wild], d).verdict == base
    assert st.verdict(ref, bad, d).verdict == DEGRADED
    # ... nor one wild sample in the baseline (absorbed by its run's median)
    spoiled = [list(r) for r in runs_of(v, 3)]
    spoiled[4][1] *= 0.1 if d == HIGHER else 10.0
    ref2 = st.propose_reference(spoiled, s["unit"], d)
    assert st.verdict(ref2, bad, d).verdict == DEGRADED
    assert st.verdict(ref2, healthy, d).verdict == PASS


def test_episodes_halves_are_not_degraded():
    """Baseline from one half of a real series, the other half judged.

    Whole half as tonight's samples: never DEGRADED.  Night by night (runs of
    3, Holm over the nine variables): never DEGRADED, with one exception that
    is the documented limit: 8 B latency's 2.6x episode sits in the second
    half only, so a baseline from the first half has never seen it.
    """
    flagged = []
    for first in (True, False):
        nights = [[] for _ in range(5)]
        for name, s in SERIES.items():
            v, d = s["values"], s["direction"]
            base, other = (v[:15], v[15:]) if first else (v[15:], v[:15])
            ref = st.propose_reference(runs_of(base, 3), s["unit"], d)
            assert st.verdict(ref, other, d).verdict != DEGRADED, name
            for j in range(5):
                nights[j].append((name, (ref, other[3 * j:3 * j + 3], d)))
        for j, night in enumerate(nights):
            results = st.decide_many([item for _, item in night])
            flagged += [(name, first, j) for (name, _), r in zip(night, results)
                        if r.verdict == DEGRADED]
    assert flagged == [("osu_latency_8B", True, 2), ("osu_latency_8B", True, 3)]


def test_injected_25_percent_with_30_run_baseline():
    """25 % worse on every recorded series, baseline = the 30 recorded runs.

    With one sample per run the recorded wild samples (ior read 0.41x, ior
    write 0.68x, osu bw 0.79x, allreduce 1.35x) and 8 B latency's episodes
    make 25 % ordinary for six of the nine; the other three are DEGRADED.
    Whichever it is, the reported MDC must agree: DEGRADED only where
    the bound is below 25 %, and never an MDC below 25 % on a PASS.
    """
    degraded = set()
    for name, s in SERIES.items():
        d, v = s["direction"], s["values"]
        ref = st.propose_reference(runs_of(v, 1), s["unit"], d)
        r = st.verdict(ref, worse(v, 0.25, d), d)
        assert r.worse_by == pytest.approx(0.25)
        if r.verdict == DEGRADED:
            degraded.add(name)
            assert r.bound < 0.25
        else:
            assert r.verdict == PASS and r.mdc > 0.25, name
    assert degraded == {"stream_triad_1t", "stream_triad_2t", "osu_latency_4KiB"}


def test_ten_percent_on_quiet_metric_mdc_decides():
    """-10 % on 1-thread STREAM with 3 samples per run.

    From the recorded series (episodes 13 % apart) the MDC is far above 10 %,
    so no detection is claimed and none happens.  From a quiet series with
    the same per-run noise as its quiet stretches (2 %) and a baseline over
    many nights (episode floor lowered to 1 %, what such a site would
    measure) the MDC is mostly below 10 %, and where it is, the claim holds
    on >= 95 % of nights.
    """
    v = SERIES["stream_triad_1t"]["values"]
    ref = st.propose_reference(runs_of(v, 3), "MB/s", HIGHER)
    r = st.verdict(ref, worse(v[24:27], 0.10, HIGHER), HIGHER)
    assert r.mdc > 0.10 and r.verdict == PASS
    assert "caught on 95 % of nights" in r.reason and "38" in r.reason

    rng = np.random.default_rng(7)
    claimed = caught = 0
    for _ in range(300):
        base = 35000 * np.exp(rng.normal(0, 0.02, (30, 3)) + rng.normal(0, 0.01, (30, 1)))
        qref = st.propose_reference(base, "MB/s", HIGHER, episode_floor=0.01)
        cur = 35000 * 0.9 * np.exp(rng.normal(0, 0.02, 3) + rng.normal(0, 0.01))
        q = st.verdict(qref, cur, HIGHER)
        if q.mdc <= 0.10:
            claimed += 1
            caught += q.verdict == DEGRADED
    assert claimed >= 200                   # most such baselines can promise it
    assert caught / claimed >= 0.95         # and where promised, it holds


# --- MDC --------------------------------------------------------------------------

def test_mdc_monotonic():
    f = st.minimum_detectable_change
    base = dict(spread=0.05, n_ref=30, n_cur=3, alpha=0.01, between_run_spread=0.03)
    m0 = f(**base)
    assert f(**{**base, "n_ref": 90}) < m0 < f(**{**base, "n_ref": 10})
    assert f(**{**base, "n_cur": 10}) < m0 < f(**{**base, "n_cur": 1})
    assert f(**{**base, "spread": 0.02}) < m0 < f(**{**base, "spread": 0.10})
    assert m0 < f(**{**base, "between_run_spread": 0.06})
    assert f(**{**base, "alpha": 0.05}) < m0 < f(**{**base, "alpha": 0.001})
    assert m0 < f(**{**base, "power": 0.99})
    assert f(**{**base, "runs": 30}) < f(**{**base, "runs": 5})
    # changes inside the bound are never flagged: MDC beyond the bound
    assert f(**{**base, "bound": 0.40}) > 0.40
    # a drop of a bandwidth is a smaller fraction than the same log distance up
    assert f(**base, direction=HIGHER) < f(**base, direction=LOWER)


def test_mdc_matches_verdict():
    s = SERIES["osu_bw_4MiB"]
    ref = st.propose_reference(runs_of(s["values"], 3), s["unit"], HIGHER)
    r = st.verdict(ref, s["values"][:4], HIGHER)
    within, between, _ = st.noise_components(ref)
    _, between_b, _ = st.noise_components(ref, better=True)
    mdc = st.minimum_detectable_change(within, ref.n, 4, st.ALPHA, st.POWER, between,
                                       -ref.lower, runs=ref.runs,
                                       between_run_spread_better=between_b,
                                       direction=HIGHER)
    assert mdc == pytest.approx(r.mdc)


def test_mdc_power_and_false_alarm_by_simulation():
    """Normal two-level noise (3 % within runs, 4 % between): a change of the
    reported MDC is caught on >= 95 % of nights, no change is flagged on
    <= alpha of them.  The MDC is each baseline's own, as a user would read it."""
    rng = np.random.default_rng(11)
    n = 400

    def sim(runs, shift=0.0):
        return 100 * np.exp(shift + rng.normal(0, 0.03, (runs, 3))
                            + rng.normal(0, 0.04, (runs, 1)))

    caught = alarms = 0
    for _ in range(n):
        ref = st.propose_reference(sim(20), "us", LOWER, floor=0.0, episode_floor=0.0)
        mdc = st.verdict(ref, [ref.value] * 3, LOWER).mdc
        caught += st.verdict(ref, sim(1, math.log1p(mdc))[0], LOWER).verdict == DEGRADED
        alarms += st.verdict(ref, sim(1)[0], LOWER).verdict == DEGRADED
    assert caught / n >= 0.95
    assert alarms / n <= st.ALPHA


# --- many variables ---------------------------------------------------------------

def test_holm_and_bh():
    p = [0.01, 0.02, 0.03, 0.04, 0.05]
    assert st.adjust(p, 0.05) == [True, False, False, False, False]
    assert st.adjust(p, 0.05, "bh") == [True] * 5
    assert st.adjust([0.5, 0.001, 0.03], 0.05) == [False, True, False]      # 0.03 > 0.05/2
    # Holm stops at the first failure even if a later p would pass its own step
    assert st.adjust([0.001, 0.03, 0.049], 0.05) == [True, False, False]
    # no test: never rejected, not counted
    assert st.adjust([None, 0.02, float("nan")], 0.05) == [False, True, False]
    assert st.adjust([], 0.05) == []
    with pytest.raises(ValueError):
        st.adjust([0.1], 0.05, "bonferroni-ish")
    # order does not matter
    rng = np.random.default_rng(0)
    q = rng.uniform(0, 0.02, 20).tolist()
    perm = rng.permutation(20)
    assert [st.adjust(q, 0.05)[i] for i in perm] == st.adjust([q[i] for i in perm], 0.05)


def test_decide_many_corrects_across_variables():
    rng = np.random.default_rng(3)
    def variable(shift):
        base = 100 * np.exp(rng.normal(0, 0.03, (30, 3)) + rng.normal(0, 0.05, (30, 1)))
        ref = st.propose_reference(base, "MB/s", HIGHER)
        return ref, list(100 * np.exp(-shift + rng.normal(0, 0.03, 3))), HIGHER
    # a change that is significant alone (p ~ 0.005) ...
    items = [variable(0.0) for _ in range(29)]
    ref = items[0][0]
    x = math.exp(-2.9 * st.expected_spread(ref, 3)) * ref.value
    lone = (Reference(**{**ref.to_dict(), "lower": -0.01, "upper": 0.01}), [x] * 3, HIGHER)
    assert st.verdict(*lone).verdict == DEGRADED
    # ... is not, among 30 variables
    res = st.decide_many(items + [lone])
    assert res[-1].verdict == PASS and "holm over 30" in res[-1].reason
    # a clear degradation still is, and only it
    res = st.decide_many(items + [variable(0.5)])
    assert [r.verdict for r in res].count(DEGRADED) == 1 and res[-1].verdict == DEGRADED
    assert "holm over 30" in res[-1].reason
    # bound-only and no-reference items pass through
    res = st.decide_many([(None, [1.0], LOWER), (Reference(1.0, -0.1, 0.1), [2.0], LOWER)])
    assert [r.verdict for r in res] == [NO_REFERENCE, DEGRADED]


def test_block_resampled_false_alarm_rate():
    """False alarms on resampled real noise, Holm over 27 variables a night.

    Each variable's baseline is 30 runs of 3 consecutive samples and tonight
    is one more such run, all drawn (with replacement) from the recorded
    series, so episodes are kept and the null hypothesis is true.  Three
    independent copies of the nine series make 27 variables per night.
    Measured: 0 false nights in 300 (the limit: <= 1 %).  A pool of
    baselines per series keeps this fast.
    """
    t0 = time.process_time()        # CPU time: other jobs may share the machine
    rng = np.random.default_rng(2026)
    m, R, pool, nights = 3, 30, 40, 300
    names = list(SERIES)
    blocks = {k: np.lib.stride_tricks.sliding_window_view(s["values"], m)
              for k, s in SERIES.items()}
    refs = {k: [st.propose_reference(blocks[k][rng.integers(0, len(blocks[k]), R)],
                                     SERIES[k]["unit"], SERIES[k]["direction"])
                for _ in range(pool)] for k in names}
    false_nights, false_vars, n_vars = 0, 0, 0
    for _ in range(nights):
        items = [(refs[k][rng.integers(pool)], blocks[k][rng.integers(len(blocks[k]))],
                  SERIES[k]["direction"]) for _copy in range(3) for k in names]
        flags = [r.verdict == DEGRADED for r in st.decide_many(items)]
        false_nights += any(flags)
        false_vars += sum(flags)
        n_vars += len(flags)
    assert false_nights / nights <= 0.01
    assert false_vars / n_vars <= 0.001
    assert time.process_time() - t0 < 5


# --- history: change points and sustained steps --------------------------------------

@pytest.mark.parametrize("name", ["osu_bw_4MiB", "osu_latency_4KiB", "ior_tmp_write",
                                  "stream_triad_2t"])
def test_change_points_find_injected_step(name):
    s = SERIES[name]
    d = s["direction"]
    v = s["values"].copy()
    v[15:] = worse(v[15:], 0.25, d)             # second half 25 % worse
    cps = cp.change_points(v)
    assert any(abs(c - 15) <= 1 for c in cps), cps


def test_change_points_edge_cases():
    assert cp.change_points([1.0] * 30) == []
    assert cp.change_points([1.0, 2.0, 3.0]) == []
    v = [10.0] * 10 + [float("nan")] + [20.0] * 10
    assert cp.change_points(v) == [11]          # indices into the input


PELT_RECORDED = Path(__file__).parent / "data" / "pelt" / "ruptures_pelt_300.json"


def _pelt_trials():
    """Noise, steps, episodes and quantised values, a year of nights among
    them: (trial, series, penalty, min_size), from a fixed seed."""
    rng = np.random.default_rng(7)
    for trial in range(300):
        n = 365 if trial % 100 == 1 else int(rng.integers(6, 90))
        x = rng.normal(0.0, 1.0, n)
        if trial % 4 == 1:
            x[int(0.7 * n):] += rng.uniform(1.0, 5.0)
        elif trial % 4 == 2:
            x = np.round(2.0 * x) / 2.0
        elif trial % 4 == 3:
            for start in rng.integers(0, n, 3):
                x[start:start + int(rng.integers(1, 8))] += rng.uniform(-6.0, 6.0)
        min_size = int(rng.choice([1, 2, 3, 5]))
        if n < 2 * min_size:
            continue
        yield trial, x, cp.PENALTY_FACTOR * math.log(n), min_size


def test_pelt_finds_what_ruptures_pelt_finds_on_recorded_trials():
    """change_points' own Pelt against what ruptures' Pelt (model l2, jump
    1) found on the same 300 seeded trials, recorded in tests/data/pelt
    (ruptures takes over a minute for them; a sample is re-run live below)."""
    recorded = json.loads(PELT_RECORDED.read_text())["trials"]
    trials = list(_pelt_trials())
    assert len(trials) == len(recorded)
    for (trial, x, pen, min_size), rec in zip(trials, recorded):
        # The same series as when recorded (the seed's stream did not move).
        assert (trial, len(x), min_size) == (rec["trial"], rec["n"], rec["min_size"])
        assert round(float(x.sum()), 6) == rec["sum"], trial
        assert cp._pelt_l2(x, pen, min_size) == rec["breakpoints"], (trial, len(x), min_size)


def test_pelt_finds_what_ruptures_pelt_finds():
    """The same against ruptures itself, live, on every tenth trial (the
    year-long ones take ruptures seconds each: recorded only)."""
    rpt = pytest.importorskip("ruptures")
    for trial, x, pen, min_size in _pelt_trials():
        if trial % 10 or len(x) == 365:
            continue
        expected = rpt.Pelt(model="l2", min_size=min_size, jump=1).fit(
            x.reshape(-1, 1)).predict(pen=pen)
        assert cp._pelt_l2(x, pen, min_size) == expected, (trial, len(x), min_size)


def test_location_averages_nearby_levels_and_bounds_far_samples():
    """Launch levels are averaged (a shift of either moves the figure); an
    episode covering a third of the samples moves it by a bounded amount."""
    levels = [9.0] * 20 + [13.0] * 20
    assert 10.5 < st.location(levels) < 11.5           # the median would say 9 or 13
    assert st.location(levels[:19] + levels[20:] + [13.0]) == pytest.approx(
        st.location(levels), rel=0.05)                  # one launch changing level: no jump
    lat = [0.17, 0.17, 0.17, 0.16, 0.16, 0.16, 0.43, 0.40, 0.41, 0.40, 0.42,
           0.16, 0.14, 0.15, 0.15]
    assert st.location(lat) / np.median(lat) - 1 < 0.10  # the mean: +43 %
    assert st.location([1.0, 2.0, 1000.0]) == 2.0        # under 4 samples: the median
    assert st.location([5.0, 5.0, 5.0, 5.0]) == pytest.approx(5.0)  # no scale: no problem
    assert st.location([1.0, float("inf"), 1.0, 1.0, float("nan"), 1.0]) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        st.location([float("nan")])


def test_a_reference_summarised_otherwise_is_named_in_the_reason():
    ref = st.propose_reference([[10.0, 10.2, 9.9, 10.1]] * 5, "us", LOWER)
    assert ref.estimator == st.ESTIMATOR
    ref.estimator = "median"
    r = st.verdict(ref, [10.0, 10.1, 9.9, 10.0], LOWER)
    assert "summarised by median" in r.reason and "re-capture" in r.reason


def test_compare_runs_with_samples_of_zero_is_a_figure_not_compared():
    """An IOR close time below the timer's resolution (0 s) among the samples
    (seen on this machine): compare notes the figure as not compared
    (ValueError), not a traceback from an interval of exp(700)."""
    runs = [[0.0017668, 0.0, 0.0041070], [0.0016278, 0.0, 0.0038121],
            [0.0016543, 0.0, 0.0039113]]
    with pytest.raises(ValueError, match="unmeasurable: samples of 0"):
        st.compare_runs(runs, runs, LOWER)
