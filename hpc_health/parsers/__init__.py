"""Parsers of benchmark outputs.

Each parser is a plain function ``parse_<tool>(text: str) -> dict`` that
returns the figures of one output as plain JSON-able data, or raises
:class:`ParseError` naming what is missing.  A parser never returns a partial
figure: a truncated or garbled output is an error.  The ReFrame checks and the
``hpc-health parse`` command both call these functions.
"""

import importlib


class ParseError(ValueError):
    """The output cannot be parsed; the message says what is missing."""


# name -> "module:function"; imported on first use so that one broken parser
# cannot take the others (or the CLI) down with it.
_REGISTRY = {
    "stream": "hpc_health.parsers.stream:parse_stream",
    "osu": "hpc_health.parsers.osu:parse_osu",
    "ior": "hpc_health.parsers.ior:parse_ior",
    "mdtest": "hpc_health.parsers.mdtest:parse_mdtest",
    "darshan": "hpc_health.parsers.darshan:parse_darshan",
    "halo": "hpc_health.parsers.kernels:parse_halo",
    "barrier": "hpc_health.parsers.kernels:parse_barrier",
}


def names():
    return sorted(_REGISTRY)


def get(name):
    """Return the parser function registered under *name*."""
    try:
        target = _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown parser {name!r}; known: {', '.join(names())}") from None
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)
