"""Scripts that run inside the jobs ReFrame submits, as ``python -m
hpc_health.jobside.X``: node snapshots and the collective algorithms a sweep
runs.  (The Spack environment a build ensures is :mod:`hpc_health.spack`.)"""
