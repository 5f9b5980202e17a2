"""``hpc-health node-check``: the seconds-long check of one node, fit for
Slurm's ``HealthCheckProgram`` (docs/per-node.md).

It runs on the node (slurmd starts it, as root, with no job): two probes
(:mod:`hpc_health.jobside.quickprobe`), judged against the node's own
recent healthy checks (:mod:`hpc_health.judge.grossfault`).  Only a gross
fault counts, and it is said so in the reason; the guards are the per-node
run's (:mod:`hpc_health.judge.nodeguard`): a share of the node's
partitions at most, someone else's drain left alone.  With
``--resume-healthy`` a node this check drained comes back once it passes.
"""

import os
import shlex
import socket
import sys

from hpc_health.jobside import quickprobe
from hpc_health.judge import grossfault, nodeguard
from hpc_health.judge.nodeguard import DRAIN, Finding
from hpc_health.run import slurm
from hpc_health.run.preflight import validate
from hpc_health.store import nodechecks

#: Ends every reason this check gives: only such drains does it resume.
MARK = "(node-check)"


def this_node():
    """Slurm's name of this node (slurmd sets it for HealthCheckProgram)."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def node_check(site_name, node=None, drain=False, resume=False, out=sys.stdout):
    """Probe, judge and act on *node* (default: this one); exit 0 healthy
    or only recording, 1 a gross fault, 2 (raised) Slurm failed."""
    site, _ = validate(site_name)
    node = node or this_node()
    values = quickprobe.measure()
    record = nodechecks.read(site.name, node)
    gross = grossfault.judge(values, quickprobe.BETTER, record)
    said = ", ".join(f"{k} {quickprobe.shown(k, v)}" for k, v in values.items())
    if not gross:
        nodechecks.write(site.name, node, grossfault.recorded(values, record))
        earlier = min((len(v) for v in record.values()), default=0)
        against = (f"against its {earlier} earlier checks" if earlier >= grossfault.MIN_RECORDS
                   else f"recorded, {earlier + 1} of {grossfault.MIN_RECORDS} checks before "
                        "it is judged")
        print(f"hpc-health node-check {node}: healthy ({said}; {against})", file=out)
        if resume:
            _resume(node, out)
        return 0
    worst = gross[0]
    reason = slurm.clean_reason(
        f"{slurm.PREFIX} gross fault: {worst.name} {worst.times:.1f}x worse than usual on "
        f"this node {MARK}")
    print(f"hpc-health node-check {node}: GROSS FAULT: " + "; ".join(
        f"{g.name} {quickprobe.shown(g.name, g.value)}, {g.times:.1f}x worse than its usual "
        f"{quickprobe.shown(g.name, g.usual)} (median of {g.records} checks)" for g in gross),
        file=out)
    peers = slurm.partition_peers(node)
    states = slurm.states(peers)
    change = worst.times - 1 if quickprobe.BETTER[worst.name] == "lower" else 1 / worst.times - 1
    finding = Finding(node, "", "node-check", worst.name, change, len(gross), len(values))
    share = site.settings.get("per_node_drain_share") or nodeguard.DRAIN_SHARE
    (decision,) = nodeguard.plan_drains([finding], len(peers), states, share)
    if decision.action != DRAIN:
        print(f"  not drained {node}: {decision.why}", file=out)
    elif drain:
        slurm.drain(node, reason)
        print(f"  drained {node}: {reason}", file=out)
    else:
        print(f"  to drain {node} (run with --drain to act): "
              f"{shlex.join(slurm.drain_command(node, reason))}", file=out)
    return 1


def _resume(node, out):
    state = slurm.states([node]).get(node)
    if state is None or not state.drained:
        return
    if state.ours and state.reason.endswith(MARK):
        slurm.resume(node)
        print(f"  resumed {node}: healthy again (drained as: {state.reason})", file=out)
    else:
        # A per-node run's drain rests on stronger evidence than two probes;
        # anyone else's is theirs.
        print(f"  left drained {node}: not drained by node-check ({state.reason})", file=out)
