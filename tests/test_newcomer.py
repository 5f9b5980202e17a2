"""The newcomer's path, end to end, with the suite's own commands only.

From an empty store and no reference file: ``hpc-health run`` until the run
says its baseline is complete, then the exact command it printed, then one
clean run (HEALTHY, exit 0, every figure PASS) and one run with a fault far
outside the noise (DEGRADED, exit 1, the figure named).  The site runs one
check (``-n BarrierLatency``): the baseline counts per check, so a run of
some checks is a baseline run for those, and each run takes seconds.

The check runs on one rank, so its one figure is MPI_Init's time: the
barrier's own times on this VM sit at one of two levels (0.3 or 1.0 us, a
launch keeps one), and five runs that never saw the other level made a
clean run a false DEGRADED (1 run in 8 here), or left the figure without a
reference.  MPI_Init's time moved less than 15 % between runs here.

The fault stays for four runs (day 7 to 10): ten stored runs, whose HTML
report headless Chromium then draws (every plot, the step marked, no
console error; the screenshot is kept in test-artifacts/).

The fault is a slow launcher: the fault bench's PMPI interposer, preloaded
into the ranks only (Open MPI's ``mca_base_env_list``), adds 0.4 s to
MPI_Init (0.2-0.3 s here: +130 % or more; a whole second made each faulty
run 11 s longer).  Every clean run preloads it with no delay, so
the fault is the delay alone.
"""

import shlex
import subprocess

import pytest
import yaml
from sandbox import artifacts, barrier_site, environ, hpc_health, make_root, needs_mpicc

from bench import browser
from bench.fault_injection.tools import build_pmpi_delay

pytestmark = [
    pytest.mark.slow,
    pytest.mark.quiet,
    needs_mpicc(),
]

CHECK = ["--", "-n", "BarrierLatency"]
INIT_DELAY_NS = 400_000_000
BASELINE_RUNS = 5


def _ranks_env(lib, delay_ns):
    return {"OMPI_MCA_mca_base_env_list": f"LD_PRELOAD={lib};FI_INIT_DELAY_NS={delay_ns}"}


def _rows(stdout, variable):
    """The health table's rows of one figure."""
    return [line for line in stdout.splitlines() if line.startswith("BarrierLatency ")
            and f" {variable} " in line]


FAULTY_NIGHTS = 4      # day 7 to 10: ten stored runs, the report's trend has its step


@pytest.fixture(scope="module")
def journey(tmp_path_factory):
    """Day 1 to 5 (baseline), the printed capture command, day 6 (clean)
    and days 7 to 10 (MPI_Init 0.4 s slower): what each printed."""
    tmp_path = tmp_path_factory.mktemp("newcomer")
    root = make_root(tmp_path, references=False)
    barrier_site(root, BASELINE_RUNS, samples=10)
    lib = build_pmpi_delay(tmp_path)

    def run(delay_ns):
        import os
        return hpc_health(root, "run", "--site", "local", *CHECK,
                          env={**os.environ, **_ranks_env(lib, delay_ns)})

    days = [run(0) for _ in range(BASELINE_RUNS)]
    last = days[-1].stdout.rstrip().splitlines()[-1]
    assert "make it the reference: " in last, days[-1].stdout + days[-1].stderr
    command = shlex.split(last.split("make it the reference: ", 1)[1])
    # The printed command, as typed (here `python -m hpc_health`: no
    # hpc-health on PATH; from ci/health.sh, the path of .venv/bin/hpc-health).
    capture = subprocess.run(command, capture_output=True, text=True, env=environ(root),
                             timeout=300)
    days.append(run(0))
    days += [run(INIT_DELAY_NS) for _ in range(FAULTY_NIGHTS)]
    return {"root": root, "days": days, "command": command, "capture": capture}


def test_from_an_empty_store_to_a_suite_that_fails(journey):
    root, days = journey["root"], journey["days"]
    # Day 1 to 5: each run says how far the baseline is; the fifth, what to type.
    for day, res in enumerate(days[:BASELINE_RUNS], 1):
        assert res.returncode == 0, res.stdout + res.stderr
        assert "NO-REFERENCE" in res.stdout and "hpc-health: HEALTHY" in res.stdout
        last = res.stdout.rstrip().splitlines()[-1]
        if day < BASELINE_RUNS:
            assert last.startswith(f"Next: run again: baseline {day}/{BASELINE_RUNS}"), res.stdout
    assert last.startswith("Next: the baseline is complete"), res.stdout
    command = journey["command"]
    assert command[-7:-4] == ["reference", "capture", "--site"] and command[-1] == "--write"

    cap = journey["capture"]
    assert cap.returncode == 0, cap.stdout + cap.stderr
    assert "references proposed" in cap.stdout and "wrote " in cap.stdout
    written = yaml.safe_load((root / "reference" / "local.yaml").read_text())
    figures = written["BarrierLatency"]["local:default"]["gnu-mpi"]
    assert set(figures) == {"mpi_init"}, cap.stdout
    for value, lower, upper, _unit in figures.values():
        assert value > 0 and lower < 0 < upper

    # Day 6: judged, and healthy: every figure with a reference passes.
    res = days[BASELINE_RUNS]
    assert res.returncode == 0, res.stdout + res.stderr
    assert "hpc-health: HEALTHY" in res.stdout
    for var in figures:
        (row,) = _rows(res.stdout, var)
        assert " PASS" in row, res.stdout
    assert "Next: nothing to do" in res.stdout or "have weak references" in res.stdout

    # Day 7 on: MPI_Init 0.4 s slower: confirmed by its retest on the
    # first nights, a loss that stayed from the third.
    for night, res in enumerate(days[BASELINE_RUNS + 1:], 1):
        assert res.returncode == 1, res.stdout + res.stderr
        assert "hpc-health: UNHEALTHY" in res.stdout
        (row,) = _rows(res.stdout, "mpi_init")
        assert "DEGRADED" in row, res.stdout
        if night == 1:
            assert "retest: 1 of 1 confirmed" in res.stdout, res.stdout
        (step,) = [line.split("when it started: ", 1)[1] for line in res.stdout.splitlines()
                   if line.startswith("Next: look at the DEGRADED figures above; when it")]
        assert "history --site local --check 'BarrierLatency' --var mpi_init" in step, step
        if night == 1:
            # The step as typed works (here `python -m hpc_health`: no
            # hpc-health on PATH); history exits 1 on a sustained step worse.
            typed = subprocess.run(shlex.split(step), capture_output=True, text=True,
                                   env=environ(root), timeout=300)
            assert typed.returncode in (0, 1), typed.stdout + typed.stderr
            assert "BarrierLatency mpi_init on local:default" in typed.stdout, typed.stdout
    # Day 10: four nights worse against six is a step (the rank test needs
    # that many), named with the night it began and the stack change that
    # came with it (the delay is preloaded into the ranks: part of the
    # stack); tonight's DEGRADED keeps exit 1.
    last = days[-1].stdout
    drifting = [line for line in last.splitlines() if line.startswith("DRIFTING  BarrierLatency")]
    assert len(drifting) == 1 and " mpi_init on local:default: since run " in drifting[0], last
    since = drifting[0].split("since run ")[1].split()[0]
    assert since in days[BASELINE_RUNS + 1].stdout and since not in days[BASELINE_RUNS].stdout
    assert drifting[0].endswith(f", 4 runs; stack changed at run {since}")
    assert "; 1 DRIFTING); exit 1" in last


@pytest.mark.skipif(browser.executable() is None,
                    reason="needs Chromium (bash ci/test.sh installs it as root: "
                           "apt-get install chromium)")
def test_the_html_report_of_those_runs_in_a_browser(journey):
    """Ten real stored runs, drawn by headless Chromium with the network
    off: every plot drawn, the step marked, no console error."""
    root, days = journey["root"], journey["days"]
    out = artifacts() / "report-newcomer.html"
    res = hpc_health(root, "report", "--site", "local", "--html", str(out))
    assert res.returncode == 1, res.stdout + res.stderr     # the latest run is DEGRADED
    assert f"over {len(days)} run(s)" in res.stderr
    with browser.Browser() as b:
        b.open(out, fragment="all", until="done", timeout=120)
        plots = b.evaluate("Array.from(document.querySelectorAll('div.hh-plot'))"
                           ".map(d => [d.id, d.querySelectorAll('svg.main-svg').length,"
                           " d.querySelectorAll('g.trace').length])")
        notes = b.evaluate("Array.from(document.querySelectorAll('g.annotation-text-g'))"
                           ".map(a => a.textContent)")
        b.screenshot(artifacts() / "report-newcomer.png")
        errors = b.errors
    assert plots and all(svgs and traces for _, svgs, traces in plots), plots
    assert any(n.startswith("worse since run ") for n in notes), notes
    assert errors == []
