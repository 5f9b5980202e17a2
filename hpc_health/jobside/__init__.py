"""Scripts that run inside the jobs ReFrame submits, as ``python -m
hpc_health.jobside.X``: node snapshots and the Spack environment a build
ensures."""
