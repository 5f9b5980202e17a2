"""The newcomer's path, end to end, with the suite's own commands only.

From an empty store and no reference file: ``hpc-health run`` until the run
says its baseline is complete, then the exact command it printed, then one
clean run (HEALTHY, exit 0, every figure PASS) and one run with a fault far
outside the noise (DEGRADED, exit 1, the figure named).  The site runs one
check (``-n BarrierLatency``): the baseline counts per check, so a run of
some checks is a baseline run for those, and each run takes seconds.

The check runs on one rank, so its one figure is MPI_Init's time: the
barrier's own times on this VM sit at one of two levels (0.3 or 1.0 us, a
launch keeps one), and five runs that never saw the other level made a
clean run a false DEGRADED (1 run in 8 here), or left the figure without a
reference.  MPI_Init's time moved less than 15 % between runs here.

The fault is a slow launcher: the fault bench's PMPI interposer, preloaded
into the ranks only (Open MPI's ``mca_base_env_list``), adds 1 s to
MPI_Init (about 0.3 s here).  Every clean run preloads it with no delay, so
the fault is the delay alone.
"""

import shlex
import shutil
import subprocess

import pytest
import yaml
from sandbox import environ, hpc_health, make_root

from bench import local_mpi
from bench.fault_injection.tools import build_pmpi_delay

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(local_mpi.missing_tools()) or not shutil.which("mpicc"),
                       reason="needs mpirun and mpicc (bash ci/setup.sh installs them)"),
]

CHECK = ["--", "-n", "BarrierLatency"]
INIT_DELAY_NS = 1_000_000_000
BASELINE_RUNS = 5


def _ranks_env(lib, delay_ns):
    return {"OMPI_MCA_mca_base_env_list": f"LD_PRELOAD={lib};FI_INIT_DELAY_NS={delay_ns}"}


def _rows(stdout, variable):
    """The health table's rows of one figure."""
    return [line for line in stdout.splitlines() if line.startswith("BarrierLatency ")
            and f" {variable} " in line]


def test_from_an_empty_store_to_a_suite_that_fails(tmp_path):
    root = make_root(tmp_path, references=False)
    path = root / "site_configs" / "local" / "site.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["baseline_runs"] = BASELINE_RUNS
    doc["partitions"]["default"]["ranks_per_node"] = 1
    doc["partitions"]["default"]["kernels"] = {"samples": 10, "barrier_iters": 1000}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    lib = build_pmpi_delay(tmp_path)
    clean = _ranks_env(lib, 0)

    def run(env):
        import os
        return hpc_health(root, "run", "--site", "local", *CHECK, env={**os.environ, **env})

    # Day 1 to 5: each run says how far the baseline is; the fifth, what to type.
    for day in range(1, BASELINE_RUNS + 1):
        res = run(clean)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "NO-REFERENCE" in res.stdout and "hpc-health: HEALTHY" in res.stdout
        last = res.stdout.rstrip().splitlines()[-1]
        if day < BASELINE_RUNS:
            assert last.startswith(f"Next: run again: baseline {day}/{BASELINE_RUNS}"), res.stdout
    assert last.startswith("Next: the baseline is complete"), res.stdout
    command = shlex.split(last.split("make it the reference: ", 1)[1])
    assert command[-7:-4] == ["reference", "capture", "--site"] and command[-1] == "--write"

    # The printed command, as typed (here `python -m hpc_health`: no
    # hpc-health on PATH; from ci/health.sh, the path of .venv/bin/hpc-health).
    cap = subprocess.run(command, capture_output=True, text=True, env=environ(root),
                         timeout=300)
    assert cap.returncode == 0, cap.stdout + cap.stderr
    assert "references proposed" in cap.stdout and "wrote " in cap.stdout
    written = yaml.safe_load((root / "reference" / "local.yaml").read_text())
    figures = written["BarrierLatency"]["local:default"]["gnu-mpi"]
    assert set(figures) == {"mpi_init"}, cap.stdout
    for value, lower, upper, _unit in figures.values():
        assert value > 0 and lower < 0 < upper

    # Day 6: judged, and healthy: every figure with a reference passes.
    res = run(clean)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "hpc-health: HEALTHY" in res.stdout
    for var in figures:
        (row,) = _rows(res.stdout, var)
        assert " PASS" in row, res.stdout
    assert "Next: nothing to do" in res.stdout or "have weak references" in res.stdout

    # Day 7: MPI_Init a second slower.
    res = run(_ranks_env(lib, INIT_DELAY_NS))
    assert res.returncode == 1, res.stdout + res.stderr
    assert "hpc-health: UNHEALTHY" in res.stdout
    (row,) = _rows(res.stdout, "mpi_init")
    assert "DEGRADED" in row, res.stdout
    assert "hpc-health history --site local --check 'BarrierLatency' --var" in res.stdout
