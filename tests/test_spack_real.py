"""The Spack path for real: every check of the `local` site built through
Spack (STREAM, OSU, IOR/mdtest with Darshan, our kernels) and run, a warm
second run (one check of each spec set) that runs no Spack command and gives
those checks' figures again, and a Spack failure that fails only the checks
needing the broken spec.

Spack comes from ``$HPC_HEALTH_TEST_SPACK_ROOT``, ``spack`` on PATH,
``$SPACK_ROOT``, or is bootstrapped from the offline kit named by
``$HPC_HEALTH_SPACK_KIT`` (``.ci/run`` points it at ``../shared/spack-kit``).
The Spack environments are new for every test session (so the first run
concretizes); the install tree lives in the hpc-health cache, outside the
checkout, so a later session on the same machine installs nothing new.
"""

import json
import os
import re
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from sandbox import environment_held, hpc_health, make_root

from hpc_health.spack import kit as spack_kit

pytestmark = [pytest.mark.slow, pytest.mark.spack, pytest.mark.spack_build]

KIT = os.environ.get("HPC_HEALTH_SPACK_KIT")
SPACK = spack_kit.find_spack(os.environ.get("HPC_HEALTH_TEST_SPACK_ROOT"))
if SPACK is None and KIT and Path(KIT).is_dir():
    SPACK = spack_kit.setup(KIT)["spack"]
if SPACK is None:
    pytest.skip("no Spack: set HPC_HEALTH_SPACK_KIT to an offline kit (../shared/spack-kit), "
                "put `spack` on PATH, set SPACK_ROOT or HPC_HEALTH_TEST_SPACK_ROOT",
                allow_module_level=True)

TIMEOUT = 3600
INSTALL_TREE = spack_kit.cache_root() / "test-install-tree"


def _sandbox(tmp_path, **partition):
    root = make_root(tmp_path, references=False)
    path = root / "site_configs" / "local" / "site.yaml"
    doc = yaml.safe_load(path.read_text())
    spack = doc["spack"]
    if os.environ.get("HPC_HEALTH_TEST_SPACK_ROOT"):
        spack["spack_root"] = os.environ["HPC_HEALTH_TEST_SPACK_ROOT"]
    spack["env_dir"] = str(tmp_path / "spack-envs")
    spack["install_tree"] = str(INSTALL_TREE)
    # Small sizes: this is about the Spack path, not about the figures.
    # OSU 7.4's -c validation checks every buffer of every iteration: at
    # -i 100 osu_bw and osu_bibw up to 4 MiB took 110-126 s each here
    # (OSU's own counts: about 30 s), at -i 10 11-13 s, up to 64 KiB 2 s.
    doc["partitions"]["default"].update({
        "kernels": {"samples": 2, "halo_iters": 50, "barrier_iters": 200},
        "stream": {"samples": 2},
        "osu": {"iterations": 10, "warmup": 2, "samples": 2,
                "sizes": {"bw": [16384, 65536], "bibw": [16384, 65536]}},
        "osu_algorithms": {"rounds": 1},
        "ior": {"block_size": "2m", "segments": 2, "repetitions": 2},
        "mdtest": {"items": 50, "samples": 2},
        "scratch": str(tmp_path / "scratch"),
        **partition,
    })
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return root


def _report(root):
    runs = sorted((root.parent / "store" / "runs" / "local").iterdir())
    return runs[-1], json.loads((runs[-1] / "report.json").read_text())


def _cases(report):
    return {tc["display_name"].split(" ~")[0]: tc
            for run in report["runs"] for tc in run["testcases"]}


def _spack_records(run_dir, where="output"):
    return [json.loads(p.read_text()) for p in run_dir.glob(f"{where}/**/spack-build.json")]


def _figures(report):
    return {(tc["display_name"], key.split(":")[-1])
            for run in report["runs"] for tc in run["testcases"]
            for key in (tc.get("perfvalues") or {})}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """One sandbox for the module: its Spack environments, concretized by
    the first run, serve every later one (a new sandbox re-concretizes
    every spec set: a minute each on two busy cores)."""
    return _sandbox(tmp_path_factory.mktemp("spack-real"))


#: One check of each build fixture: what the warm run needs to show that
#: every spec set is found built without a Spack command (the cold run
#: runs every check).
ONE_PER_BUILD = ("-n", "StreamBandwidth", "-n", "OsuCollective%benchmark=osu_bcast",
                 "-n", "IorBandwidth%mode=posix_fpp", "-n", "HaloExchange%dims=1%strategy=SERE")


#: The cold run: every check, less the halo's 2-D and 3-D variants (the
#: same Spack-built binary as the 1-D ones; the kernel tests run them all).
EVERY_BUILD = ("--tuning", "--", "-x", "HaloExchange%dims=2", "-x", "HaloExchange%dims=3")


@pytest.fixture(scope="module")
def runs(root):
    found = {}
    for name, only in (("cold", EVERY_BUILD), ("warm", ("--", *ONE_PER_BUILD))):
        # Tagged: the builds the O0 rebuild below is compared with.
        proc = hpc_health(root, "run", "--site", "local", "--tag", "release", *only,
                          timeout=TIMEOUT, spack=True)
        run_dir, report = _report(root)
        found[name] = (proc, run_dir, report)
    return found


@contextmanager
def _partition_settings(root, **changes):
    """The sandbox's partition settings changed for one test, then put back."""
    path = root / "site_configs" / "local" / "site.yaml"
    saved = path.read_text()
    doc = yaml.safe_load(saved)
    for key, value in changes.items():
        doc["partitions"]["default"][key] = {**doc["partitions"]["default"].get(key, {}), **value}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    try:
        yield
    finally:
        path.write_text(saved)


def test_every_check_is_built_by_spack_and_runs(runs):
    proc, run_dir, report = runs["cold"]
    assert "Spack:      " in proc.stdout and "not found" not in proc.stdout.split("\n\n")[0]
    cases = _cases(report)
    # What one node without Slurm or Lustre cannot run, and the sweeps'
    # settings the site left out, skip saying why; everything else passes.
    expected_skips = ("needs 2 nodes", "srun needs a Slurm partition",
                      "declares no Lustre scratch", "is not in ior_hints.settings")
    bad = {name: (tc["result"], tc.get("fail_phase"), tc.get("fail_reason"))
           for name, tc in cases.items()
           if tc["result"] != "pass" and not (
               tc["result"] == "skip" and any(w in tc["skip_reason"] for w in expected_skips))}
    assert not bad, proc.stdout[-6000:]
    # One node: the two-node variants say why they did not run.
    inter = [tc for name, tc in cases.items() if "inter_node" in name]
    assert inter and all(tc["result"] == "skip" and "needs 2 nodes" in tc["skip_reason"]
                         for tc in inter)
    for name in ("StreamBandwidth", "StreamTriadScaling", "IorBandwidth %mode=posix_fpp",
                 "IorBandwidth %mode=mpiio_collective", "MdtestRates",
                 "OsuPointToPoint %benchmark=osu_latency %placement=intra_node",
                 "OsuCollective %benchmark=osu_allreduce", "OsuPutLatency %placement=intra_node",
                 "HaloExchange %dims=1 %strategy=SERE", "BarrierLatency"):
        assert cases[name]["perfvalues"], name
    ior = cases["IorBandwidth %mode=mpiio_collective"]["perfvalues"]
    # Darshan counted the MPI-IO and POSIX bytes of the run.
    assert any(k.endswith(":mpiio_bytes") for k in ior)
    assert any(k.endswith(":posix_rank_time_ratio") for k in ior)
    summary = Path(cases["IorBandwidth %mode=mpiio_collective"]["outputdir"]) / "io-summary.txt"
    assert "MPI-IO: written" in summary.read_text()
    md = cases["MdtestRates"]
    assert any(k.endswith(":posix_meta_time") for k in md["perfvalues"])
    # Our kernels went through Spack too.
    assert cases["BarrierLatency"]["build_method"].startswith("spack")
    assert proc.returncode == 0, proc.stdout[-3000:]
    # No reference was measured on this machine: a baseline, never another's.
    assert "collecting a baseline on this hardware" in proc.stdout


def test_each_collective_algorithm_is_run_and_proven_applied(runs):
    proc, _, report = runs["cold"]
    tc = _cases(report)["OsuCollectiveAlgorithms %benchmark=osu_allreduce"]
    figures = {k.split(":")[-1] for k in tc["perfvalues"]}
    assert {"latency_8B_default", "latency_1MiB_ring", "latency_1MiB_rabenseifner",
            "default_over_best_8B", "default_over_best_1MiB"} <= figures
    # Every forced algorithm's figure carries the proof the launch gave.
    proofs = tc["figure_proof"]
    assert proofs["latency_1MiB_ring"].startswith("forced through coll_tuned_<coll>_algorithm")
    assert "coll/tuned" in proofs["latency_1MiB_ring"]
    assert "APPLIED (3): forced through coll_tuned_<coll>_algorithm" in proc.stdout


def test_a_forced_algorithm_the_mpi_replaced_or_refused_fails_with_the_reason(root):
    sweep = {"collectives": ["osu_allreduce"], "only": {"allreduce": ["ring", "no_such"]}}
    # coll/basic raised above coll/tuned stands in for han, hcoll or ucc.
    env = dict(os.environ, OMPI_MCA_coll_basic_priority="50")
    with _partition_settings(root, osu_algorithms=sweep):
        res = hpc_health(root, "run", "--site", "local", "--", "-n", "OsuCollectiveAlgorithms",
                         timeout=TIMEOUT, env=env, spack=True)
    assert res.returncode == 1, res.stdout[-3000:]
    fails = "\n".join(ln for ln in res.stdout.splitlines() if ln.startswith("FAIL"))
    assert "no_such not applied: Open MPI took coll_tuned_allreduce_algorithm=ignore" in fails
    assert "ring not applied: coll/basic (priority 50) outranks coll/tuned" in fails
    # The default still measured, and said what served it.
    assert "the MPI's default, served by coll/basic (priority 50)" in res.stdout


def test_each_mpi_io_setting_is_proven_by_the_ranks_darshan_saw_writing(runs):
    proc, _, report = runs["cold"]
    cases = _cases(report)
    proof = {s: cases[f"IorHints %setting={s}"]["figure_proof"]["write_bw"]
             for s in ("romio_one_aggregator", "romio_cb_disable", "ompio_individual")}
    assert "io/romio" in proof["romio_one_aggregator"]
    assert "1 of 2 ranks wrote the shared file" in proof["romio_one_aggregator"]
    assert "2 of 2 ranks wrote the shared file" in proof["romio_cb_disable"]
    assert "io/ompio; 2 of 2 ranks wrote" in proof["ompio_individual"]
    figures = {k.split(":")[-1]
               for k in cases["IorHints %setting=romio_cb_enable"]["perfvalues"]}
    assert figures == {"write_bw", "read_bw", "posix_write_amplification"}
    assert "SKIPPED: IorHints %setting=lustre_striped: the site declares no Lustre" in proc.stdout


def test_each_spec_set_is_built_once_and_a_warm_run_runs_no_spack_command(runs):
    _, cold_dir, cold = runs["cold"]
    # Built before the checks, side by side (Spack's package index built
    # alone first): all four concretized and installed.
    built = _spack_records(cold_dir, "prebuild/stage")
    assert len(built) == 4, built   # stream, osu, ior (+ Darshan), our kernels
    assert all(r["installed"] for r in built)
    commands = [line for log in cold_dir.glob("prebuild/stage/**/spack-commands.log")
                for line in log.read_text().splitlines() if line.startswith("$ ")]
    assert sum(" concretize -f" in line for line in commands) == 4, commands
    assert sum(line.endswith("/package_index.py") for line in commands) == 1, commands
    # ... on every core, never left to Spack.  Spack's cache outlives the
    # session (as a site's does), so on a machine that ran this before the
    # builtin index is already up to date; our repo, checked out anew, is not.
    index_logs = [log.read_text() for log in cold_dir.glob("prebuild/stage/**/spack-commands.log")
                  if "package_index.py" in log.read_text()]
    indexed = r"(\d+ packages on \d+ cores|up to date)"
    assert re.search(rf"index of repo builtin: {indexed}, ", index_logs[0]), index_logs[0]
    assert re.search(rf"index of repo hpc_health: {indexed}, ", index_logs[0]), index_logs[0]
    assert "left to Spack" not in index_logs[0]
    meta = json.loads((cold_dir / "run.json").read_text())
    assert meta["prebuild"]["parallel"] == 2
    assert [b["ok"] for b in meta["prebuild"]["builds"]] == [True] * 4
    # The checks' fixtures found them built.
    records = _spack_records(cold_dir)
    assert len(records) == 4
    assert not any(r["concretized"] or r["installed"] for r in records), records
    _, warm_dir, warm = runs["warm"]
    again = _spack_records(warm_dir)
    assert len(again) == 4
    assert not any(r["concretized"] or r["installed"] for r in again), again
    logs = list(warm_dir.glob("output/**/spack-commands.log"))
    assert not any("$ " in log.read_text() for log in logs)
    assert {json.dumps(r["hashes"], sort_keys=True) for r in records} == \
        {json.dumps(r["hashes"], sort_keys=True) for r in again} == \
        {json.dumps(r["hashes"], sort_keys=True) for r in built if r["installed"]}
    # The same figures as the cold run gave for those checks.
    warm_checks = {name for name, _ in _figures(warm)}
    assert len(warm_checks) == 4
    assert _figures(warm) == {f for f in _figures(cold) if f[0] in warm_checks}


def test_a_spack_failure_fails_only_its_checks(root, runs):
    with _partition_settings(root, osu={"spec": "osu-micro-benchmarks@0.0.1"}):
        res = hpc_health(root, "run", "--site", "local", "--", "-n", "OsuCollective",
                         "-n", "StreamBandwidth", timeout=TIMEOUT, spack=True)
    assert res.returncode == 1, res.stdout[-3000:]
    _, report = _report(root)
    cases = _cases(report)
    assert cases["OsuBuild"]["result"] == "fail"
    # Spack's own words, not "build job failed with exit code 1".
    assert "hpc-health: spack" in cases["OsuBuild"]["fail_reason"]
    assert "osu-micro-benchmarks" in cases["OsuBuild"]["fail_reason"]
    assert cases["StreamBandwidth"]["result"] == "pass"
    assert {tc["result"] for name, tc in cases.items() if name.startswith("OsuCollective")} \
        == {"fail_deps"}
    # One line in the table for the build's failure and its dependents, with
    # Spack's first error line in it.
    lines = [line for line in res.stdout.splitlines() if line.startswith("FAIL")]
    assert any("concretize" in line for line in lines), res.stdout


def test_a_busy_spack_skips_its_checks_and_never_fails_the_night(root):
    """Another process holding the environment past the wait (here 2 s):
    the build and its check SKIPPED with who held it; the night is not
    UNHEALTHY for it."""
    env_dir = root.parent / "spack-envs" / "default-gnu-mpi" / "hpc-health-kernels"
    with environment_held(env_dir) as pid:
        res = hpc_health(root, "run", "--site", "local", "--", "-n", "BarrierLatency",
                         env=dict(os.environ, HPC_HEALTH_SPACK_WAIT="2"), timeout=TIMEOUT,
                         spack=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    _, report = _report(root)
    cases = _cases(report)
    assert cases["KernelsBuild"]["result"] == "skip"
    assert cases["BarrierLatency"]["result"] == "skip"
    assert "Spack busy: " in res.stdout and f"held by pid {pid}" in res.stdout, res.stdout


def test_a_kernel_rebuilt_at_O0_is_named_in_the_stack_diff(root, runs):
    """Before/after an "upgrade" that rebuilt our kernels without
    optimisation (CMake's Debug build type, -O0): compare's stack diff names
    the changed spec with its variants and both hashes.  Before: the two
    runs above (tagged release); after: one run of a halo variant.  (The
    halo and barrier times are MPI's, not the compiler's: -O0 moved the 1 MiB
    halo by +36 % with runs spread from 176 to 498 us, so the figures are not
    asserted here; tests/test_acceptance.py proves REGRESSED with an
    injected delay.)"""
    with _partition_settings(root, kernels={"variants": "build_type=Debug"}):
        res = hpc_health(root, "run", "--site", "local", "--tag", "debug", "--",
                         "-n", "HaloExchange%dims=1%strategy=SERE",
                         "-S", "HaloExchange.sizes=4096,1048576", timeout=TIMEOUT, spack=True)
    assert res.returncode in (0, 1), res.stdout[-3000:]
    res = hpc_health(root, "compare", "--site", "local", "tag:release", "tag:debug", "--json")
    assert res.returncode in (0, 1), res.stderr
    data = json.loads(res.stdout)
    assert {r["variable"] for r in data["rows"]} == {"time_4KiB", "time_1MiB"}
    assert {r["check"].split()[0] for r in data["rows"]} == {"HaloExchange"}
    change = next(s for s in data["specs"] if s["name"] == "hpc-health-kernels")
    assert change["change"] == "changed"
    assert "build_type=Release" in change["a"] and "build_type=Debug" in change["b"]
    assert change["a"].split("/")[1][:7] != change["b"].split("/")[1][:7]
