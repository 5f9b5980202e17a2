"""hpc-health: nightly HPC system health built on ReFrame and Spack."""

__version__ = "0.1.0"
