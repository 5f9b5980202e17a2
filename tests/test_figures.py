"""Figure declarations: one per figure, checked when a check is loaded, and
the verdicts that follow from them (direction never guessed)."""

import subprocess
import sys
from pathlib import Path

import pytest

from hpc_health.judge import verdicts
from hpc_health.model import figures
from hpc_health.model.figures import HIGHER, LOWER, MESSAGE_SIZES, Axis, DeclarationError, Figure
from hpc_health.model.results import Measurement

REPO = Path(__file__).resolve().parent.parent


class _Check:
    sizes = [8, 4096]
    benchmark = "osu_latency"


def test_a_figure_with_an_axis_expands_to_one_variable_per_value():
    fig = Figure("latency_{}", "us", LOWER, lambda out, size: out[size], MESSAGE_SIZES)
    got = {name: read({8: 1.5, 4096: 3.0}) for name, read in fig.instances(_Check())}
    assert got == {"latency_8B": 1.5, "latency_4KiB": 3.0}
    assert fig.group_name == "latency"


def test_where_restricts_a_figure_to_matching_instances():
    fig = Figure("bw_{}", "MB/s", HIGHER, lambda o, s: o, MESSAGE_SIZES,
                 where={"benchmark": ("osu_bw", "osu_bibw")})
    assert fig.instances(_Check()) == []


@pytest.mark.parametrize("fig,message", [
    (Figure("x", "us", "faster", lambda o: o), "better must be 'higher' or 'lower'"),
    (Figure("x", "", LOWER, lambda o: o), "unit must be a non-empty string"),
    (Figure("x_{}", "us", LOWER, lambda o, v: o), "has an axis exactly when"),
    (Figure("x", "us", LOWER, lambda o: o, Axis("sizes")), "has an axis exactly when"),
    (Figure("x-y", "us", LOWER, lambda o: o), "must be an identifier"),
    (Figure("x", "us", LOWER, "not callable"), "read must be a function"),
    (Figure("x_{}", "us", LOWER, lambda o, v: o, Axis("no_such")), "no attribute 'no_such'"),
    (Figure("x", "us", LOWER, lambda o: o, min_change=-0.1), "min_change -0.1: a fraction"),
])
def test_a_wrong_declaration_names_the_check_and_the_figure(fig, message):
    with pytest.raises(DeclarationError) as err:
        figures.validate_all("MyCheck", [fig], attrs=["sizes", "outputs"])
    assert str(err.value).startswith(f"MyCheck: figure {fig.name!r}: ")
    assert message in str(err.value)


def test_a_figure_declared_twice_is_refused():
    fig = Figure("x", "us", LOWER, lambda o: o)
    with pytest.raises(DeclarationError, match="declared twice"):
        figures.validate_all("MyCheck", [fig, fig])


BAD_CHECK = '''
import reframe as rfm
from hpc_health.checklib.check import HealthCheck
from hpc_health.model.figures import Figure


@rfm.simple_test
class BadlyDeclared(HealthCheck):
    valid_systems = ['*']
    valid_prog_environs = ['*']
    executable = 'true'
    figures = [Figure('speed', 'GB/s', 'more', lambda out: out)]
'''


@pytest.mark.slow
def test_a_check_with_a_wrong_declaration_fails_when_it_is_loaded(tmp_path):
    check = tmp_path / "bad_check.py"
    check.write_text(BAD_CHECK)
    res = subprocess.run([str(Path(sys.executable).parent / "reframe"), "-C",
                          str(REPO / "site_configs" / "local" / "reframe_config.py"),
                          "-c", str(check), "-l"], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)   # reframe writes reframe.log where it runs
    out = res.stdout + res.stderr
    assert "BadlyDeclared: figure 'speed': better must be 'higher' or 'lower'" in out, out
    assert "Found 0 check(s)" in out


def _m(var, value, better, ref=1.0):
    return Measurement(test="T", check="T", system="s", partition="p", environ="e",
                       variable=var, value=value, unit="us", ref=ref, lower=-0.1, upper=0.1,
                       result="pass", samples=[value] * 5, better=better)


def test_a_figure_without_direction_fails_alone_and_the_others_are_judged():
    ms = [_m("a", 1.0, LOWER), _m("b", 1.0, None), _m("c", 5.0, LOWER)]
    got = {v.measurement.variable: v for v in verdicts.judge_all(ms)}
    assert got["b"].verdict == verdicts.FAIL
    assert "declares no direction" in got["b"].reason
    assert got["a"].verdict == verdicts.PASS
    assert got["c"].verdict == verdicts.DEGRADED


def test_the_declared_direction_decides_not_the_name():
    # A "latency" whose check declares higher is better: 5x the reference is
    # an improvement, whatever the name suggests.
    (v,) = verdicts.judge_all([_m("latency", 5.0, HIGHER)])
    assert v.verdict == verdicts.IMPROVED
