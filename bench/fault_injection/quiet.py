"""Is anybody else using the CPUs?  Foreign load is not one of the injected
faults, yet it degrades the benchmarks exactly like one (two other MPI jobs
on a 2-vCPU guest halve STREAM): a run it hits proves nothing either way.

:class:`CpuMeter` measures, over one run, the CPU time spent by processes
that are neither this driver, nor its descendants, nor kernel threads; the
driver re-runs a run that other processes used more than a threshold of,
after :func:`wait_quiet`, and records how often it did so.  Kernel threads
are left out because the loop device's and the network stack's work on our
behalf runs in them.
"""

from __future__ import annotations

import os
import resource
import time

from hpc_health import processes

_HZ = os.sysconf("SC_CLK_TCK")


#: The root cgroup's CPU time of every task, from the scheduler's own
#: clock (cgroup v1 cpuacct; v2's root cpu.stat is made of the same ticks as
#: /proc/stat).
_CPUACCT = "/sys/fs/cgroup/cpuacct/cpuacct.usage"


def _cpu_seconds():
    """(busy seconds over all CPUs, steal seconds).  Busy is the scheduler's
    CPU time of every task where cgroup v1 cpuacct has it, else /proc/stat's
    user+nice+system: those are counted in ticks, and with both cores busy
    copying memory they ran 5-7 % above the tasks' own time here (0.1-0.2
    cores no process used: 19.9-20.6 s against 19.0-19.3 s in 10 s, with
    the memory hog beside a copying benchmark; 10.1 s against 10.1 s with
    the benchmark alone), which is what the hog nights' foreign cores were."""
    with open("/proc/stat") as f:
        vals = [int(x) for x in f.readline().split()[1:]]
    steal = (vals[7] if len(vals) > 7 else 0) / _HZ
    try:
        with open(_CPUACCT) as f:
            return int(f.read()) / 1e9, steal
    except (OSError, ValueError):
        return (vals[0] + vals[1] + vals[2]) / _HZ, steal


def _kthread_seconds():
    """CPU seconds of all kernel threads (children of kthreadd, pid 2)."""
    total = 0
    for pid in processes.pids():
        try:
            fields = processes.proc_stat(pid)[1]
        except OSError:
            continue   # exited meanwhile
        # fields[1] = ppid, fields[11] / [12] = utime / stime
        if pid == 2 or fields[1] == "2":
            total += int(fields[11]) + int(fields[12])
    return total / _HZ


def _own_seconds():
    """CPU seconds of this process and every descendant already waited for
    (mpirun waits for its ranks, we wait for mpirun and the hog)."""
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


class CpuMeter:
    def __init__(self):
        self.t = time.monotonic()
        self.busy, self.steal = _cpu_seconds()
        self.kthreads = _kthread_seconds()
        self.own = _own_seconds()

    def foreign(self):
        """(foreign CPU in cores, steal in cores) since construction."""
        wall = max(time.monotonic() - self.t, 1e-3)
        busy, steal = _cpu_seconds()
        other = ((busy - self.busy) - (_kthread_seconds() - self.kthreads)
                 - (_own_seconds() - self.own))
        return max(other, 0.0) / wall, (steal - self.steal) / wall


def wait_quiet(threshold, window=5.0, max_wait=600.0, log=print):
    """Block until a ``window`` of seconds in which other processes used less
    than ``threshold`` cores; False if ``max_wait`` passed first."""
    t0 = time.monotonic()
    said = False
    while True:
        m = CpuMeter()
        time.sleep(window)
        load, _ = m.foreign()
        if load < threshold:
            return True
        if not said:
            log(f"other processes use {load:.2f} cores: waiting for quiet "
                f"(up to {max_wait:.0f} s)")
            said = True
        if time.monotonic() - t0 > max_wait:
            return False
