"""Library code shared by hpc-health's ReFrame checks.

ReFrame puts the directory of a check file on ``sys.path`` while loading it,
so checks import this package by name; no path manipulation is needed.
"""
