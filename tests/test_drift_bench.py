"""The drift bench (bench/drift): its README's tables are generated from
its results files by the table command, never typed in."""

from pathlib import Path

from bench.drift import table

README = Path(__file__).resolve().parents[1] / "bench" / "drift" / "README.md"


def test_the_readme_holds_the_tables_of_the_results_files(capsys):
    assert table.main() == 0
    tables = capsys.readouterr().out.strip()
    assert tables.startswith("### Simulated on the recorded noise")
    assert tables in README.read_text()
