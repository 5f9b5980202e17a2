"""The command line: the ``hpc-health`` commands and everything they print
(tables, text, JSON).  The one layer that renders; it sits on top of all
others."""
