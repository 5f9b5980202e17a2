"""Measurement tools of hpc-health (run from the repository root: python -m bench...)."""
