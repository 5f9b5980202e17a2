"""The nightly drift test (hpc_health.stats.stepscan) on the recorded noise
series and on seeded series far from its limits: silent on every night of
every recording, a step found and dated, a dip that recovered and an
improvement not reported.  What it finds at 5 and 10 % and its false-alarm
rate over years of nights are measured by bench/drift/calibrate.py."""

import numpy as np
import pytest
from store_fixtures import BETTER, RECORDINGS, recording

from hpc_health.stats import HIGHER, LOWER, stepscan


def _recording(name):
    values, unit = recording(name)
    return values, BETTER[unit]


def _worse(values, frac, direction):
    factor = 1 + frac if direction == LOWER else 1 / (1 + frac)
    return [v * factor for v in values]


#: Two recordings hold a drop that lasts: 2-thread STREAM 8 % lower for
#: runs 11-22, 8 B latency at 2.6x for runs 22-26.  As nights, each is a
#: sustained step to worse, and is named as one: (first night it is
#: named, the night it is dated at, its size).
STEP_LIKE = {"stream_triad_2t": (15, 10, (0.07, 0.1)),
             "osu_latency_8B": (24, 21, (1.3, 1.8))}


@pytest.mark.parametrize("name", RECORDINGS)
def test_silent_on_every_night_of_every_recording_but_its_lasting_drops(name):
    """Each recorded series as thirty nights, judged as the nightly run
    judges it on each of them (the nights so far)."""
    values, direction = _recording(name)
    assert len(values) == 30
    first = next((n for n in range(2 * stepscan.MIN_SIDE, 31)
                  if stepscan.scan(values[:n], direction)), None)
    if name not in STEP_LIKE:
        assert first is None
        return
    night, since, (low, high) = STEP_LIKE[name]
    assert first == night
    found = stepscan.scan(values[:night], direction)
    assert found["index"] == since and low < found["magnitude"] < high


@pytest.mark.parametrize("name, step", [("osu_bw_4MiB", 0.25), ("osu_latency_4KiB", 0.25),
                                        ("ior_tmp_write", 0.25), ("osu_allreduce_8B_np2", 0.4)])
def test_a_step_far_outside_the_noise_is_found_and_dated(name, step):
    """Worse from night 21 of the recording on, by about five of its nightly
    spreads (allreduce's 0.26 us is printed to 0.01 and has nights at 0.35
    and 0.21: 40 %): found by night 30, at its night +- 1."""
    values, direction = _recording(name)
    stepped = values[:20] + _worse(values[20:], step, direction)
    found = next(f for f in (stepscan.scan(stepped[:n], direction) for n in range(21, 31)) if f)
    assert abs(found["index"] - 20) <= 1
    assert found["magnitude"] == pytest.approx(step, rel=0.5)
    assert found["statistic"] > found["threshold"] >= stepscan.normal_limit(25)


def test_steps_on_quiet_nights_are_found_within_days_and_dated():
    """Independent nights of 3 % (lognormal): a 10 % step is seen within five
    nights, and its night named, on most series; nothing on the clean ones."""
    rng = np.random.default_rng(27)
    found, dated, false = 0, 0, 0
    for _ in range(60):
        nights = np.exp(rng.normal(0.0, 0.03, 40))
        false += stepscan.scan(nights, HIGHER) is not None
        nights[30:] *= 0.9
        hit = next((f for f in (stepscan.scan(nights[:n], HIGHER) for n in range(31, 36)) if f),
                   None)
        found += hit is not None
        dated += hit is not None and abs(hit["index"] - 30) <= 1
    assert false == 0
    assert found >= 45 and dated >= 0.8 * found      # measured: 57 found, 56 dated


def test_an_improvement_and_a_dip_that_recovered_are_not_drift():
    rng = np.random.default_rng(5)
    nights = 1000 * np.exp(rng.normal(0, 0.03, 30))
    better = nights.copy()
    better[20:] *= 1.3
    assert stepscan.scan(better, HIGHER) is None
    assert stepscan.scan(better, LOWER) is not None   # the same numbers as a time
    dip = nights.copy()
    dip[10:18] *= 0.7                                 # bad for a week, then fine
    assert stepscan.scan(dip, HIGHER) is None


def test_a_slow_slide_is_found_before_it_is_large():
    """-20 % spread evenly over 30 nights: no single step, found by night 25."""
    rng = np.random.default_rng(8)
    nights = 1000 * np.exp(rng.normal(0, 0.03, 30)) * np.linspace(1.0, 0.8, 30)
    first = next(n for n in range(6, 31) if stepscan.scan(nights[:n], HIGHER))
    assert first <= 25


def test_nights_without_a_figure_and_samples_of_zero_are_left_out():
    values, direction = _recording("osu_latency_4KiB")
    stepped = values[:20] + _worse(values[20:], 0.25, direction)
    gappy = stepped[:10] + [float("nan"), 0.0] + stepped[10:]
    a, b = stepscan.scan(stepped, direction), stepscan.scan(gappy, direction)
    assert b["index"] == a["index"] + 2 and b["magnitude"] == a["magnitude"]
    assert stepscan.scan([0.0] * 30, LOWER) is None
    assert stepscan.scan(values[:5], direction) is None          # too few nights


def test_the_same_nights_give_the_same_answer():
    """Seeded by the series: history and the nightly run agree."""
    values, direction = _recording("ior_tmp_write")
    stepped = values[:22] + _worse(values[22:], 0.12, direction)
    assert stepscan.scan(stepped, direction) == stepscan.scan(list(stepped), direction)
    with pytest.raises(ValueError):
        stepscan.scan(values, "sideways")
