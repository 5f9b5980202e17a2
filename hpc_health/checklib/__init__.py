"""The check library: what hpc-health's ReFrame checks (``reframe_checks/``)
are built from -- build fixtures, Spack environments, launches, samples and
the site settings as a check sees them.

Layering: this package imports ReFrame and the core (parsers, statistics,
references); the core never imports it, and the command line sits on top.
"""
