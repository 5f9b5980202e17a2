"""Spack, in one place: the kit and the bootstrap (:mod:`kit`,
:mod:`kit_sources`), every Spack command line the suite runs
(:mod:`commands`), the persistent environments a build ensures and the
locks they wait on (:mod:`environment`, :mod:`lock`, :mod:`sources`),
Spack's package index on every core (:mod:`package_index`), what a build
fixture asks of Spack (:mod:`fixtures`), the run's spec sets built before
the checks (:mod:`prebuild`) and what the builds kept, read back for a
run's provenance (:mod:`records`).

Part of the core: no ReFrame, no command layer.  Two of its modules run
inside jobs: ``python -m hpc_health.spack.environment ensure`` in a build
fixture's script, and ``spack -e ENV python .../package_index.py``."""
