"""The start-up model t(P) = a + b log2 P + c P and the scale points."""

import math

import pytest

from hpc_health.checklib.startup import growth, placement
from hpc_health.judge.scaling import fit_startup, scale_points


def test_scale_points_double_the_ranks_of_a_node_then_the_nodes():
    assert scale_points(1, 2) == [(1, 1), (1, 2)]
    assert scale_points(2, 2) == [(1, 1), (1, 2), (2, 2)]
    assert scale_points(3, 6) == [(1, 1), (1, 2), (1, 4), (1, 6), (2, 6), (3, 6)]
    assert scale_points(1, 1) == [(1, 1)]


def test_logarithmic_start_up_is_told_from_linear():
    ranks = [1, 2, 4, 8, 16, 32, 64, 128]
    log = fit_startup(ranks, [0.2 + 0.03 * math.log2(p) for p in ranks])
    assert log.c == pytest.approx(0, abs=1e-9) and log.b == pytest.approx(0.03)
    assert log.linear_share < 0.01
    linear = fit_startup(ranks, [0.2 + 0.002 * p for p in ranks])
    assert linear.c == pytest.approx(0.002) and linear.linear_share > 0.5
    assert linear.at(128) == pytest.approx(0.2 + 0.256)


def test_two_points_cannot_tell_linear_from_logarithmic():
    fit = fit_startup([1, 2], [0.24, 0.30])
    assert fit.c == 0 and fit.b == pytest.approx(0.06) and fit.a == pytest.approx(0.24)


def test_a_time_never_shrinks_with_more_ranks_in_the_fit():
    fit = fit_startup([1, 2, 4, 8], [0.30, 0.25, 0.26, 0.27])
    assert min(fit.a, fit.b, fit.c) >= 0


def test_growth_is_the_largest_point_over_the_smallest_of_one_round():
    points = [(1, 1), (1, 2), (2, 2)]
    rnd = {"1x1": {"t": 0.1}, "1x2": {"t": 0.15}, "2x2": {"t": 0.3}}
    assert growth(rnd, points, "t") == pytest.approx(3.0)
    assert growth(rnd, points, "t", smallest_ranks=2) == pytest.approx(2.0)
    assert growth(rnd, [(1, 1)], "t") is None


def test_each_launcher_places_a_scale_point_its_own_way():
    assert placement("srun", 2, 4) == ["--nodes=2", "--ntasks=8", "--ntasks-per-node=4"]
    assert placement("mpirun", 2, 4) == ["--map-by", "ppr:4:node"]
