"""Spack's environment lock held elsewhere, and Spack commands past their
time limit, with a real Spack: the lock and its holder are named (by the
pre-build's progress lines too), the command is ended, the spec set is
busy (its checks SKIPPED) and the other spec sets go on; nothing is left
running (docs/faults.md, 40e and 40f)."""

import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest
import yaml
from sandbox import holding, hpc_health, make_root

from hpc_health import processes
from hpc_health.spack import commands, prebuild
from hpc_health.spack import environment as spackenv
from hpc_health.spack import kit as spack_kit
from hpc_health.spack import lock as spacklock

pytestmark = [pytest.mark.slow, pytest.mark.spack]

SPACK = spack_kit.find_spack(os.environ.get("HPC_HEALTH_TEST_SPACK_ROOT"))
if SPACK is None:
    pytest.skip("no Spack: set HPC_HEALTH_SPACK_KIT and run `hpc-health spack setup`, put "
                "`spack` on PATH, set SPACK_ROOT or HPC_HEALTH_TEST_SPACK_ROOT",
                allow_module_level=True)
ENV = spack_kit.spack_env(spack_kit.record())


def _one_statement(code):
    # `spack python -c` compiles a single statement.
    return f"exec({code!r})"


@contextmanager
def spack_holding(env_dir):
    """A Spack process holding *env_dir*'s environment lock with Spack's own
    lock class, as a concurrent ``spack -e ENV concretize`` does; its pid."""
    path = env_dir / spacklock.ENV_LOCK
    with holding([SPACK, "python", "-c", _one_statement(
            "import time, spack.llnl.util.lock as lk\n"
            f"lock = lk.Lock({str(path)!r}); lock.acquire_write()\n"
            "print('held', flush=True); time.sleep(600)")], env=ENV) as pid:
        yield pid


def _ensure_args(tmp_path, env_dir, out, wait):
    site_dir = tmp_path / "site"
    site_dir.mkdir(exist_ok=True)
    (site_dir / "spack.yaml").write_text("spack: {specs: []}\n")
    return [sys.executable, "-m", "hpc_health.spack.environment", "ensure", "--spack", SPACK,
            "--env-dir", str(env_dir), "--site-env", str(site_dir / "spack.yaml"),
            "--site-dir", str(site_dir), "--out", str(out), "--spec", "zlib",
            "--wait", str(wait)]


def _left(env_dir, but):
    """Pids of processes (other than *but*) whose command line names *env_dir*."""
    found = []
    for pid in processes.pids():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fp:
                words = fp.read().decode(errors="replace")
        except OSError:
            continue
        if str(env_dir) in words and pid != but and processes.alive(pid):
            found.append(pid)
    return found


def test_an_environment_lock_held_by_another_spack_is_named_then_busy(tmp_path):
    env_dir = tmp_path / "env"
    env_dir.mkdir()
    with spack_holding(env_dir) as pid:
        t0 = time.monotonic()
        res = subprocess.run(_ensure_args(tmp_path, env_dir, tmp_path / "out", 3),
                             capture_output=True, text=True, env=ENV, timeout=120)
        took = time.monotonic() - t0
        left = _left(env_dir, pid)
    assert res.returncode == spackenv.EXIT_BUSY, res.stdout + res.stderr
    lock = env_dir / ".spack-env" / "transaction_lock"
    assert (f"hpc-health: waiting up to 3 s for Spack's environment lock {lock}: "
            f"held by pid {pid} (") in res.stdout
    assert f"held by pid {pid} (spack python -c exec(" in res.stdout
    assert res.stderr.startswith(spackenv.BUSY_MARK), res.stderr
    assert f"{lock} was held by pid {pid}" in res.stderr
    assert "concretize -f stopped" in res.stderr
    assert "Traceback" not in res.stderr
    assert took < 60
    assert left == []


def test_the_prebuild_names_the_lock_and_goes_on_with_the_other_spec_sets(tmp_path,
                                                                        monkeypatch):
    """The case of issue 44: the progress line names the lock and its
    holder, the held spec set is busy (its checks SKIPPED), the other one
    is built."""
    stage, env_dir = tmp_path / "stage", tmp_path / "envs" / "default-gnu-mpi" / "stream"
    env_dir.mkdir(parents=True)
    held = stage / "local" / "default" / "gnu-mpi" / "StreamBuild_0"
    held.mkdir(parents=True)
    args = _ensure_args(tmp_path, env_dir, held, 4)
    # The first line is what find_builds reads; the build itself as ReFrame writes it.
    (held / "rfm_build.sh").write_text(
        "#!/bin/bash\n" + " ".join(args) + f' || echo "{spackenv.FAILED_MARK} $?"\n')
    other = stage / "local" / "default" / "gnu-mpi" / "IorBuild_0"
    other.mkdir(parents=True)
    (other / "rfm_build.sh").write_text(
        "#!/bin/bash\n# python -m hpc_health.spack.environment ensure --env-dir "
        f"{tmp_path}/envs/default-gnu-mpi/ior --spec x\n"
        "sleep 1; echo 'hpc-health: Spack environment /e/ior: concretize ran, install ran, 1 s'\n")
    monkeypatch.setattr(prebuild, "HEARTBEAT_S", 2)
    said = []
    with spack_holding(env_dir) as pid:
        builds = prebuild.build_all(prebuild.find_builds(stage), ENV, 2, said.append)
        left = _left(env_dir, pid)
    text = "\n".join(said)
    lock = env_dir / ".spack-env" / "transaction_lock"
    assert f"  stream (default-gnu-mpi): waiting up to 4 s for Spack's environment lock {lock}: " \
           f"held by pid {pid} (" in text, text
    assert any(s.startswith("  still running: ") and str(lock) in s
               and f"pid {pid}" in s for s in said), text
    assert any(s.startswith("  stream (default-gnu-mpi): spack busy: Spack's environment lock")
               and s.endswith("its checks are SKIPPED") for s in said), text
    assert "  ior (default-gnu-mpi): ready" in text
    assert {b.name: b.ok for b in builds} == {"stream (default-gnu-mpi)": False,
                                              "ior (default-gnu-mpi)": True}
    assert left == []


def test_a_spack_command_past_its_time_limit_is_stopped_with_its_children(tmp_path):
    pids = tmp_path / "pids"
    cmd = [SPACK, "python", "-c", _one_statement(
        "import subprocess, time\n"
        f"open({str(pids)!r}, 'w').write(str(subprocess.Popen(['sleep', '300']).pid))\n"
        "time.sleep(300)")]
    t0 = time.monotonic()
    with pytest.raises(spacklock.TimedOut) as err:
        spacklock.run(cmd, limit=4, env=ENV)
    assert time.monotonic() - t0 < 30
    assert "spack python -c" in str(err.value)
    assert "did not finish within its time limit of 4 s: stopped" in str(err.value)
    time.sleep(0.2)
    assert not processes.alive(int(pids.read_text()))


def test_an_ensure_past_its_limit_fails_with_the_limit_named(tmp_path):
    """No lock held: the limit (HPC_HEALTH_SPACK_LIMIT here) ends the
    concretization; the build fails, saying which limit."""
    env_dir = tmp_path / "env"
    res = subprocess.run(_ensure_args(tmp_path, env_dir, tmp_path / "out", 300),
                         capture_output=True, text=True, timeout=120,
                         env=dict(ENV, **{commands.LIMIT_VAR: "1"}))
    assert res.returncode == 1, res.stdout + res.stderr
    assert "concretize -f did not finish within its time limit of 1 s: stopped" in res.stderr
    assert "Traceback" not in res.stderr


def test_a_run_whose_spec_set_another_spack_holds_skips_its_checks_and_goes_on(tmp_path):
    """The whole run, as issue 44 found it: STREAM's environment held by
    another Spack while it needs concretizing.  The lock and its holder are
    named, STREAM's checks are SKIPPED (Spack busy), the barrier's spec set
    is built and its check runs; exit 0, nothing left running."""
    root = make_root(tmp_path, references=False)
    path = root / "site_configs" / "local" / "site.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["spack"].update(env_dir=str(tmp_path / "spack-envs"),
                        install_tree=str(spack_kit.cache_root() / "test-install-tree"))
    doc["partitions"]["default"].update(kernels={"samples": 2, "barrier_iters": 200},
                                        stream={"samples": 2})
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    env_dir = tmp_path / "spack-envs" / "default-gnu-mpi" / "stream"
    env_dir.mkdir(parents=True)
    with spack_holding(env_dir) as pid:
        res = hpc_health(root, "run", "--site", "local", "--", "-n", "StreamBandwidth",
                         "-n", "BarrierLatency", env=dict(os.environ, HPC_HEALTH_SPACK_WAIT="3"),
                         timeout=1800, spack=True)
        left = _left(env_dir, pid)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    lock = env_dir / ".spack-env" / "transaction_lock"
    assert f"stream (default-gnu-mpi): waiting up to 3 s for Spack's environment lock {lock}: " \
           f"held by pid {pid} (spack python" in res.stdout, res.stdout
    assert "Traceback" not in res.stdout + res.stderr
    run_dir = sorted((root.parent / "store" / "runs" / "local").iterdir())[-1]
    report = json.loads((run_dir / "report.json").read_text())
    cases = {tc["display_name"].split(" ~")[0]: tc
             for run in report["runs"] for tc in run["testcases"]}
    assert cases["StreamBuild"]["result"] == "skip"
    assert cases["StreamBandwidth"]["result"] == "skip"
    assert f"Spack busy: Spack's environment lock {lock} was held by pid {pid}" in res.stdout
    assert cases["BarrierLatency"]["result"] == "pass", cases["BarrierLatency"]
    assert left == []
