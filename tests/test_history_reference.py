"""`hpc-health history` and the nightly drift test judge a series by its
own noise, from where its stored reference's baseline begins: a step before
a reference was re-captured is the level that reference adopted.  Runs built
from the recorded 1-thread STREAM series."""

import yaml
from sandbox import hpc_health, make_root
from store_fixtures import case, series, write_run

from hpc_health import stats

# The recorded series' first 15 nights: one episode, quiet within itself.
QUIET = series("stream_triad_1t")[:15]
# -12 % from night 16 on, nine nights.
STEPPED = QUIET + [v * 0.88 for v in QUIET[:9]]


def _run_id(n):
    return f"202611{n + 1:02d}T020000Z"


def _store_nights(root, nights):
    for n, v in enumerate(nights):
        rid = _run_id(n)
        write_run(root.parent / "store", "local", rid,
                  [case("StreamTriad", "triad", v, "MB/s")], started=rid)


def _write_reference(root, ref, runs=None, **extra):
    """reference/local.yaml as `reference capture --write` lays it out,
    captured from *runs* (run ids)."""
    prov = {"samples": ref.n, "runs": runs or [f"r{i}" for i in range(ref.runs)],
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


def test_a_twelve_percent_step_is_found_and_dated_by_the_series_own_noise(tmp_path):
    root = make_root(tmp_path, references=False)
    _store_nights(root, STEPPED)
    res = _history(root)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "DEGRADED since run 2026111" in res.stdout     # dated at the step, night 16 +- 2
    assert "steps looked for over all its runs" in res.stdout
    scan = hpc_health(root, "history", "--site", "local", "--all")
    assert scan.returncode == 1 and "DEGRADED since" in scan.stdout
    assert _history_of_quiet(tmp_path / "quiet").returncode == 0


def _history_of_quiet(where):
    root = make_root(where, references=False)
    _store_nights(root, QUIET + QUIET[:9])
    res = _history(root)
    assert "no sustained step" in res.stdout, res.stdout + res.stderr
    return res


def test_a_step_before_the_reference_was_recaptured_is_not_a_drift_of_it(tmp_path):
    """The operator accepted the new level: references captured from the
    nights since the step.  From there on the series is level."""
    after = [[v] for v in STEPPED[15:]]
    ref = stats.propose_reference(after, "MB/s", stats.HIGHER)
    root = make_root(tmp_path, references=False)
    _store_nights(root, STEPPED)
    _write_reference(root, ref, runs=[_run_id(n) for n in range(15, len(STEPPED))])
    res = _history(root)
    assert res.returncode == 0 and "no sustained step" in res.stdout, res.stdout + res.stderr
    assert f"steps looked for from run {_run_id(15)}" in res.stdout


def test_a_reference_measured_on_other_hardware_does_not_cut_the_series(tmp_path):
    after = [[v] for v in STEPPED[15:]]
    ref = stats.propose_reference(after, "MB/s", stats.HIGHER)
    root = make_root(tmp_path, references=False)
    _store_nights(root, STEPPED)
    _write_reference(root, ref, runs=[_run_id(n) for n in range(15, len(STEPPED))],
                     **{"$hardware": {"local:default": {"cpu": "Other CPU", "cpus": 128}}})
    res = _history(root)
    assert res.returncode == 1 and "DEGRADED since run 2026111" in res.stdout, res.stdout


def test_a_step_inside_the_baseline_is_not_a_drift_from_the_reference_it_made(tmp_path):
    """Walk 9's first night after its capture: four halo times DRIFTING
    "since" the fourth baseline run (three runs low, two high, the night
    after high).  The capture took those levels as the figure's noise; a
    drift begins after it, and one found there still is."""
    nights = QUIET[:3] + [v * 0.7 for v in QUIET[3:6]]
    runs = [_run_id(n) for n in range(5)]
    ref = stats.propose_reference([[v] for v in nights[:5]], "MB/s", stats.HIGHER)
    root = make_root(tmp_path, references=False)
    _store_nights(root, nights)
    _write_reference(root, ref, runs=runs)
    res = _history(root)
    assert res.returncode == 0 and "no sustained step" in res.stdout, res.stdout + res.stderr
    without = make_root(tmp_path / "without", references=False)
    _store_nights(without, nights)
    assert _history(without).returncode == 1

    root = make_root(tmp_path / "later", references=False)
    _store_nights(root, STEPPED)
    ref = stats.propose_reference([[v] for v in STEPPED[:5]], "MB/s", stats.HIGHER)
    _write_reference(root, ref, runs=runs)
    res = _history(root)
    assert res.returncode == 1 and "DEGRADED since run 2026111" in res.stdout, res.stdout
