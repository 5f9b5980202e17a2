"""Is the node busy with something else while a check runs?

On a real site a busy compute node *is* a health problem (a job left
behind, a daemon spinning), but a verdict must say so, or a busy node looks
like a degraded machine.  Each check's job takes a snapshot of the node
before and after the benchmark (``python -m hpc_health.jobside.nodeload
snapshot FILE``): the load average, the node's own CPU accounting (``/proc/stat``)
and the CPU time of every process, with that of its reaped children.
Processes of the job's own session are ours, and so is the chain that
started it up to hpc-health, with everything hpc-health started; what the
node spent besides them, in cores, says how busy it was.  Counting the
node's total rather than the processes seen at both snapshots also catches
load made of short processes started one after another (a loop of
benchmarks, a build), which no snapshot ever sees alive.
"""

import json
import os
import sys
import time

from hpc_health import processes

#: Other processes using this many cores on average make the node "busy".
BUSY_CORES = 0.25
#: What a verdict's reason begins a busy node's note with: the judgement
#: reads it back from stored verdicts (:mod:`hpc_health.judge.nights`).
BUSY = "node busy"
#: How many of the busiest other processes a note names.
NAMED = 3
#: The flag of a kernel thread in /proc/PID/stat (include/linux/sched.h).
PF_KTHREAD = 0x00200000


def _proc_stat(pid):
    """(command, CPU seconds, session id, parent pid, kernel thread?) of a
    process; the CPU seconds include those of its children that exited and
    were reaped (a shell loop's benchmarks are the shell's)."""
    comm, fields = processes.proc_stat(pid)
    ticks = sum(int(f) for f in fields[11:15])      # utime stime cutime cstime
    return (comm, ticks / os.sysconf("SC_CLK_TCK"), int(fields[3]), int(fields[1]),
            bool(int(fields[6]) & PF_KTHREAD))


def _node_busy_seconds():
    """CPU seconds all cores spent in processes, from the node's own
    accounting: user, nice and system time (guest time is inside user).
    Interrupt time is left out: no process owns it, and a benchmark's own
    network or disk traffic makes most of it."""
    with open("/proc/stat") as fp:
        first = fp.readline().split()
    user, nice, system = (int(x) for x in first[1:4])
    return (user + nice + system) / os.sysconf("SC_CLK_TCK")


def _ours(procs):
    """(sessions, pids) whose CPU time is the run's own: the sessions of this
    job and of everything that started it (the scheduler's step daemon,
    ReFrame), up to hpc-health itself; from hpc-health up (its shell, cron,
    a login) only those processes, not their sessions, and below it every
    process it started.  A hog started from the same login session or
    script as hpc-health is another process, not the run's.

    Session 0 is nobody's: it holds the kernel's threads, and every process
    whose session leader is outside this PID namespace (a container) or that
    an init started without a session of its own (this project's CI).  Those
    are told apart by pid: the job's are what its script (the snapshot's
    parent) started, the kernel's threads carry their flag."""
    sessions, pids, pid = {os.getsid(0)}, set(), str(os.getpid())
    top = os.environ.get(processes.PARENT_VAR, "")
    script = str(procs[pid][3]) if pid in procs else "0"
    if os.getsid(0) == 0 and script not in ("0", "1"):
        pids |= _descendants(procs, script)
    below_top = True
    while pid in procs and pid not in ("0", "1"):
        if pid == top:
            below_top = False
            pids |= _descendants(procs, pid)
        if below_top:
            sessions.add(procs[pid][2])
        pids.add(pid)
        pid = str(procs[pid][3])
    sessions.discard(0)
    pids |= {p for p, stat in procs.items() if len(stat) > 4 and stat[4]}
    return sorted(sessions), sorted(pids, key=int)


def _descendants(procs, root):
    children = {}
    for pid, stat in procs.items():
        children.setdefault(str(stat[3]), []).append(pid)
    found, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def snapshot():
    procs = {}
    for pid in processes.pids():
        try:
            procs[str(pid)] = _proc_stat(pid)
        except (OSError, ValueError, IndexError):
            continue    # gone meanwhile
    with open("/proc/loadavg") as fp:
        load = float(fp.read().split()[0])
    sessions, pids = _ours(procs)
    return {"time": time.time(), "load": load, "cpus": os.cpu_count(),
            "node_cpu_s": _node_busy_seconds(), "ours": sessions, "our_pids": pids,
            "procs": {pid: list(stat) for pid, stat in procs.items()}}


def busy(before, after):
    """What other processes did between two snapshots of one job:
    {"load", "cpus", "other_cores", "busiest": [[pid, command, cores]]}."""
    elapsed = max(after["time"] - before["time"], 1e-3)
    ours = set(before["ours"]) | set(after["ours"])
    our_pids = set(before.get("our_pids", ())) | set(after.get("our_pids", ()))

    def is_ours(pid, stat):
        return stat[2] in ours or pid in our_pids

    spent_before = _reaped_before(before, after)
    used = []
    for pid, stat in after["procs"].items():
        if is_ours(pid, stat):
            continue
        comm, cpu_s = stat[0], stat[1]
        start = before["procs"].get(pid)
        delta = cpu_s - (start[1] if start and start[0] == comm else 0.0)
        if start and start[0] == comm:
            delta -= spent_before.get(pid, 0.0)
        if delta > 0:
            used.append((delta / elapsed, int(pid), comm))
    used.sort(reverse=True)
    others = sum(u for u, _, _ in used)
    if "node_cpu_s" in before and "node_cpu_s" in after:
        # Ours, as totals of each snapshot: a child reaped between them moves
        # its time into its parent's, so the difference counts it once.
        def our_total(snap):
            return sum(p[1] for pid, p in snap["procs"].items() if is_ours(pid, p))
        node = (after["node_cpu_s"] - before["node_cpu_s"]) / elapsed
        mine = (our_total(after) - our_total(before)) / elapsed
        unseen = node - mine - others
        if unseen > BUSY_CORES:
            # Processes that came and went, reaped by no process we saw.
            used.append((unseen, 0, "short-lived processes"))
            used.sort(reverse=True)
        others = max(others, node - mine)
    return {"load": max(before["load"], after["load"]), "cpus": after["cpus"],
            "other_cores": round(max(others, 0.0), 3),
            "busiest": [[pid, comm, round(u, 3)] for u, pid, comm in used[:NAMED]]}


def _reaped_before(before, after):
    """{parent pid: CPU seconds} its children that were alive at the first
    snapshot and gone at the second had used by then.  A parent's time
    includes a child's only once it reaps it, and then all of it: without
    this, a shell that reaps a long benchmark during the check is credited
    with the benchmark's whole life (once "2.6 cores" on 2)."""
    out = {}
    for pid, rec in before["procs"].items():
        if pid not in after["procs"] and len(rec) > 3:
            parent = str(rec[3])
            out[parent] = out.get(parent, 0.0) + rec[1]
    return out


def share(info):
    """The share of the node's cores other processes used (0 when unknown)."""
    if not info or not info.get("cpus"):
        return 0.0
    return float(info.get("other_cores", 0.0)) / float(info["cpus"])


def note(info):
    """'node busy: …' when other processes used the node, else ''."""
    if not info or info.get("other_cores", 0) < BUSY_CORES:
        return ""
    # A process that used less than a twentieth of a core names nothing.
    who = ", ".join(f"{pid} {comm} {cores:.1f}" for pid, comm, cores in info["busiest"]
                    if cores >= 0.05)
    return (f"{BUSY}: load {info['load']:.1f} on {info['cpus']} cores; other processes "
            f"used {info['other_cores']:.1f} cores meanwhile"
            + (f" (pid command cores: {who})" if who else ""))


def load_pair(before_path, after_path):
    """busy() of two snapshot files, or None when either is missing."""
    try:
        with open(before_path) as fp:
            before = json.load(fp)
        with open(after_path) as fp:
            after = json.load(fp)
    except (OSError, ValueError):
        return None
    return busy(before, after)


def main(argv):
    if len(argv) != 3 or argv[1] != "snapshot":
        print("usage: python -m hpc_health.jobside.nodeload snapshot FILE", file=sys.stderr)
        return 2
    tmp = argv[2] + ".tmp"
    with open(tmp, "w") as fp:
        json.dump(snapshot(), fp)
    os.replace(tmp, argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
