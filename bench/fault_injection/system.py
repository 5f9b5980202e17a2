"""Set-up and guaranteed removal of what the faults need on this machine:
commands in their own process group, scratch directories, network
namespaces and qdiscs, cgroups, loop devices, and the clean-up of what a
killed run left behind.

Every object is a context manager whose ``finally`` undoes exactly what it
did, and only that: a namespace, qdisc, cgroup, loop device or mount that
already existed is refused rather than reused, so cleaning up can never take
away something another user of the machine set up.  Cleanup steps are run
one by one and a failing step is reported without skipping the rest.

SIGTERM and SIGHUP are turned into KeyboardInterrupt (:func:`install_signal_handlers`)
so that an interrupted run unwinds through the same ``finally`` blocks as
Ctrl-C does.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hpc_health import processes

CGROUP_ROOT = Path("/sys/fs/cgroup")
# Every object a run creates carries its PID in one of these names.
SCRATCH_PREFIX = "hpc-health-fi-"
NETNS_PREFIX = "hhfi-"
CGROUP_PREFIX = "hpc-health-fi-"
IMAGE_PREFIX = "fi-loop-"


class FaultError(RuntimeError):
    """A fault cannot be set up on this machine; the message says why."""


class CommandError(RuntimeError):
    def __init__(self, cmd, rc, out, err):
        tail = "\n".join((err or out or "").strip().splitlines()[-8:])
        super().__init__(f"{' '.join(map(str, cmd))} exited {rc}: {tail}")
        self.cmd, self.rc, self.out, self.err = cmd, rc, out, err


def warn(msg):
    print(f"fault_injection: warning: {msg}", file=sys.stderr, flush=True)


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def install_signal_handlers():
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)


def _kill_group(proc, grace=3.0):
    """Stop a child we started and everything it started (its own session).

    mpirun killed alone can leave its ranks spinning; they share the
    session the child was started in, so the group is what must go.
    """
    processes.stop_group(proc, ((signal.SIGTERM, grace), (signal.SIGKILL, grace)))


def run(cmd, env=None, timeout=300, check=True, cwd=None):
    """Run a command to completion; (stdout, stderr).  On timeout, error or
    interrupt the command's whole process group is stopped before raising."""
    proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        _kill_group(proc)
        raise
    if check and proc.returncode != 0:
        raise CommandError(cmd, proc.returncode, out, err)
    return out, err


def _undo(step, *args):
    try:
        step(*args)
    except Exception as exc:   # keep cleaning up; say what is left behind
        warn(f"cleanup step {getattr(step, '__name__', step)}{args} failed: {exc}")


# --- scratch -----------------------------------------------------------------

@contextlib.contextmanager
def scratch_dir(parent=None, keep=False):
    """A fresh directory for builds, loop images and IOR files; removed at the
    end unless ``keep``.  Only this directory, which we created, is removed."""
    # The PID in the name lets clean_stale() tell a dead run's directory.
    path = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=parent))
    try:
        yield path
    finally:
        if keep:
            print(f"fault_injection: scratch kept at {path}", file=sys.stderr)
        else:
            shutil.rmtree(path, ignore_errors=True)


# --- (a) memory: paced copy hog ----------------------------------------------

class HogStats:
    achieved_mbs: float | None = None


@contextlib.contextmanager
def memory_hog(binary, rate_mbs, cpu, warmup=0.3, buffer_mib=None):
    """Run ``memhog`` at ``rate_mbs`` (0: unpaced) pinned to ``cpu`` (None:
    where the kernel puts it), copying ``buffer_mib`` (None: its default)."""
    stats = HogStats()
    cmd = [str(binary), str(int(round(rate_mbs)))]
    cmd += [] if buffer_mib is None else [str(int(buffer_mib))]
    cmd = cmd if cpu is None else ["taskset", "-c", str(cpu), *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        time.sleep(warmup)   # buffers touched and pacing settled before timing
        if proc.poll() is not None:
            raise FaultError(f"memhog exited at start: {proc.stderr.read().strip()}")
        yield stats
    finally:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        try:
            _, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            err = ""
        for line in (err or "").splitlines():
            if "MB/s" in line:
                try:
                    stats.achieved_mbs = float(line.rsplit(":", 1)[1].split()[0])
                except (IndexError, ValueError):
                    pass


# --- (b) network: namespace + tbf on its lo ----------------------------------

def _netns_list():
    out, _ = run(["ip", "netns", "list"])
    return {line.split()[0] for line in out.splitlines() if line.strip()}


@contextlib.contextmanager
def network_namespace(name):
    """A new network namespace with only ``lo`` (up); deleted afterwards.

    Running the whole mpirun inside it keeps the shaped traffic away from
    every other user of the host, and a deleted namespace takes its qdisc
    with it, so nothing can be left throttled."""
    if shutil.which("ip") is None:
        raise FaultError("iproute2 'ip' not found")
    if name in _netns_list():
        raise FaultError(f"network namespace {name} already exists (not ours; not touched)")
    run(["ip", "netns", "add", name])
    try:
        run(["ip", "-n", name, "link", "set", "lo", "up"])
        yield name
    finally:
        _undo(run, ["ip", "netns", "delete", name])


@contextlib.contextmanager
def tbf_on_lo(netns, rate_bps, burst_bytes=None, latency_ms=100):
    """Token-bucket rate limit on the namespace's ``lo``: rate only, no added
    delay (a packet waits only when the bucket is empty).

    The burst must hold one full loopback frame (MTU 65536), or tbf drops
    every such packet and TCP stalls; beyond that it is kept near 2 ms of the
    rate so short messages cannot slip through unshaped.
    """
    if shutil.which("tc") is None:
        raise FaultError("'tc' (iproute2) not found")
    args, info = _tbf(rate_bps, burst_bytes, latency_ms)
    run(["tc", "-n", netns, "qdisc", "add", "dev", "lo", "root"] + args)
    try:
        yield info
    finally:
        _undo(run, ["tc", "-n", netns, "qdisc", "del", "dev", "lo", "root"])


@contextlib.contextmanager
def tbf_rate(netns, rate_bps, restore_bps, latency_ms=100):
    """Change the rate of the tbf that :func:`tbf_on_lo` put on the
    namespace's ``lo``, and set ``restore_bps`` back afterwards."""
    args, info = _tbf(rate_bps, None, latency_ms)
    run(["tc", "-n", netns, "qdisc", "change", "dev", "lo", "root"] + args)
    try:
        yield info
    finally:
        _undo(run, ["tc", "-n", netns, "qdisc", "change", "dev", "lo", "root"]
              + _tbf(restore_bps, None, latency_ms)[0])


def _tbf(rate_bps, burst_bytes, latency_ms):
    rate = int(rate_bps)
    burst = int(burst_bytes or max(256 * 1024, rate / 8 * 0.002))
    return (["tbf", "rate", f"{rate}bit", "burst", str(burst), "latency", f"{latency_ms}ms"],
            {"rate_mbit": rate / 1e6, "burst_bytes": burst})


def check_tbf(netns):
    """Fail early if this kernel has no tbf (a missing sch_tbf module)."""
    try:
        with tbf_on_lo(netns, 1_000_000_000):
            pass
    except CommandError as exc:
        raise FaultError(f"tc tbf does not work here: {exc}") from None


# --- cgroup v1 -------------------------------------------------------------

def cgroup_v1_available(controller):
    base = CGROUP_ROOT / controller
    return (base / "cgroup.procs").exists() and any(
        p.name.startswith(controller + ".") for p in base.iterdir())


@contextlib.contextmanager
def cgroup_v1(controller, name):
    """A new cgroup under the v1 ``controller`` hierarchy, removed afterwards
    (any process still in it is first moved back to the root)."""
    base = CGROUP_ROOT / controller
    if not cgroup_v1_available(controller):
        raise FaultError(f"no cgroup-v1 '{controller}' hierarchy at {base}")
    path = base / name
    if path.exists():
        raise FaultError(f"cgroup {path} already exists (not ours; not touched)")
    path.mkdir()
    try:
        yield path
    finally:
        def _empty_and_remove():
            for _ in range(50):
                pids = (path / "cgroup.procs").read_text().split()
                for pid in pids:
                    try:
                        (base / "cgroup.procs").write_text(pid)
                    except OSError:
                        pass   # exited meanwhile
                try:
                    path.rmdir()
                    return
                except OSError:
                    time.sleep(0.1)
            raise OSError(f"cannot remove {path}")
        _undo(_empty_and_remove)


def _write(path, text):
    Path(path).write_text(text)


@contextlib.contextmanager
def blkio_throttle(cgroup, majmin, read_bps=None, write_bps=None):
    """cgroup-v1 blkio.throttle limits for one device.  Only I/O the cgroup's
    processes submit themselves is throttled: O_DIRECT is, page-cache
    write-back (done by kernel threads) is not."""
    done = []
    try:
        for kind, bps in (("read", read_bps), ("write", write_bps)):
            if bps:
                f = cgroup / f"blkio.throttle.{kind}_bps_device"
                _write(f, f"{majmin} {int(bps)}")
                done.append(f)
        yield
    finally:
        for f in done:
            _undo(_write, f, f"{majmin} 0")   # "0" deletes the rule


@contextlib.contextmanager
def blkio_rate(cgroup, majmin, bps, restore_bps):
    """Change the read and write rates :func:`blkio_throttle` set for one
    device to *bps*, and set *restore_bps* back afterwards."""
    files = [cgroup / f"blkio.throttle.{kind}_bps_device" for kind in ("read", "write")]
    for f in files:
        _write(f, f"{majmin} {int(bps)}")
    try:
        yield
    finally:
        for f in files:
            _undo(_write, f, f"{majmin} {int(restore_bps)}")


@contextlib.contextmanager
def cpu_quota(cgroup, fraction, period_us=10000):
    """CFS bandwidth limit: ``fraction`` of one CPU per period."""
    _write(cgroup / "cpu.cfs_period_us", str(int(period_us)))
    _write(cgroup / "cpu.cfs_quota_us", str(max(1000, int(round(fraction * period_us)))))
    try:
        yield
    finally:
        _undo(_write, cgroup / "cpu.cfs_quota_us", "-1")


# --- (d) loop device with a file system ------------------------------------

@contextlib.contextmanager
def loop_filesystem(backing_dir, size_mib, mountpoint):
    """A file-backed loop device with ext4, mounted at ``mountpoint``.
    Yields (device, "major:minor").  Unmounted, detached and deleted after.

    The backing file is fully allocated up front: otherwise the first pass
    over it measures block allocation, not the device.
    """
    for tool in ("losetup", "mkfs.ext4", "mount", "umount"):
        if shutil.which(tool) is None:
            raise FaultError(f"'{tool}' not found")
    image = Path(backing_dir) / f"{IMAGE_PREFIX}{os.getpid()}.img"
    if image.exists():
        raise FaultError(f"{image} exists (not ours; not touched)")
    fd = os.open(image, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    dev = None
    mounted = False
    mnt = Path(mountpoint)
    mnt_created = False
    try:
        try:
            os.posix_fallocate(fd, 0, size_mib << 20)
        finally:
            os.close(fd)
        out, _ = run(["losetup", "--find", "--show", str(image)])
        dev = out.strip()
        run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev])
        if not mnt.exists():
            mnt.mkdir(parents=True)
            mnt_created = True
        run(["mount", dev, str(mnt)])
        mounted = True
        st = os.stat(dev)
        yield dev, f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
    finally:
        if mounted:
            _undo(run, ["umount", str(mnt)])
        if dev:
            _undo(run, ["losetup", "-d", dev])
        if mnt_created:
            _undo(os.rmdir, mnt)
        _undo(os.unlink, image)


def backing_dir_default(scratch):
    """tmpfs when there is one: a throttle on a loop device over RAM measures
    the throttle, while a disk-backed image adds the host disk's own noise."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return shm
    return scratch


def rank_wrapper_path():
    """``rank_cgroup.sh``: puts one MPI rank (or a whole command) into a cgroup."""
    return Path(__file__).resolve().parent / "rank_cgroup.sh"


# --- what a killed run left behind -------------------------------------------

def _pid_in(name, prefix, suffix=""):
    """The PID a name of ours carries, or None when it is not one of ours."""
    if not name.startswith(prefix) or not name.endswith(suffix):
        return None
    head = name[len(prefix):len(name) - len(suffix) if suffix else None].split("-", 1)[0]
    return int(head) if head.isdigit() else None


def _loop_devices():
    """{device: backing file} of every attached loop device."""
    if shutil.which("losetup") is None:
        return {}
    out, _ = run(["losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE"])
    devs = {}
    for line in out.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2:
            devs[parts[0]] = parts[1].strip().removesuffix(" (deleted)")
    return devs


def _mounts():
    """[(source, mount point)] from /proc/mounts (octal escapes decoded)."""
    rows = []
    for line in Path("/proc/mounts").read_text().splitlines():
        src, mnt = line.split()[:2]
        rows.append((src, mnt.encode().decode("unicode_escape")))
    return rows


def find_stale(scratch_parents=None, image_dirs=None):
    """Objects of runs whose driver is gone (killed with SIGKILL, or the
    machine rebooted mid-run), as [(kind, what)], in the order they must be
    removed.  Only names carrying a dead PID are listed: a live run's objects
    and anything named otherwise are never touched."""
    def dead(pid):
        return pid is not None and not processes.alive(pid)

    scratch_parents = [Path(d) for d in (scratch_parents or [tempfile.gettempdir()])]
    image_dirs = [Path(d) for d in (image_dirs or ["/dev/shm"])]
    scratches = [d for parent in scratch_parents if parent.is_dir()
                 for d in parent.glob(f"{SCRATCH_PREFIX}*")
                 if d.is_dir() and dead(_pid_in(d.name, SCRATCH_PREFIX))]
    loops = {dev: back for dev, back in _loop_devices().items()
             if dead(_pid_in(Path(back).name, IMAGE_PREFIX, ".img"))}
    images = [f for d in image_dirs + scratches if d.is_dir()
              for f in d.rglob(f"{IMAGE_PREFIX}*.img")
              if dead(_pid_in(f.name, IMAGE_PREFIX, ".img"))]
    # Deepest first, so a mount on top of another comes off before it.
    stale = [("mount", mnt) for mnt in sorted(
        {mnt for src, mnt in _mounts()
         if src in loops or any(Path(mnt).is_relative_to(d) for d in scratches)},
        key=len, reverse=True)]
    stale += [("loop", dev) for dev in loops]
    stale += [("image", str(f)) for f in images]
    if shutil.which("ip"):
        stale += [("netns", ns) for ns in sorted(_netns_list())
                  if dead(_pid_in(ns, NETNS_PREFIX))]
    for controller in ("blkio", "cpu"):
        base = CGROUP_ROOT / controller
        if base.is_dir():
            stale += [("cgroup", str(cg)) for cg in sorted(base.glob(f"{CGROUP_PREFIX}*"))
                      if cg.is_dir() and dead(_pid_in(cg.name, CGROUP_PREFIX))]
    stale += [("scratch", str(d)) for d in scratches]
    return stale


def clean_stale(stale, log=print):
    """Remove what :func:`find_stale` listed; returns what could not be
    removed.  A cgroup that still holds processes is left alone: they are
    alive, so the cgroup is in use."""
    left = []
    steps = {
        "mount": lambda x: run(["umount", x]),
        "loop": lambda x: run(["losetup", "-d", x]),
        "image": os.unlink,
        "netns": lambda x: run(["ip", "netns", "delete", x]),
        "cgroup": _remove_idle_cgroup,
        "scratch": shutil.rmtree,
    }
    for kind, what in stale:
        try:
            steps[kind](what)
            log(f"removed {kind} {what}")
        except Exception as exc:   # report and go on with the rest
            left.append((kind, what))
            log(f"could not remove {kind} {what}: {exc}")
    return left


def _remove_idle_cgroup(path):
    procs = (Path(path) / "cgroup.procs").read_text().split()
    if procs:
        raise OSError(f"it still holds processes {' '.join(procs)}")
    Path(path).rmdir()
