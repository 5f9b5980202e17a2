"""What an MPI library says about its own settings: the collective
algorithms it offers and, from a launch, which ones it really applied.

A forced collective algorithm is only worth a figure if the library ran it.
Open MPI takes an unknown algorithm number as ``ignore`` with a help message
and exit 0, and a component of higher priority than ``coll/tuned`` (``han``
in Open MPI 5, ``hcoll`` or ``ucc`` on InfiniBand clusters) serves the
collective so that tuned's forced algorithm never runs.  Both show in a
launch with ``mpi_show_mca_params=enviro`` (the value each parameter took)
and ``coll_base_verbose=10`` (the components selected per communicator);
these functions read them.

MPICH lists its control variables with ``mpivars`` (MPI_T): the description
of ``MPIR_CVAR_<COLL>_INTRA_ALGORITHM`` names the algorithms that release
accepts.  A name it does not know aborts MPI_Init; one it knows but cannot
use for the call's arguments aborts the call when
``MPIR_CVAR_COLLECTIVE_FALLBACK=error`` (else MPICH silently runs another).
"""

import re

from . import ParseError

# ompi_info --parsable:
#   mca:coll:tuned:param:coll_tuned_allreduce_algorithm:enumerator:value:4:ring
_ENUM = re.compile(r"^mca:coll:tuned:param:coll_tuned_(\w+?)_algorithm:enumerator:value:"
                   r"(\d+):(\S+)\s*$", re.MULTILINE)
# mpi_show_mca_params=enviro:  [host:pid] coll_tuned_allreduce_algorithm=ring (environment)
_PARAM = re.compile(r"^\[([^\]]+)\] (\w+)=(.*) \((?:environment|file|API|command line)"
                    r"[^)]*\)\s*$", re.MULTILINE)
# coll_base_verbose >= 10
_COMM = re.compile(r"^\[([^\]]+)\] coll:base:comm_select: new communicator: (\S+)", re.MULTILINE)
_SELECTING = re.compile(r"^\[([^\]]+)\] coll:base:comm_select: selecting\s+(\w+), "
                        r"priority\s+(-?\d+), (Enabled|Disabled)", re.MULTILINE)

#: Components that wrap or add non-blocking collectives only: never the one
#: that serves a blocking MPI_Allreduce, MPI_Bcast or MPI_Alltoall.
_NOT_SERVING = {"libnbc", "sync", "monitoring", "self", "inter"}


def ompi_tuned_algorithms(text, collective):
    """[(number, name)] of the algorithms ``coll/tuned`` offers for
    *collective* (``allreduce``), from ``ompi_info --param coll tuned
    --level 9 --parsable``; ``ignore`` (tuned's own choice) left out."""
    found = [(int(num), name) for coll, num, name in _ENUM.findall(text)
             if coll == collective and int(num) != 0]
    if not found:
        raise ParseError(f"ompi_info lists no coll/tuned algorithm for {collective} "
                         "(is this Open MPI, and is coll/tuned built?)")
    return sorted(set(found))


# mpivars: <tab>MPIR_CVAR_BCAST_INTRA_ALGORITHM =0<tab>...<tab>Variable to select bcast
# algorithmauto - Internal algorithm selection (...)binomial<32 spaces>- Force Binomial
# Treenb<38 spaces>- Force nonblocking algorithmsmp ...
# The description's lines run together, each name glued to the end of the
# line before it; the names are padded to one width, which tells where each
# begins (the first after auto's line follows its closing parenthesis).
_MPICH_ENTRY = re.compile(r"(\S+)( +)- ")
_NAME = re.compile(r"[a-z][a-z0-9_]*")
#: What MPICH prints when it will not run a forced algorithm.
_MPICH_REFUSED = re.compile(r"(Invalid MPIR_CVAR_\w+ value \([^)]*\)|"
                            r"User set collective algorithm is not usable[^\n]*)")


def mpich_algorithms(text, collective):
    """The names MPICH's ``mpivars`` lists for
    ``MPIR_CVAR_<COLLECTIVE>_INTRA_ALGORITHM``; ``auto`` (its own choice)
    left out."""
    var = f"MPIR_CVAR_{collective.upper()}_INTRA_ALGORITHM"
    line = next((ln for ln in text.splitlines()
                 if ln.strip().partition("=")[0].strip() == var and "=" in ln), None)
    if line is None:
        raise ParseError(f"mpivars lists no {var} (is this MPICH?)")
    entries = _MPICH_ENTRY.findall(line.split("\t")[-1])
    if entries and entries[0][0].endswith("auto"):
        entries = entries[1:]
    if not entries or ")" not in entries[0][0]:
        raise ParseError(f"mpivars: cannot read the algorithms in the description of {var}")
    first, pad = entries[0]
    width = len(first.rsplit(")", 1)[1]) + len(pad)
    names = [token[-(width - len(pad)):] for token, pad in entries if width > len(pad)]
    if len(names) != len(entries) or not all(_NAME.fullmatch(n) for n in names):
        raise ParseError(f"mpivars: cannot read the algorithms in the description of {var}: "
                         f"{[t for t, _ in entries]}")
    return names


def mpich_refusal(text):
    """MPICH's words for a forced algorithm it would not run, or None."""
    found = _MPICH_REFUSED.search(text)
    return found.group(1).strip() if found else None


def ompi_params_in_effect(text):
    """{parameter: value} as Open MPI printed them at MPI_Init
    (``mpi_show_mca_params``); empty when nothing was printed."""
    return {name: value.strip() for _, name, value in _PARAM.findall(text)}


#: A process's verbose line begun in the middle of another's: two ranks
#: writing to one stream without a lock ("...unloadi[vm:14180] coll:...").
_GLUED = re.compile(r"(?<=[^\n])(?=\[[^\]\s]+:\d+\] )")


def unglued(text):
    """*text* with every process's verbose line on a line of its own."""
    return _GLUED.sub("\n", text)


def ompi_world_components(text):
    """{process: [(component, priority)]}: the coll components each process
    enabled on MPI_COMM_WORLD, highest priority first."""
    text = unglued(text)
    out, current = {}, {}
    events = sorted([(m.start(), "comm", m.group(1), m.group(2)) for m in _COMM.finditer(text)] +
                    [(m.start(), "sel", m.group(1), m) for m in _SELECTING.finditer(text)],
                    key=lambda e: e[0])
    for _, kind, proc, what in events:
        if kind == "comm":
            current[proc] = what
            if what == "MPI_COMM_WORLD":
                out[proc] = []
        elif current.get(proc) == "MPI_COMM_WORLD" and what.group(4) == "Enabled":
            out[proc].append((what.group(2), int(what.group(3))))
    return {proc: sorted(comps, key=lambda c: -c[1]) for proc, comps in out.items()}


def ompi_serving_component(text):
    """{process: (component, priority)} that serves blocking collectives on
    MPI_COMM_WORLD in each process (the enabled one of highest priority)."""
    out = {}
    for proc, comps in ompi_world_components(text).items():
        serving = [c for c in comps if c[0] not in _NOT_SERVING]
        if serving:
            out[proc] = serving[0]
    return out


def ompi_forced_algorithm_applied(text, collective, algorithm):
    """Why the forced *algorithm* of *collective* did not run, or None when
    the launch's own report shows it did: the parameter took the value asked
    for and ``coll/tuned`` served MPI_COMM_WORLD in every process."""
    params = ompi_params_in_effect(text)
    if not params:
        return ("the launch printed no MCA parameters (mpi_show_mca_params): "
                "cannot tell whether the algorithm was applied")
    key = f"coll_tuned_{collective}_algorithm"
    took = params.get(key)
    if took != algorithm:
        return (f"Open MPI took {key}={took or 'nothing'}, not {algorithm} "
                "(the library does not know it, or something overrode it)")
    if params.get("coll_tuned_use_dynamic_rules") not in ("true", "1"):
        return "coll_tuned_use_dynamic_rules is not true: tuned ignores forced algorithms"
    serving = ompi_serving_component(text)
    if not serving:
        return ("the launch printed no collective component selection (coll_base_verbose): "
                "cannot tell which component served MPI_COMM_WORLD")
    others = sorted({f"coll/{c} (priority {p})" for c, p in serving.values() if c != "tuned"})
    if others:
        return (f"{', '.join(others)} outranks coll/tuned on MPI_COMM_WORLD: the forced "
                "algorithm does not run")
    return None


_IO_SELECTED = re.compile(r"^\[([^\]]+)\] io:base:file_select: Selected io module (\S+)",
                          re.MULTILINE)


def ompi_io_selected(text):
    """The io modules Open MPI selected to open files (``io_base_verbose``
    >= 10), over every process."""
    return {m.group(2) for m in _IO_SELECTED.finditer(unglued(text))}

