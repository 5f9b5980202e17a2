"""Each node's record over stored per-node runs (``hpc-health nodes``, the
per-node HTML page), read from the index and run.json: three nights of a
two-node partition, node02 OUTLIER on the second and drained, resumed on
the third."""

import json

from click.testing import CliRunner
from store_fixtures import case, write_run

from hpc_health.cli.main import cli
from hpc_health.judge import noderecord
from hpc_health.store import index

NIGHTS = ["20261125T020000Z", "20261126T020000Z", "20261127T020000Z"]
REASON = "hpc-health: HaloExchange time_8B +900% vs peers in 3/3 rounds (run 20261126T020000Z)"


def _copy(node, value):
    tc = case("HaloExchange", "time_8B", value, "us", system="local-slurm", partition="batch",
              params={"dims": 1})
    tc["display_name"] += f" %.part=local-slurm:batch %.nid={node}"
    tc["unique_name"] += f"_{node}"
    tc["job_nodelist"] = [node]
    return tc


def _store(tmp_path, monkeypatch):
    store = tmp_path / "store"
    monkeypatch.setenv("HPC_HEALTH_STORE", str(store))
    slow = {NIGHTS[1]: 10.0}
    for rid in NIGHTS:
        slurm = ({"drained": [{"node": "node02", "reason": REASON}]} if rid == NIGHTS[1] else
                 {"resumed": [{"node": "node02", "was": REASON}]} if rid == NIGHTS[2] else {})
        d = write_run(store, "local-slurm", rid, [_copy("node01", 1.0),
                                                  _copy("node02", slow.get(rid, 1.1))],
                      started=rid, meta={"per_node": True, "partition": "batch",
                                         "slurm": slurm})
        (d / "verdicts.json").write_text(json.dumps([
            {"check": f"HaloExchange %dims=1 @{n}", "partition": "local-slurm:batch",
             "environ": "gnu-mpi", "variable": "time_8B",
             "verdict": "OUTLIER" if n == "node02" and rid in slow else "NO-REFERENCE",
             "reason": ""} for n in ("node01", "node02")]))
    return store


def test_each_nodes_record_counts_its_outlier_nights_and_the_suites_actions(tmp_path, monkeypatch):
    _store(tmp_path, monkeypatch)
    with index.open_index() as idx:
        runs = idx.listing("local-slurm").runs
        recs = noderecord.records(runs, idx.figures(runs))
    assert [r.node for r in recs] == ["node01", "node02"]
    node02 = recs[1]
    assert (len(node02.nights), node02.outlier_nights) == (3, 1)
    assert node02.checks() == {"HaloExchange": 9.0}
    assert (node02.last("drained"), node02.last("resumed")) == (NIGHTS[1], NIGHTS[2])
    assert recs[0].outlier_nights == 0 and not recs[0].checks()


def test_the_nodes_command_and_its_per_node_page(tmp_path, monkeypatch):
    _store(tmp_path, monkeypatch)
    page = tmp_path / "nodes.html"
    res = CliRunner().invoke(cli, ["nodes", "--site", "local-slurm", "--html", str(page)])
    assert res.exit_code == 0, res.output
    rows = [ln.split() for ln in res.output.splitlines()]
    assert ["node02", "3", "1", "HaloExchange", "+900%", NIGHTS[1], NIGHTS[2]] in rows
    assert ["node01", "3", "0", "-", "-", "-"] in rows
    html = page.read_text()
    assert html.count('class="cell bad"') == 1 and html.count('class="cell good"') == 5
    assert "out ⬇" in html and "ok ⬆" in html and REASON in html

    one = CliRunner().invoke(cli, ["nodes", "--site", "local-slurm", "--node", "node02"])
    assert one.exit_code == 0, one.output
    lines = one.output.splitlines()
    assert lines[0].split()[:3] == ["run", "check", "variable"]
    assert lines[2].split() == [NIGHTS[1], "HaloExchange", "time_8B", "10", "us", "1", "us",
                                "+900%", "OUTLIER"]
    unknown = CliRunner().invoke(cli, ["nodes", "--site", "local-slurm", "--node", "node09"])
    assert unknown.exit_code == 2 and "node09: not in the per-node runs read" in unknown.output
