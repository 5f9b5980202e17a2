"""Parsers of the ``--json`` output of our own kernels, ``halo`` and ``barrier``.

The documents are described in ``kernels/README.md``.  The launcher and the
job script may print lines before and after the document, so the parsers look
for the first complete JSON object that belongs to the program.
"""

import json
import math

from hpc_health.parsers import ParseError
from hpc_health.parsers.registry import POSINT, Benchmark, SideBySide, strict

HALO_STRATEGIES = ("BSBR", "SERE", "ISBR", "ISIR", "IRIS")


def _find_document(text, program):
    """Return the first JSON object in *text* whose ``program`` is *program*."""
    if not isinstance(text, str):
        raise ParseError(f"{program} output: expected text, got {type(text).__name__}")
    decoder = json.JSONDecoder()
    other = None
    pos = text.find("{")
    while pos >= 0:
        try:
            doc, _ = decoder.raw_decode(text, pos)
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            if doc.get("program") == program:
                return doc
            other = other or doc.get("program")
        pos = text.find("{", pos + 1)
    if other is not None:
        raise ParseError(f"{program} output: found the JSON document of {other!r}, not of {program!r}")
    raise ParseError(f"{program} output: no complete JSON document with \"program\": \"{program}\" "
                     "(missing or truncated output)")


def _field(obj, key, where):
    if key not in obj:
        raise ParseError(f"{where}: missing field {key!r}")
    return obj[key]


def _int(obj, key, where, minimum=0):
    value = _field(obj, key, where)
    # bool is an int in Python, but true/false is never a count.
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ParseError(f"{where}: field {key!r} must be an integer >= {minimum}, got {value!r}")
    return value


def _number(obj, key, where):
    value = _field(obj, key, where)
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or value < 0):
        raise ParseError(f"{where}: field {key!r} must be a non-negative number, got {value!r}")
    return float(value)


def _list(obj, key, where):
    value = _field(obj, key, where)
    if not isinstance(value, list) or not value:
        raise ParseError(f"{where}: field {key!r} must be a non-empty list")
    return value


def _times(entry, where, names):
    times = _field(entry, "time_us", where)
    if not isinstance(times, dict):
        raise ParseError(f"{where}: field 'time_us' must be an object")
    return {name: _number(times, name, f"{where} time_us") for name in names}


def _samples(entry, key, where, fallback):
    """Optional per-repetition samples; a document without them (one
    repetition) yields the single summary figure as its only sample."""
    if key not in entry:
        return [fallback]
    values = _list(entry, key, where)
    return [_number({key: v}, key, where) for v in values]


def parse_halo(text):
    """Parse ``halo --json`` output.

    Returns ``{"ranks", "dims", "grid", "verification", "errors", "results"}``
    where ``results[strategy][size_bytes]`` is ``{"min", "mean", "max",
    "samples"}`` in microseconds per exchange; ``samples`` holds the max over
    ranks of each repetition (``--samples``).
    """
    doc = _find_document(text, "halo")
    where = "halo output"
    ranks = _int(doc, "ranks", where, 1)
    dims = _int(doc, "dims", where, 1)
    if dims > 3:
        raise ParseError(f"{where}: field 'dims' must be 1, 2 or 3, got {dims}")
    grid = _list(doc, "grid", where)
    if (len(grid) != dims
            or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in grid)
            or math.prod(grid) != ranks):
        raise ParseError(f"{where}: field 'grid' {grid!r} is not a {dims}-D grid of {ranks} ranks")
    verification = _field(doc, "verification", where)
    if verification not in ("passed", "failed"):
        raise ParseError(f"{where}: field 'verification' must be 'passed' or 'failed', got {verification!r}")
    errors = _int(doc, "errors", where)
    if (verification == "passed") != (errors == 0):
        raise ParseError(f"{where}: verification {verification!r} contradicts errors = {errors}")

    results = {}
    for i, entry in enumerate(_list(doc, "results", where)):
        at = f"{where} results[{i}]"
        if not isinstance(entry, dict):
            raise ParseError(f"{at}: must be an object")
        strategy = _field(entry, "strategy", at)
        if strategy not in HALO_STRATEGIES:
            raise ParseError(f"{at}: unknown strategy {strategy!r}")
        size = _int(entry, "size_bytes", at, 1)
        if size in results.get(strategy, {}):
            raise ParseError(f"{at}: {strategy} at {size} bytes appears twice")
        times = _times(entry, at, ("min", "mean", "max"))
        times["samples"] = _samples(entry, "samples_max_us", at, times["max"])
        results.setdefault(strategy, {})[size] = times

    return {
        "ranks": ranks,
        "dims": dims,
        "grid": list(grid),
        "verification": verification,
        "errors": errors,
        "results": results,
    }


def parse_barrier(text):
    """Parse ``barrier --json`` output.

    Returns ``{"ranks", "mpi_init_s", "first_barrier_s", "results"}`` where
    ``results[comm_size]`` is ``{"min", "median", "p90", "max", "samples"}``
    in microseconds per barrier call; ``samples`` are the medians of
    consecutive batches of calls.
    """
    doc = _find_document(text, "barrier")
    where = "barrier output"
    ranks = _int(doc, "ranks", where, 1)
    mpi_init_s = _number(doc, "mpi_init_s", where)
    # Kernels before 1.1 did not time the first barrier.
    first = _number(doc, "first_barrier_s", where) if "first_barrier_s" in doc else None

    results = {}
    for i, entry in enumerate(_list(doc, "results", where)):
        at = f"{where} results[{i}]"
        if not isinstance(entry, dict):
            raise ParseError(f"{at}: must be an object")
        size = _int(entry, "comm_size", at, 1)
        if size > ranks:
            raise ParseError(f"{at}: comm_size {size} exceeds the {ranks} ranks")
        if size in results:
            raise ParseError(f"{at}: comm_size {size} appears twice")
        times = _times(entry, at, ("min", "median", "p90", "max"))
        times["samples"] = _samples(entry, "batch_medians_us", at, times["median"])
        results[size] = times

    return {"ranks": ranks, "mpi_init_s": mpi_init_s, "first_barrier_s": first,
            "results": results}


# --- what the core needs of our kernels and the start-up sweep ---------------------

KERNELS_SETTINGS = strict({
    "variants": {"type": ["string", "null"], "default": "",
                 "description": "variants of the Spack build, e.g. 'build_type=Debug' "
                 "(hpc-health-kernels is a CMakePackage)"},
    "samples": {**POSINT, "default": 5, "description": "launches of halo and barrier per run, each "
                "a sample"},
    "halo_sizes": {"type": ["array", "null"], "minItems": 1,
                   "items": {"type": "integer", "minimum": 1},
                   "default": [8, 4096, 65536, 1048576], "description": "halo message sizes, bytes"},
    "halo_iters": {**POSINT, "default": 200, "description": "timed exchanges per repetition"},
    "halo_warmup": {"type": ["integer", "null"], "minimum": 0, "default": 20,
                    "description": "untimed exchanges first"},
    "halo_repetitions": {**POSINT, "default": 1, "description": "repetitions inside one "
                         "halo launch; the launch's figure is their median"},
    "barrier_iters": {**POSINT, "default": 2000,
                      "description": "timed barriers per communicator size"},
    "barrier_warmup": {"type": ["integer", "null"], "minimum": 0, "default": 200,
                       "description": "untimed barriers first"},
})
STARTUP_SETTINGS = strict({
    "launchers": {"type": ["array", "null"], "items": {"enum": ["srun", "mpirun"]},
                  "default": ["srun", "mpirun"], "description": "launchers the start-up sweep "
                  "runs under (srun only on Slurm partitions; mpirun with Open MPI's "
                  "--map-by ppr:N:node)"},
    "srun_options": {"type": ["array", "null"], "items": {"type": "string"}, "default": [],
                     "description": "options of every srun launch, e.g. --mpi=pmix where "
                     "Slurm's MpiDefault is none"},
    "mpirun_options": {"type": ["array", "null"], "items": {"type": "string"}, "default": [],
                       "description": "options of every mpirun launch"},
    "samples": {**POSINT, "default": 5, "description": "rounds over every scale point, each "
                "a sample"},
    "iters": {**POSINT, "default": 20, "description": "timed barriers per launch (the figures "
              "are MPI_Init and the first barrier; these only end the launch cleanly)"},
})

BENCHMARK = Benchmark(
    parsers={"halo": parse_halo, "barrier": parse_barrier},
    settings={"kernels": KERNELS_SETTINGS, "startup": STARTUP_SETTINGS},
    plots=(SideBySide("strategy", "halo size per neighbour"),),
    built_out_of_source=("hpc-health-kernels",))     # CMake: its tree used in place
