"""ci/acceptance.sh for real: pre-upgrade runs tagged, the acceptance runs
compared with them, ACCEPT with the re-baseline command that then works,
and REJECT when the new stack carries an injected regression."""

import os
import subprocess

import pytest

from bench.fault_injection import hpc_health_run
from bench.fault_injection.faults import FAULTS
from bench.fault_injection.tools import build_pmpi_delay
from hpc_health import local_mpi, paths

pytestmark = pytest.mark.slow

if local_mpi.missing_tools():
    pytest.skip(f"needs {', '.join(local_mpi.missing_tools())} (bash ci/setup.sh installs them)",
                allow_module_level=True)

CHECK = ["--", "-n", hpc_health_run.CHECK, "-S", "HaloExchange.sizes=8,4096"]


def test_acceptance_accepts_a_clean_stack_and_rejects_a_regressed_one(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fault = FAULTS["latency"]({"pmpi_delay": build_pmpi_delay(bindir)}, opts=None)
    box = hpc_health_run.Sandbox(tmp_path, hpc_health_run.Plan())
    for _ in range(2):
        res = box.hpc_health("run", "--site", "local", "--tag", "pre-upgrade", *CHECK)
        assert res.returncode == 0, res.stdout[-2000:]

    def acceptance(tag, ranks_env=None):
        env = dict(os.environ, HPC_HEALTH_ROOT=str(box.root), HPC_HEALTH_STORE=str(box.store),
                   HPC_HEALTH=f"{paths.repo_root()}/.venv/bin/hpc-health", TAG=tag)
        if not os.path.exists(env["HPC_HEALTH"]):
            env.pop("HPC_HEALTH")
        if ranks_env:
            env["OMPI_MCA_mca_base_env_list"] = ";".join(f"{k}={v}" for k, v in ranks_env.items())
        return subprocess.run(["bash", str(paths.repo_root() / "ci" / "acceptance.sh"), "local",
                               "2", *CHECK], capture_output=True, text=True, env=env,
                              timeout=900)

    ok = acceptance("upgrade-1")
    print(ok.stdout, ok.stderr)
    assert ok.returncode == 0, ok.stdout[-3000:] + ok.stderr[-2000:]
    assert "compared with tag:pre-upgrade" in ok.stdout
    assert "== acceptance of local: ACCEPT" in ok.stdout
    assert "--from tag:upgrade-1 --write" in ok.stdout
    # The command it prints re-baselines on exactly those two runs.
    cap = box.hpc_health("reference", "capture", "--site", "local", "--from", "tag:upgrade-1")
    assert cap.returncode == 0, cap.stderr
    assert "time_4KiB" in cap.stdout

    with fault.apply(10000) as (env, _):
        bad = acceptance("upgrade-2", env)
    print(bad.stdout, bad.stderr)
    assert bad.returncode == 1
    assert "REGRESSED" in bad.stdout and "FI_DELAY_NS=10000" in bad.stdout
    assert "== acceptance of local: REJECT (figures REGRESSED against tag:pre-upgrade)" \
        in bad.stdout
