"""`report --html`: the page's content, read from its plot specifications
(the browser test, test_newcomer.py's, draws it).

The store is twelve nights made of recorded 30-run series of this kind of
machine; STREAM Triad drops 40 % from night 9 (the recorded series moves
about 3 % night to night), and the software stack changes the same night.
"""

import html
import json
import os
import re
from pathlib import Path

import pytest
import yaml
from sandbox import hpc_health, make_root, store
from store_fixtures import case, series, write_run

NIGHTS = 12
STEP_NIGHT = 8          # index of the first slow night
SLOW = 0.6

REFERENCE = {
    "StreamTriadScaling": {"$index": ["$partition", "$environ"], "local:default": {"gnu-mpi": {
        "triad_1t": [10000, -0.15, 0.15, "MB/s"]}}},
    "$provenance": {"StreamTriadScaling": {"local:default/gnu-mpi/triad_1t": {
        "runs": ["a", "b", "c", "d", "e"], "samples": 15, "spread": 0.03, "mdc": 0.12,
        "between_run_spread": 0.03, "within_run_spread": 0.02}}}}


def _rid(night):
    return f"202611{night + 1:02d}T020000Z"


def _night(night):
    triad = series("stream_triad_1t")
    scale = 10000 / sorted(triad)[len(triad) // 2]
    slow = SLOW if night >= STEP_NIGHT else 1.0
    tcs = [case("StreamTriadScaling", "triad_1t", triad[night] * scale * slow, "MB/s"),
           case("StreamTriadScaling", "triad_per_core_1t", triad[night] * scale, "MB/s"),
           case("StreamTriadScaling", "triad_per_core_2t", series("stream_triad_2t")[night] / 2,
                "MB/s")]
    for name in ("8B", "4KiB"):
        tcs.append(case("OsuPointToPoint", f"latency_{name}", series(f"osu_latency_{name}")[night],
                        "us", params={"benchmark": "osu_latency", "placement": "intra_node"}))
    for strategy, factor in (("BSBR", 1.0), ("ISIR", 0.8)):
        for size, t in (("8B", 2e-6), ("64KiB", 4e-5)):
            tcs.append(case("HaloExchange", f"time_{size}", t * factor, "s",
                            params={"dims": 1, "strategy": strategy}))
    ior = {"posix_bytes": 805306368, "posix_io_time_slowest_rank": 1.2, "posix_meta_time": 0.3}
    for var, value in ior.items():
        tcs.append(case("IorBandwidth", var, value, "B" if var.endswith("bytes") else "s",
                        params={"mode": "posix_fpp"}, better="lower"))
    tcs.append(case("IorBandwidth", "write_bw", series("ior_tmp_write")[night], "MiB/s",
                    params={"mode": "posix_fpp"}))
    if night == NIGHTS - 1:     # a figure measured once: drawn, no trend claimed
        tcs.append(case("BarrierLatency", "mpi_init", 0.3, "s"))
    return _one_case_per_name(tcs)


def _one_case_per_name(tcs):
    """A test case reports all its figures: merge the one-figure cases."""
    merged = {}
    for tc in tcs:
        if tc["name"] in merged:
            merged[tc["name"]]["perfvalues"].update(tc["perfvalues"])
            merged[tc["name"]]["figure_better"].update(tc["figure_better"])
        else:
            merged[tc["name"]] = tc
    return list(merged.values())


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = make_root(tmp_path_factory.mktemp("html"), references=False)
    (root / "reference" / "local.yaml").write_text(yaml.safe_dump(REFERENCE))
    for night in range(NIGHTS):
        rid = _rid(night)
        write_run(store(root), "local", rid, _night(night), started=rid,
                  stack="s2" if night >= STEP_NIGHT else "s1",
                  meta={"hostname": "node1", "stack": {
                      "mpicc": "gcc@13" if night >= STEP_NIGHT else "gcc@12"}})
    broken = store(root) / "runs" / "local" / "20261031T020000Z"
    broken.mkdir()
    (broken / "run.json").write_text("{not json")
    return root


def _specs(page):
    found = re.search(r'<script type="application/json" id="hh-specs">(.*?)</script>', page, re.S)
    return json.loads(found.group(1))


@pytest.fixture(scope="module")
def page(root):
    out = root.parent / "report.html"
    res = hpc_health(root, "report", "--site", "local", "--html", str(out))
    # The latest night is DEGRADED: the exit code says so, as the table's does.
    assert res.returncode == 1, res.stdout + res.stderr
    assert "wrote " in res.stderr and "UNHEALTHY" in res.stderr
    return out.read_text()


def test_the_page_opens_from_disk_with_plotly_inlined_once(page):
    skeleton = re.sub(r"<script([^>]*)>.*?</script>", r"<script\1></script>", page, flags=re.S)
    assert re.findall(r"<script[^>]*>", skeleton) == [
        "<script>", '<script type="application/json" id="hh-specs">', "<script>"]
    assert not re.search(r"(src|href)=\"(https?:)?//", skeleton)
    assert page.count("Plotly.newPlot") == 1
    assert len(re.findall(r"plotly\.js v\d", page)) >= 1
    specs = _specs(page)
    divs = re.findall(r'<div class="hh-plot" id="([^"]+)"', page)
    assert divs and sorted(divs) == sorted(specs)
    assert all(t["type"] != "scattergl" for s in specs.values() for t in s["data"])


def test_the_header_says_verdict_span_stack_change_and_damaged_runs(page):
    head = page.split("<h2>")[0]
    assert "UNHEALTHY" in head
    assert f"{NIGHTS}: {_rid(0)} to {_rid(NIGHTS - 1)}" in head
    assert "gcc@12" not in head and "<code>s2</code>" in head   # same stack as the night before
    assert "20261031T020000Z" in head                           # the damaged run, left out


def test_degraded_rows_come_first_and_link_to_their_trend(page):
    table = page.split("<h2>Verdicts")[1].split("<h2>")[0]
    first = table.split("<tbody>")[1].split("</tr>")[0]
    assert "DEGRADED" in first and "triad_1t" in first
    target = re.search(r'href="#(t\d+)"', first).group(1)
    spec = _specs(page)[target]
    assert "triad_1t" in spec["layout"]["title"]["text"]


def test_the_trend_has_the_band_the_step_and_the_stack_change(page):
    specs = _specs(page)
    (triad,) = [s for s in specs.values()
                if "StreamTriadScaling · triad_1t ·" in s["layout"]["title"]["text"]]
    assert len(triad["data"][0]["y"]) == NIGHTS
    assert "error_y" in triad["data"][0]                      # each night's samples
    band = [sh for sh in triad["layout"]["shapes"] if sh["type"] == "rect"]
    assert band and band[0]["y0"] == pytest.approx(8500) and band[0]["y1"] == pytest.approx(11500)
    notes = [a["text"] for a in triad["layout"]["annotations"]]
    assert any(n.startswith(f"worse since run {_rid(STEP_NIGHT)}") for n in notes), notes
    assert f"stack changed ({_rid(STEP_NIGHT)})" in notes
    assert "MDC 12 %" in triad["layout"]["title"]["text"]
    (once,) = [s for s in specs.values() if "mpi_init" in s["layout"]["title"]["text"]]
    assert "one run: no trend claimed" in [a["text"] for a in once["layout"]["annotations"]]


def test_each_benchmark_gets_its_picture(page):
    specs = _specs(page)
    views = {s["layout"]["title"]["text"]: s for k, s in specs.items() if k.startswith("b")}
    (osu,) = [s for t, s in views.items() if t.startswith("OsuPointToPoint latency")]
    assert osu["data"][0]["x"] == [8, 4096] and osu["layout"]["xaxis"]["type"] == "log"
    assert [d["name"] for d in osu["data"]] == ["this run", "previous run"]
    (halo,) = [s for t, s in views.items() if t.startswith("HaloExchange")]
    assert sorted(d["name"] for d in halo["data"]) == ["BSBR", "ISIR"]
    assert halo["layout"]["barmode"] == "group"
    (stream,) = [s for t, s in views.items() if "triad_per_core" in t]
    assert stream["data"][0]["x"] == [1, 2]
    (darshan,) = [s for t, s in views.items() if "Darshan" in t]
    io, meta = darshan["data"]
    assert io["x"][0] + meta["x"][0] == pytest.approx(100)
    assert io["x"][0] == pytest.approx(80) and io["text"][0] == "768.0 MiB"


def test_two_sets_draw_their_comparison(root):
    out = root.parent / "compare.html"
    res = hpc_health(root, "report", "--site", "local", f"{_rid(0)}..{_rid(STEP_NIGHT - 1)}",
                     f"{_rid(STEP_NIGHT)}..{_rid(NIGHTS - 1)}", "--html", str(out))
    assert res.returncode == 1, res.stdout + res.stderr
    page = out.read_text()
    assert "REGRESSED" in page and "gcc@12" in page and "gcc@13" in page
    specs = _specs(page)
    (stream,) = [s for s in specs.values() if s["layout"]["title"]["text"] == "StreamTriadScaling"]
    i = stream["data"][0]["y"].index("triad_1t · default")
    assert stream["data"][0]["x"][i] == pytest.approx(-40, abs=5)


@pytest.mark.parametrize("where", ["missing", "read-only"])
def test_an_output_path_that_cannot_be_written_is_exit_2_and_nothing_written(root, where,
                                                                             tmp_path):
    folder = tmp_path / "out"
    if where == "read-only":
        # root writes into any mode-0500 directory, but not into /proc.
        folder = Path("/proc")
        if os.geteuid():
            folder = tmp_path / "ro"
            folder.mkdir()
            folder.chmod(0o500)
    res = hpc_health(root, "report", "--site", "local", "--html", str(folder / "r.html"))
    assert res.returncode == 2, res.stdout + res.stderr
    assert str(folder) in res.stderr
    assert not (folder / "r.html").exists()


def test_two_sets_need_html(root):
    res = hpc_health(root, "report", "--site", "local", _rid(0), _rid(1))
    assert res.returncode == 2 and "--html" in res.stderr


def test_a_long_reason_shows_its_start_cut_at_a_word_and_all_of_it_on_hover():
    from hpc_health.render.html_report import WHY_SHOWN, _why
    stays = ("-59.1 %; 2 nights in a row beyond -51.1 %, on a node busy on the last two, "
             "a loss that stays (t > 2.7 each night); node busy: load 3.2 on 2 cores")
    cell = _why(stays)
    shown = re.search(r">(.*)</span>", cell).group(1)
    assert shown.startswith("-59.1 %; 2 nights in a row beyond -51.1 %") and shown.endswith("…")
    assert len(shown) <= WHY_SHOWN + 1 and stays.startswith(shown[:-1])
    assert stays[len(shown) - 1] == " "                     # cut between words
    assert f'title="{html.escape(stays)}"' in cell
    short = "needs 2 nodes"
    assert _why(short) == f'<span class="why" title="{short}">{short}</span>'
