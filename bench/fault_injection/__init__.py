"""The fault-injection bench: does hpc-health say DEGRADED when, and only
when, performance degrades?  See README.md; run as
``python -m bench.fault_injection.run`` from the repository root."""
