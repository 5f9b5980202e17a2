"""Runs carried between stores for real: real runs of the halo check
exported, imported into an empty store that holds another site's runs, and
the two sites compared there.  (Before/after on one site, with an injected
regression and a clean pair: tests/test_acceptance.py.)"""

import pytest
from sandbox import add_site

from bench import local_mpi
from bench.fault_injection import hpc_health_run

# About comparing runs, not building: the kernels build with CMake.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("spack_hidden")]

if local_mpi.missing_tools():
    pytest.skip(f"needs {', '.join(local_mpi.missing_tools())} (bash ci/setup.sh installs them)",
                allow_module_level=True)

def test_runs_carried_to_another_store_compare_with_its_own_site(tmp_path):
    """Export real runs, import them into an empty store that holds another
    site's runs, and compare the two sites there, normalised."""
    import os
    import subprocess
    import sys


    here = hpc_health_run.Sandbox(tmp_path / "here", hpc_health_run.Plan())
    there = hpc_health_run.Sandbox(tmp_path / "there", hpc_health_run.Plan())
    add_site(there.root, "lab", capabilities={"link_latency_us": 0.5})
    args = ["--", "-n", hpc_health_run.CHECK, "-S", "HaloExchange.sizes=8,4096"]
    # One run a side: carrying several runs and their checks is
    # tests/test_export_import.py's, on recorded runs.
    assert here.hpc_health("run", "--site", "local", "--tag", "ours", *args).returncode == 0
    env = dict(os.environ, HPC_HEALTH_ROOT=str(there.root), HPC_HEALTH_STORE=str(there.store))
    res = subprocess.run([sys.executable, "-m", "hpc_health", "run", "--site", "lab", *args],
                         env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-2000:]
    export = tmp_path / "local.json.gz"
    res = here.hpc_health("export", "--site", "local", "tag:ours", "-o", str(export))
    assert res.returncode == 0, res.stderr
    res = there.hpc_health("import", str(export))
    assert res.returncode == 0 and "imported local:" in res.stdout, res.stderr
    assert "nothing new" in there.hpc_health("import", str(export)).stdout
    res = there.hpc_health("compare", "--site", "lab", "local:tag:ours", "lab:last:1",
                           "--normalise")
    print(res.stdout, res.stderr)
    assert res.returncode in (0, 1), res.stderr
    rows = [x for x in res.stdout.splitlines() if x.startswith("HaloExchange")]
    assert len(rows) == 2 and "A/declared" in res.stdout
    assert "1/1" in rows[0]
