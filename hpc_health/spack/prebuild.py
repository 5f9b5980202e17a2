"""Every Spack spec set a run needs, built side by side before the checks.

ReFrame's serial policy (which the checks need: they share the cores they
measure) builds each build fixture just before its first check, one after
the other.  On a new machine that was four concretizations and installs in
a row, 400 s of the first run, on one core of two.  A dry run of the same
selection writes every build fixture's script without running anything;
those scripts are run here, several at once, and the checks then find
their environments built (:mod:`environment`'s ``ensure`` does only what
changed, so a warm night costs a few seconds here).

First, alone, Spack's package index is built (on every core by
``package_index.py``: about 40 s here on a new machine instead of 75 s
on one, a second or two once built), which every other Spack process would
otherwise wait for on a lock that gives up after 120 s.  Then all builds,
the largest first.
"""

import functools
import os
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from hpc_health import processes
from hpc_health.spack import commands, environment


@dataclass
class Build:
    script: Path
    env_dir: str
    seconds: float = 0.0
    specs: int = 1
    ok: bool = True
    said: list = field(default_factory=list)
    #: the lock it last said it waits for
    waiting: str = ""
    offset: int = 0

    @property
    def name(self):
        # .../spack-envs/<partition>-<environ>/<spec set>
        parts = Path(self.env_dir).parts
        return f"{parts[-1]} ({parts[-2]})" if len(parts) > 1 else self.env_dir


def workers(setting=None):
    """Builds at once: the site's ``spack.parallel_builds``, else two, and
    one more per eight cores up to four (each build runs ``make -j`` too;
    concretizing and configure scripts use one core)."""
    if setting is not None:
        return max(1, int(setting))
    return max(2, min(4, (os.cpu_count() or 2) // 8))


def find_builds(stage):
    """The Spack build scripts a dry run wrote below *stage*, one per
    environment."""
    found = {}
    for script in sorted(Path(stage).glob("**/rfm_build.sh")):
        line = next((ln for ln in script.read_text().splitlines() if commands.ENSURE_MARK in ln), None)
        if line is None:
            continue
        args = shlex.split(line.split(" || ")[0])
        env_dir = args[args.index("--env-dir") + 1]
        found.setdefault(env_dir, Build(script, env_dir, specs=args.count("--spec")))
    # Most specs first: on a cold machine the largest install (IOR with both
    # Darshans) is the longest job, and starting it first shortens the whole.
    return sorted(found.values(), key=lambda b: -b.specs)


def _start(build, env, phase=None):
    out = open(build.script.parent / "rfm_build.out", "a")
    build.offset = out.tell()       # what this step says starts here
    env = dict(env)
    if phase:
        env[environment.PHASE_VAR] = phase
    proc = subprocess.Popen(["bash", build.script.name], cwd=build.script.parent, stdout=out,
                            stderr=subprocess.STDOUT, env=env, start_new_session=True,
                            preexec_fn=functools.partial(processes.child_setup, os.getpid()))
    out.close()
    return proc


def _outcome(build, proc, started):
    build.seconds = time.monotonic() - started     # this step's: the index is told apart
    text = (build.script.parent / "rfm_build.out").read_text()
    build.said = [ln for ln in text.splitlines()
                  if ln.startswith("hpc-health: ") and not ln.startswith(environment.FAILED_MARK)]
    build.ok = proc.returncode == 0 and environment.FAILED_MARK not in text


def _tell(build, say):
    last = build.said[-1][len("hpc-health: "):] if build.said else "no output"
    if build.ok:
        done = next((s for s in reversed(build.said) if "Spack environment" in s), last)
        # "... DIR: concretize ran, install ran, 12.3 s"
        what = ", ".join(done.split(": ")[-1].split(", ")[:2])
        say(f"  {build.name}: ready, {build.seconds:.0f} s ({what})")
    elif last.startswith(environment.BUSY_MARK[len("hpc-health: "):]):
        say(f"  {build.name}: {last}; its checks are SKIPPED")
    else:
        say(f"  {build.name}: FAILED after {build.seconds:.0f} s: {last}; "
            "its checks fail with Spack's message")


def build_all(builds, env, parallel, say):
    """Run *builds* (largest first), *parallel* at a time, after the
    smallest has had Spack build its package index alone.  A stop (any
    exception, the run's signals included) stops every build's process
    group before it goes on up."""
    running = {}
    try:
        if len(builds) > 1 and parallel > 1:
            first = builds[-1]
            started = time.monotonic()
            proc = _start(first, env, phase="index")
            running[proc] = (first, started)
            _wait_any(running, say, what="Spack's package index")
            del running[proc]
            _outcome(first, proc, started)
            if not first.ok:
                _tell(first, say)
            elif any("package index ready" in line for line in first.said):
                say(f"  Spack's package index: built alone first, {first.seconds:.0f} s")
        queue = [b for b in builds if b.ok]
        while queue or running:
            while queue and len(running) < parallel:
                build = queue.pop(0)
                say(f"  {build.name}: building")
                running[_start(build, env)] = (build, time.monotonic())
            proc = _wait_any(running, say)
            build, started = running.pop(proc)
            _outcome(build, proc, started)
            _tell(build, say)
    finally:
        for proc in running:
            processes.stop_group(proc)
    return builds


def prebuild(dry_cmd, stage, env, parallel, say):
    """Find the run's Spack builds with ReFrame's dry run *dry_cmd* (its
    prefix *stage*) and build them; a summary for run.json, or None when
    the run has no Spack build (no Spack: the fixtures say why they skip)."""
    t0 = time.monotonic()
    stage.mkdir(parents=True, exist_ok=True)
    with open(stage / "dry-run.out", "w") as log:
        proc = subprocess.Popen(dry_cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True,
                                preexec_fn=functools.partial(processes.child_setup, os.getpid()))
        try:
            proc.wait()
        finally:
            processes.stop_group(proc)
    builds = find_builds(stage / "stage")
    if proc.returncode != 0 or not builds:
        # A selection ReFrame refuses is for the run itself to report.
        return None
    say(f"Spack: {len(builds)} spec set{'s' if len(builds) > 1 else ''} to check or build "
        f"before the checks, {min(parallel, len(builds))} at a time "
        f"(found by a ReFrame dry run in {time.monotonic() - t0:.0f} s)")
    build_all(builds, env, parallel, say)
    seconds = time.monotonic() - t0
    failed = [b for b in builds if not b.ok]
    say(f"Spack: ready in {seconds:.0f} s" +
        (f"; {len(failed)} failed" if failed else ""))
    return {"seconds": round(seconds, 1), "parallel": parallel,
            "builds": [{"env_dir": b.env_dir, "seconds": round(b.seconds, 1), "ok": b.ok}
                       for b in builds]}


#: Seconds between the lines that say which builds are still running.
HEARTBEAT_S = 60


def _wait_any(running, say, poll=0.5, what=None):
    """The first of *running* to end; every minute a line naming the others
    (or *what* they are doing), with the lock each waits for, which is also
    said as soon as a build says it waits."""
    last = time.monotonic()
    while True:
        for proc in running:
            if proc.poll() is not None:
                return proc
        for build, _ in running.values():
            waiting = _waiting(build)
            if waiting and waiting != build.waiting:
                say(f"  {build.name}: {waiting}")
            build.waiting = waiting
        now = time.monotonic()
        if now - last >= HEARTBEAT_S:
            last = now
            say("  still running: " + ", ".join(
                f"{what or build.name} {now - started:.0f} s" +
                (f" ({build.waiting})" if build.waiting else "")
                for build, started in running.values()))
        time.sleep(poll)


def _waiting(build):
    """The lock the build waits for when that is the last thing it said
    in this step (:mod:`environment`'s ``hpc-health: waiting up to N s for
    LOCK: held by ...``), or ''."""
    try:
        with open(build.script.parent / "rfm_build.out", "rb") as fp:
            fp.seek(build.offset)
            text = fp.read().decode(errors="replace")
    except OSError:
        return ""
    lines = [ln for ln in text.splitlines() if ln.startswith("hpc-health: ")]
    return lines[-1][len("hpc-health: "):] if lines and lines[-1].startswith(_WAITING) else ""


_WAITING = "hpc-health: waiting up to "
