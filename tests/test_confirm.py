"""A one-night failure and its retest (hpc_health.judge.confirm), and the
retest's ReFrame command line (hpc_health.run.retest), without running it."""

from hpc_health.judge import confirm
from hpc_health.judge.verdicts import Verdict
from hpc_health.model.results import Measurement
from hpc_health.run.retest import _hashes, _not_selecting


def _m(variable="mpi_init", value=0.6):
    return Measurement(test="BarrierLatency", check="BarrierLatency", system="local",
                       partition="default", environ="gnu-mpi", variable=variable, value=value)


def _v(verdict, deviation, one_night=False, variable="mpi_init", reason="r"):
    return Verdict(_m(variable), verdict, deviation=deviation, reason=reason,
                   method="gate", one_night=one_night)


def test_a_retest_within_its_bound_withdraws_the_failure_and_says_both():
    (v,) = confirm.combine([_v("DEGRADED", 1.7, True, reason="+170 % on one night")],
                           [_v("PASS", 0.02)])
    assert (v.verdict, v.tag, v.one_night, v.retest) == ("PASS", confirm.NOT_CONFIRMED, False,
                                                         "withdrawn")
    assert v.reason.startswith("+170 % on one night, but +2.0 % on its retest")


def test_what_the_retest_said_comes_before_a_weak_references_note():
    weak = "+120 % on one night; weak reference: its MDC (67%) is above ..."
    withdrawn, = confirm.combine([_v("DEGRADED", 1.2, True, reason=weak)], [_v("PASS", -0.03)])
    assert withdrawn.reason.startswith("+120 % on one night, but -3.0 % on its retest minutes "
                                       "later, within its bound: an episode of the noise, not a "
                                       "loss that stayed; "
                                       "weak reference: its MDC (67%)"), withdrawn.reason
    confirmed, = confirm.combine([_v("DEGRADED", 1.2, True, reason=weak)],
                                 [_v("DEGRADED", 1.1, True)])
    assert confirmed.reason == ("+120 % on one night; confirmed by its retest (+110 %); "
                                "weak reference: its MDC (67%) is above ...")


def test_a_retest_beyond_its_bound_confirms_the_failure():
    (v,) = confirm.combine([_v("DEGRADED", 1.7, True)], [_v("DEGRADED", 1.6, True)])
    assert v.verdict == "DEGRADED" and v.retest == "confirmed"
    assert v.reason.endswith("confirmed by its retest (+160 %)")


def test_a_retest_that_measured_nothing_leaves_the_failure_standing():
    first = [_v("DEGRADED", 1.7, True), _v("DEGRADED", 0.5, True, variable="other")]
    crashed = Verdict(_m(value=None), "FAIL", reason="sanity: no output")
    out = confirm.combine(first, [crashed])
    assert [(v.verdict, v.retest) for v in out] == [("DEGRADED", "stands")] * 2
    assert "its retest measured nothing (sanity: no output)" in out[0].reason
    assert "its retest measured nothing (not run)" in out[1].reason


def test_only_one_night_failures_are_retested_or_changed():
    stayed = _v("DEGRADED", 0.2, False)         # the persistence rule: a loss that stayed
    passed = _v("PASS", 0.01, variable="x")
    assert confirm.wanted([stayed, passed]) == []
    assert confirm.combine([stayed, passed], [_v("PASS", 0.0)]) == [stayed, passed]
    assert stayed.retest == passed.retest == ""


def test_the_retest_chooses_its_own_checks_and_keeps_the_nights_other_options():
    extra = ("-n", "Stream", "--tag=x", "-tfoo", "-x", "Halo", "-p", "gnu-mpi", "-S",
             "a=1", "--exclude-tag", "tuning")
    assert _not_selecting(extra) == ["-p", "gnu-mpi", "-S", "a=1"]
    report = {"runs": [{"testcases": [
        {"display_name": "BarrierLatency", "hashcode": "73d08f77"},
        {"display_name": "KernelsBuild ~local:default+gnu-mpi", "hashcode": "de9d5ff6"},
        {"display_name": "BarrierLatency", "hashcode": "73d08f77"}]}]}
    assert _hashes(report, {"BarrierLatency"}) == ["73d08f77"]


def test_a_retest_that_found_the_loss_shrunk_beyond_the_noise_withdraws_it():
    """The 8 B allreduce of the newcomer walk on 2026-11-28: 0.45 us on its
    night against 0.17 us (+165 %), 0.24 us on its retest (+41 %, still
    beyond its +28 % bound): the loss shrank by 0.63 in log, past the
    0.32 one night's bound allows between two nights (t 4.9, spread 4.6 %).
    The same night with a retest at +150 % is the same loss: confirmed."""
    def night(deviation, one_night):
        m = _m("latency_8B", 0.17 * (1 + deviation))
        m.better = "lower"
        return Verdict(m, "DEGRADED", deviation=deviation, reason="+165 % on one night",
                       method="gate", one_night=one_night,
                       retest_shrink=4.9 * 0.046 * 2 ** 0.5 if one_night else None)

    (ended,) = confirm.combine([night(1.65, True)], [night(0.413, False)])
    assert (ended.verdict, ended.tag, ended.retest) == ("PASS", confirm.NOT_CONFIRMED,
                                                        "withdrawn")
    assert ended.reason == ("+165 % on one night, but +41.3 % on its retest minutes later: "
                            "the loss shrank by more than one night's noise allows, an "
                            "episode ending, not a loss that stayed")
    (stayed,) = confirm.combine([night(1.65, True)], [night(1.5, False)])
    assert stayed.verdict == "DEGRADED" and stayed.retest == "confirmed"
    # a loss that grew on its retest is confirmed however much it grew
    (grew,) = confirm.combine([night(0.5, True)], [night(3.0, False)])
    assert grew.verdict == "DEGRADED" and grew.retest == "confirmed"


def test_a_loss_that_shrank_on_a_node_busy_on_both_measurements_is_confirmed():
    """Newcomer walk 15, night 12: two memory-copy hogs took 41.7 % of the
    1-thread Triad on its night and 30.2 % on its retest, against a bound of
    -9.1 % (spread 2.1 %): the shrinkage test called it an episode ending.
    The hogs were there on both; their share moves minute to minute."""
    note = "node busy: load 2.8 on 2 cores; other processes used 1.0 cores (memhog)"

    def night(deviation, one_night, busy):
        m = _m("triad_1t", 38855 * (1 + deviation))
        m.better, m.busy = "higher", note if busy else ""
        return Verdict(m, "DEGRADED", deviation=deviation,
                       reason=f"{deviation:+.1%} on one night" + (f"; {note}" if busy else ""),
                       method="gate", one_night=one_night,
                       retest_shrink=4.2 * 0.021 * 2 ** 0.5 if one_night else None)

    (v,) = confirm.combine([night(-0.417, True, True)], [night(-0.302, False, True)])
    assert (v.verdict, v.retest) == ("DEGRADED", "confirmed")
    assert v.reason == f"-41.7% on one night; confirmed by its retest (-30.2 %); {note}"
    # Busy on its night but not on its retest: the shrinkage test is asked.
    (v,) = confirm.combine([night(-0.417, True, True)], [night(-0.302, False, False)])
    assert (v.verdict, v.retest) == ("PASS", "withdrawn")
    # and on a quiet node, as before
    (v,) = confirm.combine([night(-0.417, True, False)], [night(-0.302, False, False)])
    assert (v.verdict, v.retest) == ("PASS", "withdrawn")


def test_what_the_retest_said_comes_before_a_busy_nodes_note():
    busy = "-34.4 % on one night; node busy: load 2.8 on 2 cores; other processes used 1.0"
    (v,) = confirm.combine([_v("DEGRADED", -0.344, True, reason=busy)],
                           [_v("DEGRADED", -0.35, True)])
    assert v.reason == ("-34.4 % on one night; confirmed by its retest (-35.0 %); node busy: "
                        "load 2.8 on 2 cores; other processes used 1.0")


def test_a_withdrawn_failure_on_a_busy_node_is_not_called_noise():
    """Hog trial 1 of 2026-11-28: two memory-copy hogs took 41.9 % of the
    1-thread Triad on its night and 4.0 % on its retest minutes later."""
    note = "node busy: load 1.8 on 2 cores; other processes used 1.2 cores (memhog)"
    night = _v("DEGRADED", -0.419, True, variable="triad_1t",
               reason=f"-41.9 % on one night; {note}")
    night.measurement.busy = note
    (v,) = confirm.combine([night], [_v("PASS", -0.04, variable="triad_1t")])
    assert (v.verdict, v.retest) == ("PASS", "withdrawn")
    assert v.reason == ("-41.9 % on one night, but -4.0 % on its retest minutes later, within "
                        f"its bound: not confirmed, while other processes used the node; {note}")
