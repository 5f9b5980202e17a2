"""Slurm's own commands for acting on a node: its state and reason
(``sinfo``), drain and resume (``scontrol update``), and the maintenance
reservation under which a drained node is tested again.

Every command either did what it was asked or raises :class:`SlurmError`
with the command and what Slurm said: a controller that is down is a clear
message and exit 2, never a traceback.
"""

from __future__ import annotations

import re
import shlex
import subprocess

from hpc_health.errors import ConfigError
from hpc_health.judge.nodeguard import Finding, NodeState

#: Every reason hpc-health gives starts so; a drained node whose reason does
#: not is someone else's and is never touched.
PREFIX = "hpc-health:"
#: Slurm keeps a node's reason whole, but ``sinfo -R`` shows 50 characters by
#: default and ``scontrol show node`` one line: a reason stays short.
MAX_REASON = 100
#: What a reason may hold: letters, digits and plain punctuation.  Quotes,
#: backslashes, '=' and control characters are what scontrol's parser and a
#: person's shell trip over.
_UNSAFE = re.compile(r"[^A-Za-z0-9 _.,:;%+()/@#-]")
#: Seconds a Slurm command may take (a controller that does not answer
#: makes scontrol retry for its MessageTimeout, 10 s by default).
TIMEOUT = 60


class SlurmError(ConfigError):
    """A Slurm command failed: exit 2, with the command and its message."""

    def __init__(self, cmd: list[str], message: str):
        self.cmd, self.message = cmd, message
        super().__init__(shlex.join(cmd), message)

    def but(self, note: str) -> SlurmError:
        """The same error, with what it left as it was."""
        return SlurmError(self.cmd, f"{self.message}; {note}")


def clean_reason(text: str) -> str:
    """*text* as Slurm keeps it and a person reads it: safe characters
    only, within :data:`MAX_REASON`."""
    text = _UNSAFE.sub("", " ".join(text.split()))
    return text if len(text) <= MAX_REASON else text[:MAX_REASON - 3].rstrip() + "..."


def drain_reason(f: Finding, run_id: str, more: int = 0) -> str:
    """``hpc-health: StreamBandwidth Triad -38% vs peers (run 20261127T030012Z)``:
    the check, its worst figure against the peers' median, the run that
    found it; *more* checks that named the node too."""
    also = f", +{more} check{'s' if more > 1 else ''}" if more else ""
    rounds = f" in {f.rounds_named}/{f.rounds} rounds" if f.rounds > 1 else ""
    return clean_reason(f"{PREFIX} {f.check} {f.variable} {100 * f.change:+.0f}% vs peers"
                        f"{rounds}{also} (run {run_id})")


def drain_command(node: str, reason: str) -> list[str]:
    return ["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"]


def resume_command(node: str) -> list[str]:
    return ["scontrol", "update", f"NodeName={node}", "State=RESUME"]


def _call(cmd: list[str]) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    except FileNotFoundError:
        raise SlurmError(cmd, f"{cmd[0]} is not installed here: nothing was changed") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(cmd, f"no answer in {TIMEOUT} s (is slurmctld up?)") from None
    if done.returncode != 0:
        said = " ".join((done.stderr or done.stdout).split()) or f"exit {done.returncode}"
        late = ""
        if "timed out" in said and cmd[0] == "scontrol":
            # A controller that is slow, not down, may still carry it out.
            late = "; Slurm may still apply it when the controller answers: see sinfo -R"
        raise SlurmError(cmd, f"{said} (exit {done.returncode}; is slurmctld up?){late}")
    return done.stdout


def states(nodes: list[str]) -> dict[str, NodeState]:
    """Slurm's state and reason of each of *nodes* (``sinfo -N``)."""
    if not nodes:
        return {}
    out = _call(["sinfo", "-h", "-N", "-n", ",".join(sorted(nodes)), "-o", "%N|%T|%E"])
    found = {}
    for line in out.splitlines():
        node, _, rest = line.partition("|")
        state, _, reason = rest.partition("|")
        reason = "" if reason.strip() == "none" else reason.strip()
        # drained, draining, down, fail, maint+drain...; '*' marks a node
        # that does not respond.
        out_of_service = any(w in state for w in ("drain", "down", "fail"))
        found[node] = NodeState(node, out_of_service, reason,
                                ours=out_of_service and reason.startswith(PREFIX))
    return found


def partition_nodes(partition: str) -> list[str]:
    """The nodes of Slurm partition *partition*."""
    out = _call(["sinfo", "-h", "-N", "-p", partition, "-o", "%N"])
    return sorted(set(out.split()))


def partition_peers(node: str) -> list[str]:
    """The nodes that share a Slurm partition with *node*, itself included."""
    rows = [line.split("|") for line in
            _call(["sinfo", "-h", "-N", "-o", "%N|%P"]).split()]
    mine = {p.rstrip("*") for n, p in rows if n == node}
    if not mine:
        raise SlurmError(["sinfo", "-h", "-N", "-o", "%N|%P"], f"Slurm knows no node {node}")
    return sorted({n for n, p in rows if p.rstrip("*") in mine})


def drain(node: str, reason: str) -> None:
    _call(drain_command(node, reason))


def resume(node: str) -> None:
    _call(resume_command(node))


def reserve(name: str, nodes: list[str], user: str) -> None:
    """A maintenance reservation of *nodes* for *user* alone, with no end:
    a node resumed under it takes only this run's jobs, and if the run dies
    the node stays reserved (out of service), never given back untested."""
    _call(["scontrol", "create", "reservation", f"ReservationName={name}",
           f"Nodes={','.join(nodes)}", f"Users={user}", "StartTime=now",
           "Duration=UNLIMITED", "Flags=MAINT,IGNORE_JOBS"])


def release(name: str) -> None:
    _call(["scontrol", "delete", f"ReservationName={name}"])
