"""The check library: what hpc-health's ReFrame checks (``reframe_checks/``)
are built from.  One module per benchmark (``stream``, ``osu``, ``ior``,
``kernels``, with ``darshan`` around IOR): its build fixture, the options
and sanity of a run, its base class; and what they share: ``check``
(HealthCheck), ``builds`` (SpackBuild), ``launches``, ``shell``.

Layering: this package imports ReFrame and the core (parsers, statistics,
references, site settings); the core never imports it, and the command
layer (``cli/``, ``run/``) sits on top.
"""

from hpc_health.checklib import reframe_patch, retest

reframe_patch.apply()
retest.apply()
