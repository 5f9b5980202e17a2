"""The drift bench (bench/drift): its README's tables are generated from
its results files by the table command, never typed in; its calibration
steers the fault to the step wanted."""

from pathlib import Path

from bench.drift import table
from bench.drift.real import next_strength

README = Path(__file__).resolve().parents[1] / "bench" / "drift" / "README.md"


def test_the_readme_holds_the_tables_of_the_results_files(capsys):
    assert table.main() == 0
    tables = capsys.readouterr().out.strip()
    assert tables.startswith("### Simulated on the recorded noise")
    assert tables in README.read_text()


def test_the_calibration_steers_between_the_strengths_that_bracket_the_step():
    # A change inside the noise (0.3 % for 5 % wanted) scales by 3x, not 17x.
    assert next_strength([(756.0, 0.003)], 0.05) == 3 * 756.0
    assert next_strength([(1000.0, -0.01)], 0.05) == 3000.0
    assert next_strength([(3000.0, 0.30)], 0.05) == 1000.0
    # Close to the step, the last strength is scaled as measured.
    assert abs(next_strength([(700.0, 0.04)], 0.05) - 875.0) < 1e-9
    # Bracketed: between the closest strengths on either side.
    got = next_strength([(2857.0, 0.189), (952.0, 0.02), (5000.0, 0.4)], 0.05)
    assert abs(got - (952.0 + (2857.0 - 952.0) * 0.03 / 0.169)) < 1e-9
