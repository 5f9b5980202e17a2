"""`hpc-health history` judges a series against the site's stored reference:
its value is the healthy level and its recorded noise the yardstick a step
is measured against.  Runs built from the recorded 1-thread STREAM series."""

import yaml
from sandbox import hpc_health, make_root
from store_fixtures import case, series, write_run

from hpc_health.judge import stats

# The recorded series' first 15 nights: one episode, quiet within itself.
QUIET = series("stream_triad_1t")[:15]


def _store_nights(root, nights):
    for n, v in enumerate(nights):
        rid = f"202611{n + 1:02d}T020000Z"
        write_run(root.parent / "store", "local", rid,
                  [case("StreamTriad", "triad", v, "MB/s")], started=rid)


def _write_reference(root, ref, **extra):
    """reference/local.yaml as `reference capture --write` lays it out."""
    prov = {"samples": ref.n, "runs": [f"r{i}" for i in range(ref.runs)],
            "spread": ref.spread, "between_run_spread": ref.between_run_spread,
            "estimator": ref.estimator}
    data = {"StreamTriad": {"local:default": {
                "triad": [ref.value, ref.lower, ref.upper, "MB/s"]}},
            "$provenance": {"StreamTriad": {"local:default/triad": prov}}}
    data.update(extra)
    (root / "reference" / "local.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def _history(root):
    return hpc_health(root, "history", "--site", "local", "--check", "StreamTriad",
                      "--var", "triad")


def test_the_reference_noise_catches_a_step_the_series_alone_hides(tmp_path):
    # -7 % from night 16 on.  Alone, the series' spread includes the step
    # itself and hides it; the reference captured on the quiet nights knows
    # the healthy noise (4.5 % between runs) and the healthy level.
    nights = QUIET + [v * 0.93 for v in QUIET[:9]]
    ref = stats.propose_reference([[v] for v in QUIET], "MB/s", stats.HIGHER)

    alone = make_root(tmp_path / "alone", references=False)
    _store_nights(alone, nights)
    res = _history(alone)
    assert res.returncode == 0 and "no sustained step" in res.stdout, res.stdout + res.stderr

    judged = make_root(tmp_path / "judged", references=False)
    _store_nights(judged, nights)
    _write_reference(judged, ref)
    res = _history(judged)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "DEGRADED since run 2026111" in res.stdout     # dated at the step, night 16 +- 2
    assert "against reference" in res.stdout
    scan = hpc_health(judged, "history", "--site", "local", "--all")
    assert scan.returncode == 1 and "DEGRADED since" in scan.stdout


def test_a_reference_that_recorded_wide_noise_silences_a_step_within_it(tmp_path):
    # -10 % from night 16: a step for a quiet series, but this figure's
    # reference recorded run-to-run episodes of 12 %: within its healthy life.
    nights = QUIET + [v * 0.9 for v in QUIET[:9]]
    ref = stats.propose_reference([[v] for v in QUIET], "MB/s", stats.HIGHER)
    ref.between_run_spread = 0.12

    root = make_root(tmp_path, references=False)
    _store_nights(root, nights)
    assert _history(root).returncode == 1           # alone: a step
    _write_reference(root, ref)
    res = _history(root)
    assert res.returncode == 0 and "no sustained step" in res.stdout, res.stdout + res.stderr


def test_a_reference_measured_on_other_hardware_is_not_used(tmp_path):
    nights = QUIET + [v * 0.93 for v in QUIET[:9]]
    ref = stats.propose_reference([[v] for v in QUIET], "MB/s", stats.HIGHER)
    root = make_root(tmp_path, references=False)
    _store_nights(root, nights)
    _write_reference(root, ref, **{"$hardware": {"local:default": {"cpu": "Other CPU",
                                                                   "cpus": 128}}})
    res = _history(root)
    assert res.returncode == 0 and "no sustained step" in res.stdout, res.stdout + res.stderr
    assert "no reference" in res.stdout
