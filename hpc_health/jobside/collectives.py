"""Inside the job of a collective-algorithm sweep: which algorithms to run
and the environment that forces each one.

Run on the compute node, where the job's MPI is: the algorithms an Open MPI
offers are listed by its own ``ompi_info`` there (the login node's may be
another build), an MPICH's by its ``mpivars``.  ``--mpi auto`` takes the MPI
the benchmark is linked with.  Prints one line per algorithm,
``NAME<TAB>VAR=VALUE ...``, the MPI's own choice (``default``, no variable)
first; the job script runs a launch per line under ``env``.

    python -m hpc_health.jobside.collectives plan --mpi auto --collective allreduce \
        [--only ring,recursive_doubling] [--executable osu_allreduce] [--listing FILE]
"""

import argparse
import shutil
import subprocess
import sys

from hpc_health.parsers import ParseError
from hpc_health.parsers.mpi_info import mpich_algorithms, ompi_tuned_algorithms

#: The collectives the sweep knows.
COLLECTIVES = ("allreduce", "alltoall", "bcast")

#: Variables every launch of the proof gets: the library reports what it applied.
PROOF_ENV = {"openmpi": ["OMPI_MCA_mpi_show_mca_params=enviro", "OMPI_MCA_coll_base_verbose=10"],
             "mpich": ["MPIR_CVAR_DEBUG_SUMMARY=1"],
             "cray-mpich": ["MPICH_ENV_DISPLAY=1"]}


def detect_mpi(executable=None):
    """The MPI *executable* is linked with (a machine may have both, as
    Debian does when mpich is installed beside Open MPI), else the one
    whose listing tool is on PATH; None when neither tells."""
    if executable and shutil.which("ldd"):
        libs = subprocess.run(["ldd", executable], capture_output=True, text=True).stdout
        if "libmpi_cray" in libs:
            return "cray-mpich"
        if "libmpich" in libs:
            return "mpich"
        if "libopen-pal" in libs or "libopen-rte" in libs:
            return "openmpi"
    if shutil.which("ompi_info"):
        return "openmpi"
    return "mpich" if shutil.which("mpivars") else None


def _listing(command, path=None):
    if path:
        with open(path) as fp:
            return fp.read()
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def ompi_info_text(path=None):
    return _listing(["ompi_info", "--param", "coll", "tuned", "--level", "9", "--parsable"],
                    path)


def forcing_env(mpi, collective, algorithm):
    """The variables that force *algorithm* (and make the library refuse
    rather than replace an algorithm it cannot run)."""
    if mpi == "openmpi":
        # han outranks tuned in Open MPI 5; priority 0 keeps it out without
        # naming a component an older build lacks (that would abort MPI_Init).
        return ["OMPI_MCA_coll_tuned_use_dynamic_rules=1",
                f"OMPI_MCA_coll_tuned_{collective}_algorithm={algorithm}",
                "OMPI_MCA_coll_han_priority=0"]
    return [f"MPIR_CVAR_{collective.upper()}_INTRA_ALGORITHM={algorithm}",
            "MPIR_CVAR_COLLECTIVE_FALLBACK=error"]


def offered(mpi, collective, listing=None):
    """The algorithms the MPI lists for *collective*: Open MPI's
    ``ompi_info``, MPICH's ``mpivars`` (*listing*: a file holding that
    output instead)."""
    if mpi == "openmpi":
        return [name for _, name in ompi_tuned_algorithms(ompi_info_text(listing), collective)]
    return mpich_algorithms(_listing(["mpivars"], listing), collective)


def plan(mpi, collective, only=None, listing=None):
    """[(name, [VAR=VALUE])], the MPI's default first."""
    # A name the MPI does not offer is kept: its proof launch shows that the
    # library refused or replaced it, which is a FAIL with the reason, not a
    # silently shorter sweep.
    names = list(only) if only else offered(mpi, collective, listing)
    return [("default", [])] + [(n, forcing_env(mpi, collective, n)) for n in names]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="hpc_health.jobside.collectives")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("plan")
    p.add_argument("--mpi", choices=["auto", "openmpi", "mpich", "cray-mpich"], default="auto")
    p.add_argument("--collective", choices=COLLECTIVES, required=True)
    p.add_argument("--only", default="")
    p.add_argument("--executable", help="the benchmark: the MPI it is linked with")
    p.add_argument("--listing", help="ompi_info's or mpivars' output, instead of running it")
    args = ap.parse_args(argv)
    mpi = detect_mpi(args.executable) if args.mpi == "auto" else args.mpi
    if mpi is None:
        print("hpc-health: neither the benchmark's libraries nor ompi_info or mpivars on the "
              "job's PATH tell which MPI this is; name it in the site settings "
              "(osu_algorithms.mpi: openmpi, mpich or cray-mpich)", file=sys.stderr)
        return 2
    try:
        lines = plan(mpi, args.collective, [n for n in args.only.split(",") if n],
                     args.listing)
    except (ParseError, OSError, subprocess.CalledProcessError) as err:
        print(f"hpc-health: cannot list the {args.collective} algorithms of {mpi}: {err}; "
              "name them in the site settings (osu_algorithms.only)", file=sys.stderr)
        return 2
    proof = " ".join(PROOF_ENV[mpi])
    for name, env in lines:
        print(f"{name}\t{' '.join(env)}\t{proof}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
