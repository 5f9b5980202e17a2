"""``hpc-health nodes``: each node's record over the stored per-node runs."""

import sys

import click

from hpc_health.cli.common import say_note, site_option
from hpc_health.errors import ConfigError


@click.command("nodes")
@site_option
@click.option("--partition", "-p", help="Only this partition's nodes (its name in the site).")
@click.option("--node", "-n", "node", metavar="NODE",
              help="One node's figures over the runs, each against its peers' median.")
@click.option("--runs", "run_set", metavar="SET", default="since:0001-01-01",
              help="The runs to read (a run set: last:N, since:DATE, ...); per-node runs "
                   "only are used.  Default: every stored one.")
@click.option("--html", "html_file", metavar="FILE",
              help="Also write the per-node page: a node x run grid coloured by verdict, "
                   "with each node's record (one self-contained HTML file).")
def nodes(site, partition, node, run_set, html_file):
    """Each node's record over the stored per-node runs: how often it was an
    OUTLIER, on which checks and by how much, and when hpc-health drained
    and resumed it (`run --per-node --drain / --resume-healthy`)."""
    from hpc_health.judge import noderecord
    from hpc_health.store import index, runsets
    with index.open_index() as idx:
        chosen = runsets.resolve(idx, run_set, site)
        say_note(idx.listing(chosen.site))
        runs = [r for r in chosen.runs if r.meta.get("per_node")
                and (partition is None or r.meta.get("partition") in (None, partition))]
        if not runs:
            raise ConfigError(f"{chosen.site} {run_set}",
                              "no stored per-node run (hpc-health run --per-node)"
                              + (f" of partition {partition}" if partition else ""))
        figures = idx.figures(runs)
    if partition:
        figures = [m for m in figures if m.partition == partition]
    if node:
        sys.exit(_one_node(node, noderecord.points(figures)))
    recs = noderecord.records(runs, figures)
    click.echo(f"{chosen.site}: {len(runs)} per-node run(s), {runs[0].run_id} .. "
               f"{runs[-1].run_id}")
    rows = [("node", "runs", "outlier", "checks (worst change vs peers)",
             "drained by hpc-health", "resumed")]
    for rec in recs:
        checks = ", ".join(f"{c} {100 * ch:+.0f}%" for c, ch in
                           sorted(rec.checks().items(), key=lambda kv: -abs(kv[1])))
        rows.append((rec.node, str(len(rec.nights)), str(rec.outlier_nights), checks or "-",
                     rec.last("drained") or "-", rec.last("resumed") or "-"))
    _print(rows)
    if html_file:
        from hpc_health.render import html_nodes, summaries
        written = summaries.write_atomically(html_file, html_nodes.page(chosen.site, runs,
                                                                          recs, rows))
        click.echo(f"wrote {written}", err=True)


def _one_node(node, points):
    mine = [p for p in points if p.node == node]
    if not mine:
        raise ConfigError(node, "not in the per-node runs read (hpc-health nodes lists them)")
    rows = [("run", "check", "variable", "value", "peers (median)", "change", "verdict")]
    for p in mine:
        rows.append((p.run_id, p.check, p.variable, f"{p.value:.4g} {p.unit}",
                     "-" if p.peers is None else f"{p.peers:.4g} {p.unit}",
                     "-" if p.change is None else f"{100 * p.change:+.0f}%", p.verdict or "-"))
    _print(rows)
    return 0


def _print(rows):
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


@click.command("node-check")
@site_option
@click.option("--node", "-n", "node", metavar="NODE",
              help="The node's Slurm name (default: $SLURMD_NODENAME, else the host name).")
@click.option("--drain", is_flag=True,
              help="Drain this node on a gross fault (without it: print the command).")
@click.option("--resume-healthy", is_flag=True,
              help="Resume this node when it passes and node-check drained it.")
def node_check(site, node, drain, resume_healthy):
    """The seconds-long check of this node for Slurm's HealthCheckProgram:
    two probes (one thread's memory bandwidth, a CPU loop on every core)
    against the node's own recent checks; only a gross fault (2.5 times as
    bad) counts.  Exit 0 healthy, 1 a gross fault, 2 Slurm or the site could
    not be read."""
    from hpc_health.run import healthcheck
    sys.exit(healthcheck.node_check(site, node, drain, resume_healthy))
