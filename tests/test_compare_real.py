"""Before/after on real local runs: the halo check run by `hpc-health run`
(ReFrame, the kernels, mpirun) with run tags, the new stack carrying an
injected regression (the fault bench's PMPI delay on every rank), judged by
`hpc-health compare`, and a clean pair that is not."""

import pytest

from bench.fault_injection import hpc_health_run
from bench.fault_injection.faults import FAULTS
from bench.fault_injection.tools import build_pmpi_delay
from hpc_health import local_mpi

pytestmark = pytest.mark.slow

if local_mpi.missing_tools():
    pytest.skip(f"needs {', '.join(local_mpi.missing_tools())} (bash ci/setup.sh installs them)",
                allow_module_level=True)

RUNS = 3


def test_an_injected_regression_is_regressed_with_its_cause_in_the_stack_diff(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fault = FAULTS["latency"]({"pmpi_delay": build_pmpi_delay(bindir)}, opts=None)
    box = hpc_health_run.Sandbox(tmp_path, hpc_health_run.Plan())

    def run(tag, env):
        res = box.hpc_health("run", "--site", "local", "--tag", tag, "--note", f"{tag} run",
                             "--", "-n", hpc_health_run.CHECK,
                             "-S", "HaloExchange.sizes=8,4096", ranks_env=env)
        assert res.returncode in (0, 1), res.stdout[-2000:] + res.stderr[-2000:]

    for _ in range(RUNS):
        run("before", fault.clean_env())
    # ~+300 % at 4 KiB: far beyond what two shared cores do to a halo time.
    with fault.apply(10000) as (env, _):
        for _ in range(RUNS):
            run("after", env)
    for _ in range(RUNS):
        run("clean", fault.clean_env())

    listed = box.hpc_health("runs", "--site", "local", "tag:after")
    assert listed.returncode == 0 and listed.stdout.count("tags after") == RUNS
    assert "note 'after run'" in listed.stdout

    bad = box.hpc_health("compare", "--site", "local", "tag:before", "tag:after")
    print(bad.stdout, bad.stderr)
    assert bad.returncode == 1
    row = next(x for x in bad.stdout.splitlines() if "time_4KiB" in x and "Halo" in x)
    assert "REGRESSED" in row and f"{RUNS}/{RUNS}" in row
    # What changed in the stack: the preloaded delay in the ranks' environment.
    assert "$OMPI_MCA_mca_base_env_list:" in bad.stdout
    assert "FI_DELAY_NS=10000" in bad.stdout.split("stack diff")[1]

    good = box.hpc_health("compare", "--site", "local", "tag:before", "tag:clean",
                          "--margin", "1.0")
    print(good.stdout, good.stderr)
    assert good.returncode == 0
    assert "REGRESSED" not in good.stdout
    rows = [x for x in good.stdout.splitlines() if x.startswith("HaloExchange")]
    assert rows and all(x.rstrip().endswith("SAME") for x in rows)
    assert "stack diff: none" in good.stdout
