"""The gate bench (bench/gate): the hog nights' table in its README is
generated from the committed results file, never typed in; a trial's store
copy leaves the source store as it was."""

import json
import os
from pathlib import Path

from bench.gate import hog_nights

HERE = Path(__file__).resolve().parents[1] / "bench" / "gate"


def test_the_readme_holds_the_hog_nights_table_of_its_results_file():
    results = json.loads((HERE / "hog_nights.json").read_text())
    assert len(results["trials"]) >= 10
    assert hog_nights.table(results) in (HERE / "README.md").read_text()


def test_a_trials_store_links_the_runs_and_copies_what_a_night_writes(tmp_path):
    src = tmp_path / "src"
    (src / "runs" / "local" / "R1").mkdir(parents=True)
    (src / "runs" / "local" / "R1" / "report.json").write_text("{}")
    (src / "index.sqlite").write_text("index")
    (src / ".db.lock").write_text("")
    hog_nights.copy_store(src, tmp_path / "copy")
    copy = tmp_path / "copy"
    assert os.path.samefile(copy / "runs" / "local" / "R1" / "report.json",
                            src / "runs" / "local" / "R1" / "report.json")
    (copy / "index.sqlite").write_text("written by a night")
    assert (src / "index.sqlite").read_text() == "index"
    assert not os.path.samefile(copy / ".db.lock", src / ".db.lock")
