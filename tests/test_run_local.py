"""End to end: `hpc-health run` on the local site, with real ReFrame, real
CMake builds and real `mpirun`."""

import json
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from sandbox import hpc_health, make_root

pytestmark = pytest.mark.slow

if not shutil.which("mpirun") or not shutil.which("cmake"):
    pytest.skip("needs mpirun and cmake (bash ci/setup.sh installs them)", allow_module_level=True)

# One halo variant and the barrier, two launches each, keep each run short;
# the full set runs in the README's health command.
SUBSET = ["-n", "HaloExchange%dims=1%strategy=SERE", "-n", "BarrierLatency", "-S", "samples=2"]


def _write_refs(root, data):
    (root / "reference" / "local.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def test_list_names_every_check(tmp_path):
    root = make_root(tmp_path)
    res = hpc_health(root, "run", "--site", "local", "--list")
    assert res.returncode == 0, res.stderr
    for dims in (1, 2, 3):
        for strategy in ("BSBR", "SERE", "ISBR", "ISIR", "IRIS"):
            assert f"HaloExchange %dims={dims} %strategy={strategy}" in res.stdout
    assert "BarrierLatency" in res.stdout
    # One shared build, listed under each of the 16 kernel checks; the
    # tuning sweeps are left out of a plain run, saying how to run them.
    assert res.stdout.count("^KernelsBuild") == 16
    assert "IorHints" not in res.stdout and "StartupScaling" not in res.stdout
    assert "the sweeps (tag tuning) are left out: run them after an upgrade or weekly " \
        "with --tuning" in res.stdout
    sweeps = hpc_health(root, "run", "--site", "local", "--list", "--tuning")
    assert sweeps.returncode == 0, sweeps.stderr
    # ... and with --tuning the start-up sweep's two launchers share it too.
    assert sweeps.stdout.count("^KernelsBuild") == 18
    for name in ("IorHints %setting=romio_cb_enable", "OsuCollectiveAlgorithms",
                 "StartupScaling %launcher=mpirun"):
        assert name in sweeps.stdout


def test_a_selection_that_matches_no_check_says_so(tmp_path):
    # A build fixture's name selects nothing: ReFrame runs no check.
    root = make_root(tmp_path, references=False)
    res = hpc_health(root, "run", "--site", "local", "--", "-n", "StreamBuild")
    assert res.returncode == 2, res.stdout + res.stderr
    assert ("hpc-health: no check matched -n StreamBuild: ReFrame ran none" in res.stderr
            and "hpc-health run --site local --list" in res.stderr), res.stderr
    assert "wrote no run report" not in res.stderr


def test_run_without_references_reports_no_reference(tmp_path):
    root = make_root(tmp_path, references=False)
    res = hpc_health(root, "run", "--site", "local", "--", *SUBSET)
    assert res.returncode == 0, res.stdout + res.stderr
    table = res.stdout.split("verdict", 1)[1]
    for var in ("time_8B", "time_1MiB", "median_n2", "mpi_init"):
        assert var in table
    assert "PASS" not in table  # nothing can pass without a reference
    assert "NO-REFERENCE" in table
    assert "references: no reference file; collecting a baseline" in res.stdout
    assert "kernels built with cmake" in open(_job_out(root, "BarrierLatency")).read()
    run = _latest_run(root)
    assert run["exit_code"] == 0 and run["site"] == "local"
    # ReFrame's debug logs are kept with the run, none left as /tmp/rfm-*.log.
    runs = sorted((root.parent / "store" / "runs" / "local").iterdir())
    assert "Running 3 check(s)" in (runs[-1] / "reframe-debug.log").read_text()
    config = str(root / "site_configs" / "local" / "reframe_config.py")
    assert config in (runs[-1] / "reframe-start.log").read_text()
    left = [p for p in Path(tempfile.gettempdir()).glob("rfm-*.log")
            if config in p.read_text(errors="replace")]
    assert not left, left


def test_the_start_up_sweep_runs_every_scale_point_under_mpirun(tmp_path):
    root = make_root(tmp_path, references=False)
    res = hpc_health(root, "run", "--site", "local", "--", "-n", "StartupScaling")
    assert res.returncode == 0, res.stdout + res.stderr
    table = res.stdout.split("verdict", 1)[1]
    for var in ("mpi_init_1x1", "mpi_init_1x2", "first_barrier_1x2", "init_growth"):
        assert f" {var} " in table, table
    # One rank has no barrier to wait for: no figure, not a zero.
    assert "first_barrier_1x1" not in table
    assert "SKIPPED: StartupScaling %launcher=srun: srun needs a Slurm partition" in res.stdout
    runs = sorted((root.parent / "store" / "runs" / "local").iterdir())
    out = next(runs[-1].glob("output/**/StartupScaling_*/rfm_job.out")).read_text()
    assert out.count("hpc-health: case 1x2 exit 0") == 5


def test_impossible_reference_exits_1_and_names_variable(tmp_path):
    root = make_root(tmp_path)
    _write_refs(root, {"HaloExchange": {
        "$index": ["$partition", "$environ", "dims", "strategy"],
        "local:default": {"gnu-mpi": {1: {"SERE": {
            # No machine exchanges 1 MiB in a nanosecond.
            "time_1MiB": [0.001, None, 0.1, "us"]}}}}}})
    res = hpc_health(root, "run", "--site", "local", "--", *SUBSET)
    assert res.returncode == 1, res.stdout + res.stderr
    rows = [line for line in res.stdout.splitlines() if "time_1MiB" in line]
    assert rows and "DEGRADED" in rows[-1]
    assert "UNHEALTHY" in res.stdout


def test_malformed_reference_exits_2_naming_file_and_line(tmp_path):
    root = make_root(tmp_path)
    (root / "reference" / "local.yaml").write_text(
        "HaloExchange:\n"
        "  $index: [$partition]\n"
        "  'local:default':\n"
        "    time_8B: [fast, -0.1, 0.1, us]\n")
    res = hpc_health(root, "run", "--site", "local")
    assert res.returncode == 2
    assert "reference/local.yaml:4" in res.stderr
    assert "time_8B" in res.stderr and "not a number" in res.stderr


def test_yaml_syntax_error_exits_2_with_line(tmp_path):
    root = make_root(tmp_path)
    (root / "reference" / "local.yaml").write_text("HaloExchange:\n  a: [1, 2\n  b: c\n")
    res = hpc_health(root, "run", "--site", "local")
    assert res.returncode == 2
    assert "reference/local.yaml:" in res.stderr and "YAML syntax error" in res.stderr


def test_bad_site_setting_exits_2_naming_key(tmp_path):
    root = make_root(tmp_path)
    p = root / "site_configs" / "local" / "site.yaml"
    p.write_text(p.read_text().replace("nodes: 1", "nodes: many"))
    res = hpc_health(root, "run", "--site", "local")
    assert res.returncode == 2
    assert "site.yaml:" in res.stderr and "partitions.default.nodes" in res.stderr


def test_unknown_site_and_partition_exit_2(tmp_path):
    root = make_root(tmp_path)
    res = hpc_health(root, "run", "--site", "nowhere")
    assert res.returncode == 2 and "no such site 'nowhere'" in res.stderr
    res = hpc_health(root, "run", "--site", "local", "--partition", "gpu")
    assert res.returncode == 2 and "no partition 'gpu'" in res.stderr


def _latest_run(root):
    runs = sorted((root.parent / "store" / "runs" / "local").glob("*/run.json"))
    return json.loads(runs[-1].read_text())


def _job_out(root, test):
    runs = sorted((root.parent / "store" / "runs" / "local").iterdir())
    return next(runs[-1].glob(f"output/**/{test}/rfm_job.out"))
