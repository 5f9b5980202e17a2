"""Fault injection: detection and false-alarm rates of the verdicts, measured.

Run from the repository root: ``python -m bench.fault_injection.run``."""
