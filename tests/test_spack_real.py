"""The Spack path for real: the STREAM, OSU and IOR/mdtest checks built by
Spack and run on the `local` site, a warm second run, and a Spack failure
that fails only the checks needing the broken spec.

Needs Spack: ``$HPC_HEALTH_TEST_SPACK_ROOT``, ``spack`` on PATH or
``$SPACK_ROOT``.  An offline Spack also needs what it cannot download; give
it in a YAML file named by ``$HPC_HEALTH_TEST_SPACK_SETTINGS``, merged into
the sandbox site's ``spack:`` settings, e.g.::

    builtin_repo: /opt/lab/spack-packages/repos/spack_repo/builtin
    source_mirror: /opt/lab/mirror
    install_tree: /opt/lab/opt          # reuse what is built (optional)
    develop: {stream: /opt/lab/src/stream@5.10}

A mirror made by hand needs the layout ``spack mirror create`` writes:
``<mirror>/_source-cache/archive/<sha256[:2]>/<sha256>.tar.gz``.

The Spack environments live in the test's temporary folder, so the first
run always concretizes; with a shared install tree it installs nothing new.
"""

import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from sandbox import REPO, hpc_health, make_root

from hpc_health.checklib.spackenv import find_spack

pytestmark = [pytest.mark.slow, pytest.mark.spack]

SPACK_ROOT = os.environ.get("HPC_HEALTH_TEST_SPACK_ROOT")
SPACK = find_spack(SPACK_ROOT)
if SPACK is None:
    pytest.skip("no Spack: set HPC_HEALTH_TEST_SPACK_ROOT, put `spack` on PATH or set "
                "SPACK_ROOT (and HPC_HEALTH_TEST_SPACK_SETTINGS for an offline Spack)",
                allow_module_level=True)

CHECKS = ["-n", "StreamBandwidth", "-n", "StreamTriadScaling", "-n", "OsuPointToPoint",
          "-n", "OsuMessageRate", "-n", "OsuCollective", "-n", "IorBandwidth",
          "-n", "MdtestRates"]
TIMEOUT = 7200


def _sandbox(tmp_path, **partition):
    root = make_root(tmp_path, references=False)
    path = root / "site_configs" / "local" / "site.yaml"
    doc = yaml.safe_load(path.read_text())
    spack = doc["spack"]
    spack["spack_root"] = str(Path(SPACK).parent.parent)
    spack["env_dir"] = str(tmp_path / "spack-envs")
    spack["install_tree"] = str(tmp_path / "spack-opt")
    extra = os.environ.get("HPC_HEALTH_TEST_SPACK_SETTINGS")
    if extra:
        spack.update(yaml.safe_load(Path(extra).read_text()) or {})
    # Small sizes: this is about the Spack path, not about the figures.
    doc["partitions"]["default"].update({
        "ior": {"block_size": "4m", "segments": 2},
        "mdtest": {"items": 100},
        "osu": {"iterations": 200, "warmup": 20},
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


def _spack_records(run_dir):
    return [json.loads(p.read_text()) for p in run_dir.glob("output/**/spack-build.json")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spack-real")
    root = _sandbox(tmp)
    first = hpc_health(root, "run", "--site", "local", "--", *CHECKS, timeout=TIMEOUT)
    first_dir, first_report = _report(root)
    second = hpc_health(root, "run", "--site", "local", "--", *CHECKS, timeout=TIMEOUT)
    second_dir, second_report = _report(root)
    return {"first": (first, first_dir, first_report), "second": (second, second_dir,
                                                                 second_report)}


def test_every_check_runs_and_passes_sanity(runs):
    proc, run_dir, report = runs["first"]
    cases = _cases(report)
    bad = {name: (tc["result"], tc.get("fail_phase"), tc.get("fail_reason"))
           for name, tc in cases.items()
           if tc["result"] != "pass" and "inter_node" not in name}
    assert not bad, proc.stdout[-5000:]
    # One node: the two-node variants say why they did not run.
    inter = [tc for name, tc in cases.items() if "inter_node" in name]
    assert inter and all(tc["result"] == "skip" and "needs 2 nodes" in tc["skip_reason"]
                         for tc in inter)
    for name in ("StreamBandwidth", "IorBandwidth %mode=mpiio_collective", "MdtestRates",
                 "OsuCollective %benchmark=osu_allreduce"):
        assert cases[name]["perfvalues"], name
    triad = cases["StreamTriadScaling"]["perfvalues"]
    assert any(k.endswith(":triad_per_core_1t") for k in triad)
    ior = cases["IorBandwidth %mode=mpiio_collective"]["perfvalues"]
    assert any(k.endswith(":mpiio_bytes") for k in ior)
    assert any(k.endswith(":posix_rank_time_ratio") for k in ior)
    summary = Path(cases["IorBandwidth %mode=mpiio_collective"]["outputdir"]) / "io-summary.txt"
    assert "MPI-IO: written" in summary.read_text()
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_each_environment_is_built_once_and_a_warm_run_touches_nothing(runs):
    _, first_dir, _ = runs["first"]
    first = _spack_records(first_dir)
    assert len(first) == 3  # stream, osu, ior
    assert all(r["concretized"] and r["installed"] for r in first)
    _, second_dir, _ = runs["second"]
    second = _spack_records(second_dir)
    assert len(second) == 3
    assert not any(r["concretized"] or r["installed"] for r in second), second
    assert {json.dumps(r["hashes"], sort_keys=True) for r in first} == \
        {json.dumps(r["hashes"], sort_keys=True) for r in second}


def test_a_spack_failure_fails_only_its_checks(tmp_path):
    root = _sandbox(tmp_path, osu={"spec": "osu-micro-benchmarks@0.0.1"})
    res = hpc_health(root, "run", "--site", "local", "--", "-n", "OsuCollective",
                     "-n", "StreamBandwidth", timeout=TIMEOUT)
    assert res.returncode == 1, res.stdout[-3000:]
    _, report = _report(root)
    cases = _cases(report)
    assert cases["OsuBuild"]["result"] == "fail"
    # Spack's own words, not "build job failed with exit code 1".
    assert "hpc-health: spack" in cases["OsuBuild"]["fail_reason"]
    assert "osu-micro-benchmarks" in cases["OsuBuild"]["fail_reason"]
    assert cases["StreamBandwidth"]["result"] == "pass"
    # ReFrame marks the dependents fail_deps and keeps no reason; the table
    # gives them the build's.
    assert {tc["result"] for name, tc in cases.items() if name.startswith("OsuCollective")} \
        == {"fail_deps"}
    lines = [line for line in res.stdout.splitlines() if line.startswith("FAIL: OsuCollective")]
    assert len(lines) == 4 and all("OsuBuild failed: sanity:" in line and "concretize" in line
                                   for line in lines), res.stdout
