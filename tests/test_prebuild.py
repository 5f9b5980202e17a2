"""The pre-build: the run's Spack build scripts side by side before the
checks, Spack's package index built alone first; a failure not retried
within a run.  The scripts here are real processes standing where ReFrame's
build scripts stand (tests/test_spack_real.py runs the real ones)."""

import json
import os
import signal
import time

import pytest
from sandbox import environment_held

from hpc_health import processes
from hpc_health.spack import environment as spackenv
from hpc_health.spack import prebuild


def _script(stage, env_name, body, specs=1):
    d = stage / "local" / "default" / "gnu-mpi" / f"{env_name.title()}Build_0"
    d.mkdir(parents=True)
    (d / "rfm_build.sh").write_text(
        "#!/bin/bash\n"
        f"# python -m hpc_health.spack.environment ensure --env-dir /envs/default-gnu-mpi/{env_name}"
        + " --spec x" * specs + " || echo failed\n" + body + "\n")
    return d


def _timed(log, name, seconds=0.6):
    """Writes its start, end and the phase it was given to *log*."""
    return (f'echo "{name} start $(date +%s.%N) ${{{spackenv.PHASE_VAR}:-all}}" >> {log}\n'
            f"sleep {seconds}\n"
            f'echo "{name} end $(date +%s.%N)" >> {log}\n'
            f'echo "hpc-health: Spack environment /e/{name}: concretize ran, install ran, 1 s"')


def _events(log):
    out = {}
    for line in log.read_text().splitlines():
        name, what, at, *phase = line.split()
        out.setdefault(name, []).append((what, float(at), *phase))
    return out


def test_the_index_is_built_alone_then_two_at_a_time(tmp_path):
    stage, log = tmp_path / "stage", tmp_path / "events"
    for name in ("kernels", "osu", "stream"):
        _script(stage, name, _timed(log, name))
    _script(stage, "ior", _timed(log, "ior"), specs=3)
    builds = prebuild.find_builds(stage)
    # Most specs first (the longest install on a cold machine).
    assert [b.name for b in builds] == ["ior (default-gnu-mpi)", "kernels (default-gnu-mpi)",
                                        "osu (default-gnu-mpi)", "stream (default-gnu-mpi)"]
    said = []
    prebuild.build_all(builds, dict(os.environ), 2, said.append)
    ev = _events(log)
    # The smallest alone, told to build Spack's index only; then all of
    # them largest first.
    first = ev["stream"]
    assert first[0][2] == "index" and first[2][2] == "all"
    others = [(t0[1], t1[1]) for name in ("ior", "kernels", "osu")
              for t0, t1 in [ev[name][:2]]]
    assert all(start >= first[1][1] for start, _ in others)
    # The order they were started in, as the parent saw it: the children's
    # own clocks may run late under load (two shells started together).
    started = [line.split(":")[0].strip() for line in said if line.endswith(": building")]
    assert started == [b.name for b in builds]
    # Never more than two at once.
    spans = others + [(first[2][1], first[3][1])]
    for at, _ in spans:
        assert sum(s <= at < e for s, e in spans) <= 2
    assert all(b.ok for b in builds)
    assert said[0] == "  ior (default-gnu-mpi): building"
    assert sum("ready" in s and "concretize ran, install ran" in s for s in said) == 4


def test_a_failed_build_is_named_and_the_others_go_on(tmp_path):
    stage, log = tmp_path / "stage", tmp_path / "events"
    _script(stage, "a", _timed(log, "a", 0.1))
    _script(stage, "b", 'echo "hpc-health: spack -e /e/b install failed (exit 1): no space"\n'
            f'echo "{spackenv.FAILED_MARK} 1"')
    _script(stage, "c", _timed(log, "c", 0.1))
    said = []
    builds = prebuild.build_all(prebuild.find_builds(stage), dict(os.environ), 2, said.append)
    assert [b.ok for b in builds] == [True, False, True]
    assert any("b (default-gnu-mpi): FAILED" in s and "no space" in s for s in said), said


def test_a_stop_stops_every_running_build(tmp_path):
    """A signal (here SIGALRM standing for the run's SIGTERM) raised while
    the builds run: both are stopped with their children."""
    stage, pids = tmp_path / "stage", tmp_path / "pids"
    for name in ("a", "b"):
        _script(stage, name, f'[ "${{{spackenv.PHASE_VAR}:-}}" = index ] && exit 0\n'
                f"sleep 60 & echo $! >> {pids}\nwait")

    class Stop(Exception):
        pass

    def stop(signum, frame):
        raise Stop

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(2)
    t0 = time.monotonic()
    try:
        with pytest.raises(Stop):
            prebuild.build_all(prebuild.find_builds(stage), dict(os.environ), 2, lambda s: None)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert time.monotonic() - t0 < 15
    started = pids.read_text().split()
    assert len(started) == 2
    time.sleep(0.2)
    assert not any(processes.alive(int(pid)) for pid in started)


def test_a_spack_failure_is_not_retried_within_the_run(tmp_path, monkeypatch):
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    (site_dir / "spack.yaml").write_text("spack: {specs: []}\n")
    env_dir, out = tmp_path / "env", tmp_path / "out"
    args = ["ensure", "--spack", "/bin/false", "--env-dir", str(env_dir),
            "--site-env", str(site_dir / "spack.yaml"), "--site-dir", str(site_dir),
            "--out", str(out), "--spec", "ior"]
    monkeypatch.setenv(spackenv.RUN_ID_VAR, "20261126T000000Z")
    assert spackenv.main(args) == 1
    assert json.loads((env_dir / spackenv.FAILED).read_text())["run"] == "20261126T000000Z"
    assert spackenv.main(args) == 1
    commands = [ln for ln in (out / "spack-commands.log").read_text().splitlines()
                if ln.startswith("$ ")]
    assert len(commands) == 1, commands
    # The next run tries again.
    monkeypatch.setenv(spackenv.RUN_ID_VAR, "20261127T000000Z")
    assert spackenv.main(args) == 1
    commands = [ln for ln in (out / "spack-commands.log").read_text().splitlines()
                if ln.startswith("$ ")]
    assert len(commands) == 2


def test_workers_default_and_setting():
    assert prebuild.workers(1) == 1
    assert prebuild.workers(None) >= 2
    assert prebuild.workers(None) <= 4


def test_an_environment_held_by_another_process_is_waited_for_then_busy(tmp_path, monkeypatch,
                                                                        capsys):
    """Busy, not failed: exit 75 with the holder named; within the run the
    fixture is told so again without waiting twice."""
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    (site_dir / "spack.yaml").write_text("spack: {specs: []}\n")
    env_dir, out = tmp_path / "env", tmp_path / "out"
    with environment_held(env_dir) as pid:
        monkeypatch.setenv(spackenv.RUN_ID_VAR, "20261126T000000Z")
        args = ["ensure", "--spack", "/bin/false", "--env-dir", str(env_dir),
                "--site-env", str(site_dir / "spack.yaml"), "--site-dir", str(site_dir),
                "--out", str(out), "--spec", "ior", "--wait", "1"]
        t0 = time.monotonic()
        assert spackenv.main(args) == spackenv.EXIT_BUSY
        assert 1 <= time.monotonic() - t0 < 10
        said = capsys.readouterr()
        assert f"for the Spack environment {env_dir}: held by pid {pid}" in said.out
        assert said.err.startswith(spackenv.BUSY_MARK) and "was held by pid" in said.err
        assert json.loads((env_dir / spackenv.FAILED).read_text())["busy"] is True
        t0 = time.monotonic()
        assert spackenv.main(args) == spackenv.EXIT_BUSY      # not waited for again
        assert time.monotonic() - t0 < 1


class _FakeBuild:
    stdout, stderr = "rfm_build.out", "rfm_build.err"

    def __init__(self, stagedir):
        self.stagedir = str(stagedir)


def test_the_fixture_reads_busy_as_a_reason_to_skip(tmp_path):
    from hpc_health.checklib import spack_build as builds
    (tmp_path / "rfm_build.err").write_text(
        f"{spackenv.BUSY_MARK} spack -e /e install --fail-fast failed (exit 1): "
        "==> Error: LockTimeoutError: Timed out waiting for a write lock after 60 s\n")
    why = builds.spack_busy(_FakeBuild(tmp_path))
    assert why.startswith("Spack busy: spack -e /e install") and "LockTimeoutError" in why
    (tmp_path / "rfm_build.err").write_text("hpc-health: spack -e /e install failed (exit 1)\n")
    assert builds.spack_busy(_FakeBuild(tmp_path)) is None
