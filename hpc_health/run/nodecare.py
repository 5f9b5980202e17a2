"""After a per-node run: drain the nodes it named, give back the ones it
found healthy again, or print the commands that would (docs/per-node.md).

The suite recommends; a site opts in to act: without ``--drain`` (or the
site's ``per_node_drain``) nothing is changed and each drain is printed as
the exact ``scontrol`` command.  The guards are
:mod:`hpc_health.judge.nodeguard`'s, Slurm's commands
:mod:`hpc_health.run.slurm`'s.

A node hpc-health drained cannot run the next per-node run's jobs.  With
``--resume-healthy`` the run therefore first puts those nodes in a
maintenance reservation of its own (no end, this user only) and resumes
them under it, so that only this run's copies reach them; afterwards a node
found healthy leaves the reservation in service, any other is drained again
before the reservation goes.  Should the run or Slurm fail in between, the
reservation stays and the node with it: out of service, never given back
untested.
"""

import getpass
import shlex
import time

from hpc_health.judge import broad, nodeguard, pernode
from hpc_health.judge import trends as trend_mod
from hpc_health.judge.drift import DRIFT_NIGHTS
from hpc_health.judge.nodeguard import DRAIN, RESUME, NodeState
from hpc_health.run import slurm
from hpc_health.site.reframe_glue import RESERVATION_VAR
from hpc_health.store import index


class Reserved:
    """Drained nodes resumed under this run's maintenance reservation."""

    def __init__(self, name, nodes, reasons):
        self.name, self.nodes, self.reasons = name, list(nodes), dict(reasons)

    def left(self):
        return (f"reservation {self.name} keeps {', '.join(self.nodes)} out of service: "
                f"scontrol delete ReservationName={self.name} once they are looked at")

    def describe(self):
        return (f"Slurm:      {', '.join(self.nodes)} drained by hpc-health: tested again "
                f"under reservation {self.name} (--resume-healthy)")

    def env(self):
        return {RESERVATION_VAR: f"{self.name}={','.join(self.nodes)}"}


def wanted(site, drain, resume_healthy):
    """(drain, resume) as asked on the command line or by the site."""
    return (bool(drain or site.settings.get("per_node_drain")),
            bool(resume_healthy or site.settings.get("per_node_resume_healthy")))


def slurm_partition(site, partition):
    part = (site.partitions or {}).get(partition) or {}
    return part.get("slurm_partition") or partition


def before(site, partition):
    """Reserve and resume the nodes of *partition* (default: every
    partition of the site) hpc-health drained, so this run tests them
    again; None when there are none."""
    nodes = sorted({n for p in ([partition] if partition else list(site.partitions))
                    for n in slurm.partition_nodes(slurm_partition(site, p))})
    ours = {n: s.reason for n, s in slurm.states(nodes).items() if s.drained and s.ours}
    if not ours:
        return None
    name = "hpc-health-" + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    slurm.reserve(name, sorted(ours), getpass.getuser())
    reserved = Reserved(name, sorted(ours), ours)
    try:
        for node in reserved.nodes:
            slurm.resume(node)
    except slurm.SlurmError as err:
        raise err.but(reserved.left()) from None
    return reserved


def after(site, refs, run_id, report, verdict_list, *, drain, resume, reserved,
          interrupted, rounds, out):
    """Drain, resume or recommend, partition by partition; what was done,
    for run.json.  Raises :class:`slurm.SlurmError` when Slurm fails (exit
    2): a drain is one scontrol call, done whole or not at all."""
    try:
        return _after(site, refs, run_id, report, verdict_list, drain, resume, reserved,
                      interrupted, rounds, out)
    except slurm.SlurmError as err:
        raise (err.but(reserved.left()) if reserved else err) from None


def _after(site, refs, run_id, report, verdict_list, drain, resume, reserved, interrupted,
           rounds, out):
    min_change = site.settings.get("per_node_min_change")
    share = site.settings.get("per_node_drain_share") or nodeguard.DRAIN_SHARE
    named_rounds = nodeguard.rounds_named(report, min_change)
    record = {"drained": [], "resumed": [], "kept": [], "recommended": []}
    handled = set()
    by_part = {}
    for v in verdict_list:
        node = pernode.node_of(v.measurement)
        if node:
            by_part.setdefault(v.measurement.partition_fullname, []).append(v)
    for part, vs in sorted(by_part.items()):
        found = nodeguard.findings(vs, min_change, named_rounds, rounds)
        if not found and not (resume and reserved):
            continue
        under = [n for n in (reserved.nodes if reserved else ()) if n not in handled]
        nodes = sorted({pernode.node_of(v.measurement) for v in vs} | set(under))
        try:
            states = slurm.states(nodes)
        except slurm.SlurmError as err:
            if drain or resume:
                raise
            print(f"\nSlurm: the nodes' states could not be read ({err}): the commands "
                  f"below assume no node is drained", file=out)
            states = {}
        for node in under:
            # Resumed for this run only: still hpc-health's drain until judged.
            states[node] = NodeState(node, True, reserved.reasons[node], ours=True)
        handled.update(under)
        worse, why_not = _broadly_worse(site, refs, run_id, {f.node for f in found})
        print(f"\nSlurm ({part}, {len(nodes)} nodes; at most "
              f"{nodeguard.share_limit(len(nodes), share)} drained by hpc-health at once):",
              file=out)
        if found and why_not:
            print(f"  BROADLY WORSE: {why_not}: the drains rest on the peer comparison alone",
                  file=out)
        decisions = nodeguard.plan_drains(found, len(nodes), states, share, interrupted, worse)
        redrain = _drains(decisions, found, run_id, part, drain, reserved, record, out)
        if resume:
            _resume(nodeguard.plan_resumes(nodeguard.healthy_nodes(vs), states, interrupted),
                    reserved, redrain, record, out)
    if reserved:
        for node in sorted(set(reserved.nodes) - handled):
            # Reserved, but in no partition this run judged: as it was.
            slurm.drain(node, reserved.reasons[node])
            record["drained"].append({"node": node, "reason": reserved.reasons[node],
                                      "again": True})
            print(f"  drained {node} again: not tested by this run", file=out)
        # Every node of the reservation is in service or drained again by now.
        slurm.release(reserved.name)
    return record


def _drains(decisions, found, run_id, part, drain, reserved, record, out):
    """Each drain decision acted on (--drain), or its command printed; the
    reserved nodes found sick again, with tonight's reason."""
    redrain = {}
    for d in decisions:
        more = len({f.check for f in found if f.node == d.node}) - 1
        reason = slurm.drain_reason(d.finding, run_id, more)
        if d.action == DRAIN:
            if drain:
                slurm.drain(d.node, reason)
                record["drained"].append({"node": d.node, "reason": reason, "partition": part})
                print(f"  drained {d.node}: {reason}", file=out)
            else:
                cmd = shlex.join(slurm.drain_command(d.node, reason))
                record["recommended"].append({"node": d.node, "command": cmd})
                print(f"  to drain {d.node} (run with --drain, or per_node_drain: true, to "
                      f"act): {cmd}", file=out)
        elif reserved and d.node in reserved.nodes:
            redrain[d.node] = reason        # found sick again: tonight's numbers
        else:
            record["kept"].append({"node": d.node, "why": d.why})
            print(f"  not drained {d.node}: {d.why}", file=out)
    return redrain


def _resume(decisions, reserved, redrain, record, out):
    """Nodes under this run's reservation: healthy ones stay in service,
    the others are drained again (with tonight's reason, if it named them)."""
    under = set(reserved.nodes) if reserved else set()
    for d in decisions:
        if d.node in under and d.action == RESUME:
            record["resumed"].append({"node": d.node, "was": reserved.reasons[d.node]})
            print(f"  resumed {d.node}: {d.why} (drained as: {reserved.reasons[d.node]})",
                  file=out)
        elif d.node in under:
            reason = redrain.get(d.node) or reserved.reasons[d.node]
            slurm.drain(d.node, reason)
            record["drained"].append({"node": d.node, "reason": reason, "again": True})
            print(f"  drained {d.node} again: {d.why}: {reason}", file=out)
        else:
            record["kept"].append({"node": d.node, "why": d.why})
            print(f"  not resumed {d.node}: {d.why}", file=out)


def restore(reserved, out):
    """The run ended before it could judge (ReFrame failed, no report):
    the nodes it took out of their drain go back to it, as they were."""
    try:
        for node in reserved.nodes:
            slurm.drain(node, reserved.reasons[node])
        slurm.release(reserved.name)
    except slurm.SlurmError as err:
        raise err.but(reserved.left()) from None
    print(f"Slurm: {', '.join(reserved.nodes)} drained again as before (nothing judged)",
          file=out)


def _broadly_worse(site, refs, run_id, named):
    """(whether the partition's other nodes are BROADLY WORSE tonight, why
    that could not be judged or '').  The nodes the run named are left out:
    the question is whether their peers are worse than on recent nights."""
    def keep(m):
        return m.run.run_id != run_id or not (m.nodes and m.nodes[0] in named)
    try:
        with index.open_index() as idx:
            runs = idx.listing(site.name).runs[-DRIFT_NIGHTS:]
            series = trend_mod.trends(idx, runs, refs, level_shifts=False, keep=keep)
    except Exception as err:     # any: the guard is said not judged, not the run lost
        return False, f"not judged ({type(err).__name__}: {err})"
    night = broad.tonight(series, run_id)
    if night is None:
        return False, (f"not judged (it needs references and {broad.MIN_NIGHTS} earlier "
                       f"nights of these figures)")
    return night.word == broad.BROADLY_WORSE, ""
