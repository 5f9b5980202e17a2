"""Parsers of benchmark outputs.

Each parser is a plain function ``parse_<tool>(text: str) -> dict`` that
returns the figures of one output as plain JSON-able data, or raises
:class:`ParseError` naming what is missing.  A parser never returns a partial
figure: a truncated or garbled output is an error.  The ReFrame checks and the
``hpc-health parse`` command both call these functions.

A benchmark's module here also declares what the core needs of it: its
parsers, its settings and its pictures (:mod:`hpc_health.parsers.registry`),
found without a list kept by hand.
"""


class ParseError(ValueError):
    """The output cannot be parsed; the message says what is missing."""


def names():
    """The parsers' names: every benchmark's declaration
    (:mod:`hpc_health.parsers.registry`) lists its own."""
    from hpc_health.parsers import registry
    return sorted(registry.parsers())


def get(name):
    """Return the parser function registered under *name*."""
    from hpc_health.parsers import registry
    found = registry.parsers()
    if name not in found:
        raise KeyError(f"unknown parser {name!r}; known: {', '.join(names())}")
    return found[name]
