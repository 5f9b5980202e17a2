"""The `local-slurm` site is a real Slurm cluster: two slurmd "nodes" in
network namespaces on this host.  These tests bring it up, run MPI across
both nodes through sbatch and the accounting database, and take it down.

A cluster that was already up (someone is using it) is used and left up;
one these tests started is always taken down, and checked to leave nothing
behind.
"""

import os
import pathlib
import shutil
import subprocess
import time

import pytest

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

REPO = pathlib.Path(__file__).resolve().parent.parent
CLUSTER = REPO / "site_configs" / "local-slurm" / "cluster"
STATE = pathlib.Path(os.environ.get("HPC_HEALTH_SLURM_STATE", "/var/tmp/hpc-health-slurm"))
NODES = {"node01", "node02"}

# Programs the cluster needs and the Debian packages that bring them.
_PROGRAMS = {
    "slurmctld": "slurm-wlm", "slurmd": "slurm-wlm", "sbatch": "slurm-wlm",
    "slurmdbd": "slurmdbd", "munged": "munge", "mariadbd": "mariadb-server",
    "mpicc": "libopenmpi-dev", "mpirun": "openmpi-bin",
}

HELLO_C = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size, len, sum = 0;
    char host[MPI_MAX_PROCESSOR_NAME];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);
    /* A collective proves the ranks really talk across the bridge. */
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d on %s sum %d\n", rank, size, host, sum);
    MPI_Finalize();
    return 0;
}
"""


def _run(cmd, timeout=120, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                          timeout=timeout, **kw)


def _install_missing():
    """Install what is missing with apt-get; return a reason to skip or None."""
    missing = sorted({pkg for prog, pkg in _PROGRAMS.items() if not shutil.which(prog)})
    if not missing:
        return None
    if not shutil.which("apt-get"):
        return f"missing {', '.join(missing)} and no apt-get to install them"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *missing]):
        res = _run(cmd, timeout=900, env=env)
        if res.returncode != 0:
            return f"Slurm packages not installable ({' '.join(cmd)}): {res.stderr.strip()[-300:]}"
    return None


def _reason_not_to_start():
    if os.name != "posix" or not pathlib.Path("/proc/self/ns/net").exists():
        return "needs Linux namespaces"
    if os.geteuid() != 0:
        return "needs root (network namespaces, a bridge and system daemons)"
    for tool in ("ip", "unshare", "nsenter", "flock"):
        if not shutil.which(tool):
            return f"needs {tool} (iproute2/util-linux)"
    probe = _run(["unshare", "--net", "--uts", "--mount", "true"], timeout=20)
    if probe.returncode != 0:
        return f"cannot create namespaces here: {probe.stderr.strip()}"
    return _install_missing()


def _leftovers():
    """What `down` should have removed, if any of it is still there."""
    left = []
    if STATE.exists():
        left.append(str(STATE))
    links = _run(["ip", "-o", "link", "show"]).stdout
    left += [line.split(":")[1].strip() for line in links.splitlines() if "hhs-" in line]
    netns = pathlib.Path("/run/netns")
    if netns.is_dir():
        left += [f"netns {p.name}" for p in netns.iterdir() if p.name.startswith("hhs-")]
    left += [str(p) for p in pathlib.Path("/sys/fs/cgroup").glob("*/slurm_node0[12]")]
    left += [str(p) for p in pathlib.Path("/sys/fs/cgroup").glob("*/hpc-health-slurm")]
    link = pathlib.Path("/etc/slurm/slurm.conf")
    if link.is_symlink() and str(STATE) in os.readlink(link):
        left.append(str(link))
    for pid in pathlib.Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (pid / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(STATE) in cmdline:
            left.append(f"process {pid.name}: {cmdline[:80]}")
    return left


@pytest.fixture(scope="module")
def cluster():
    """Environment for Slurm and Open MPI clients of a running cluster."""
    reason = _reason_not_to_start()
    if reason:
        pytest.skip(reason)
    started = False
    if _run([CLUSTER, "status"]).returncode != 0:
        t0 = time.monotonic()
        up = _run([CLUSTER, "up"], timeout=300)
        assert up.returncode == 0, f"cluster up failed:\n{up.stdout}\n{up.stderr}"
        started = True
        print(f"cluster up in {time.monotonic() - t0:.1f} s")
    try:
        exports = _run([CLUSTER, "env"]).stdout
        env = dict(os.environ)
        for line in exports.splitlines():
            key, _, value = line.removeprefix("export ").partition("=")
            env[key] = value
        # Slurm and Open MPI inherit the caller's allocation otherwise.
        for key in [k for k in env if k.startswith("SLURM_") and k != "SLURM_CONF"]:
            del env[key]
        yield env
    finally:
        if started:
            down = _run([CLUSTER, "down"], timeout=120)
            assert down.returncode == 0, f"cluster down failed:\n{down.stdout}\n{down.stderr}"
            assert not _leftovers(), f"cluster down left behind: {_leftovers()}"


@pytest.fixture(scope="module")
def hello(cluster, tmp_path_factory):
    """An MPI hello built with Debian's mpicc, on the file system both nodes see."""
    d = tmp_path_factory.mktemp("slurm-hello")
    (d / "hello.c").write_text(HELLO_C)
    res = _run(["mpicc", "-o", d / "hello", d / "hello.c"], env=cluster)
    assert res.returncode == 0, res.stderr
    return d / "hello"


def _wait_for_job(env, jobid, timeout=90):
    """Poll accounting, as ReFrame's slurm scheduler does; return the final state."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        res = _run(["sacct", "-n", "-X", "-P", "-j", jobid, "-o", "State,AllocNodes"], env=env)
        fields = res.stdout.strip().split("|")
        if fields[0] and not fields[0].startswith(("PENDING", "RUNNING", "CONFIGURING",
                                                    "COMPLETING", "REQUEUED")):
            return fields
        time.sleep(0.2)
    _run(["scancel", jobid], env=env)
    pytest.fail(f"job {jobid} did not finish in {timeout} s")


def test_both_nodes_are_up(cluster):
    res = _run(["sinfo", "-h", "-N", "-o", "%N %P %T"], env=cluster)
    assert res.returncode == 0, res.stderr
    rows = [line.split() for line in res.stdout.splitlines()]
    usable = ("idle", "mixed", "allocated", "completing")
    assert {n for n, _, s in rows if s in usable} == NODES, res.stdout
    assert {(n, p.rstrip("*")) for n, p, _ in rows} == {
        ("node01", "batch"), ("node02", "batch"), ("node01", "debug")}


def test_mpi_job_spans_two_nodes(cluster, hello, tmp_path):
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\nmpirun {hello}\n")
    out = tmp_path / "job.out"
    t0 = time.monotonic()
    sub = _run(["sbatch", "--parsable", "--partition=batch", "--nodes=2",
                "--ntasks-per-node=2", f"--output={out}", script], env=cluster)
    assert sub.returncode == 0, sub.stderr
    jobid = sub.stdout.strip().split(";")[0]
    # NodeList in accounting lags behind the job's end by a moment; the
    # node count is there as soon as the state is.
    state, nnodes = _wait_for_job(cluster, jobid)
    print(f"job {jobid} {state} on {nnodes} nodes after {time.monotonic() - t0:.1f} s")
    text = out.read_text() if out.exists() else ""
    assert state == "COMPLETED", f"job {jobid} ended {state}:\n{text}"
    assert nnodes == "2"
    ranks = [line.split() for line in text.splitlines() if line.startswith("rank ")]
    assert sorted(int(r[1]) for r in ranks) == [0, 1, 2, 3], text
    assert {r[5] for r in ranks} == NODES, text
    assert all(r[7] == "6" for r in ranks), text


def test_srun_places_one_task_per_node(cluster):
    res = _run(["srun", "--nodes=2", "--ntasks=2", "hostname"], env=cluster, timeout=60)
    assert res.returncode == 0, res.stderr
    assert sorted(res.stdout.split()) == sorted(NODES)


def test_up_again_changes_nothing(cluster):
    pid_file = STATE / "ctld" / "slurmctld.pid"
    before = pid_file.read_text()
    res = _run([CLUSTER, "up"], timeout=60)
    assert res.returncode == 0, res.stderr
    assert "already up" in res.stdout
    assert pid_file.read_text() == before


# ---- the health checks through the cluster -------------------------------

# One halo variant and the barrier, two launches each: enough to prove
# multi-node placement, short enough for CI (and fewer two-node launches for
# Open MPI's btl/tcp crash below to strike).
SUBSET = ["-n", "HaloExchange%dims=1%strategy=SERE", "-n", "BarrierLatency", "-S", "samples=2"]


def _stored_cases(root):
    import json
    runs = sorted((root.parent / "store" / "runs" / "local-slurm").iterdir())
    report = json.loads((runs[-1] / "report.json").read_text())
    # The last attempt of each case (ReFrame lists a retried case again).
    last = {tc["display_name"]: tc for run in report["runs"] for tc in run["testcases"]
            if not tc["fixture"]}
    return list(last.values())


def test_kernel_checks_cross_both_nodes(cluster, tmp_path):
    from sandbox import hpc_health, make_root
    root = make_root(tmp_path, sites=("local-slurm",), references=False)
    # Retries: Open MPI's btl/tcp crash (below) is not what this is about.
    res = hpc_health(root, "run", "--site", "local-slurm", "--partition", "batch", "--",
                     *SUBSET, "--max-retries=2", env=cluster)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    cases = _stored_cases(root)
    assert {tc["display_name"].split()[0] for tc in cases} == {"HaloExchange", "BarrierLatency"}
    for tc in cases:
        # The job prints its allocation ($SLURM_JOB_NODELIST) and ReFrame keeps
        # that output with the run: the ranks really ran on both nodes, two
        # per node.  (ReFrame's job_nodelist comes from sacct, whose NodeList
        # can lag behind a job that just ended.)
        out = pathlib.Path(tc["outputdir"], "rfm_job.out").read_text()
        assert "hpc-health: nodes node[01-02]" in out, out[:500]
        assert tc["num_tasks"] == 4 and tc["result"] == "pass"
    assert "median_n4" in res.stdout and "time_1MiB" in res.stdout


def test_the_start_up_sweep_crosses_both_nodes_under_srun_and_mpirun(cluster, tmp_path):
    from sandbox import hpc_health, make_root
    root = make_root(tmp_path, sites=("local-slurm",), references=False)
    # Debian's Open MPI 4.1.4 crashes now and then in btl/tcp's connect when
    # a loaded host starts ranks on both nodes (SIGSEGV after "connect() ...
    # failed: Operation now in progress (115)", open-mpi/ompi#10734, fixed
    # in 4.1.8): ~1 in 25 srun launches of the two-node point here.  The
    # nightly run shows it as the FAIL it is (docs/tuning.md); this test is
    # about the sweep, so ReFrame retries a crashed check (without retries 2
    # of 10 runs of this test failed so).
    res = hpc_health(root, "run", "--site", "local-slurm", "--partition", "batch", "--",
                     "-n", "StartupScaling", "--max-retries=2", env=cluster)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    table = res.stdout.split("verdict", 1)[1]
    for launcher in ("srun", "mpirun"):
        rows = [ln for ln in table.splitlines() if f"%launcher={launcher} " in ln]
        assert {ln.split()[4] for ln in rows} >= {"mpi_init_1x1", "mpi_init_2x2",
                                                  "first_barrier_2x2", "init_growth"}, table
    passed = [tc for tc in _stored_cases(root) if tc["result"] == "pass"]
    assert {tc["launcher"] for tc in passed} == {"srun", "mpirun"}
    for tc in passed:
        out = pathlib.Path(tc["outputdir"], "rfm_job.out").read_text()
        # Every launch of the two-node point ran to its end, on 4 ranks.
        assert out.count("hpc-health: case 2x2 exit 0") == 5, out[-2000:]
