"""The fault bench's --hpc-health-run mode, for real: the PMPI delay on
every rank of the halo check, judged by `hpc-health run` itself against a
reference captured from clean runs in a throw-away root and store."""

import pytest

from bench import local_mpi
from bench.fault_injection import hpc_health_run

pytestmark = pytest.mark.slow

if local_mpi.missing_tools():
    pytest.skip(f"needs {', '.join(local_mpi.missing_tools())} (bash ci/setup.sh installs them)",
                allow_module_level=True)


def test_a_strong_latency_fault_is_degraded_and_the_clean_run_is_not(tmp_path):
    # +800 %: the halo time's level moves by up to x1.7 from one run to the
    # next when other processes share the two cores, and five reference runs
    # with one such episode among them (9-12 us against 6 us, CI on
    # 2026-11-25) make the verdict's critical change about x5 at Holm's
    # alpha: +200 % was then, rightly, not significant.  Runs that other
    # processes disturbed get one re-run; the test stays within ~3 minutes.
    plan = hpc_health_run.Plan(fault="latency", worse=(8.0,), reference_runs=5,
                               judged_pairs=1, reruns=1, max_wait=20)
    record = hpc_health_run.run(plan, tmp_path, log=print)

    assert len(record["reference_runs"]) == 5
    ref = record["reference"]
    assert ref["unit"] == "us" and ref["value"] > 0 and ref["upper"] > 0
    clean, faulty = record["runs"]
    assert clean["kind"] == "clean" and faulty["kind"] == "faulty"
    assert faulty["exit_code"] == 1, faulty
    assert faulty["figures"]["time_4KiB"]["verdict"] == "DEGRADED"
    assert faulty["setting"]["delay_ns"] == round(8.0 * ref["value"] * 1000 / 2)
    assert clean["exit_code"] == 0, clean
    assert all(f["verdict"] != "DEGRADED" for f in clean["figures"].values())
    assert record["all_as_expected"]
    # the faulty run is the slower by far: the delay reached the ranks
    assert (faulty["figures"]["time_4KiB"]["value"]
            > 2 * clean["figures"]["time_4KiB"]["value"])
    table = hpc_health_run.render(record)
    assert f"| {faulty['run']} | faulty | +800 % | delay_ns=" in table
