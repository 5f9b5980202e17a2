"""Inside the job of a collective-algorithm sweep: which algorithms to run
and the environment that forces each one.

Run on the compute node, where the job's MPI is: the algorithms an Open MPI
offers are listed by its own ``ompi_info`` there (the login node's may be
another build).  Prints one line per algorithm, ``NAME<TAB>VAR=VALUE ...``,
the MPI's own choice (``default``, no variable) first; the job script runs a
launch per line under ``env``.  Standard library only.

    python -m hpc_health.jobside.collectives plan --mpi auto --collective allreduce \
        [--only ring,recursive_doubling] [--ompi-info FILE]
"""

import argparse
import shutil
import subprocess
import sys

from hpc_health.parsers import ParseError
from hpc_health.parsers.mpi_info import ompi_tuned_algorithms

#: MPICH 4's named algorithms (``MPIR_CVAR_<COLL>_INTRA_ALGORITHM``): MPICH has
#: no listing a script can read, so a site on MPICH runs these unless it
#: names its own (``osu_algorithms.only``).
MPICH_ALGORITHMS = {
    "allreduce": ["recursive_doubling", "reduce_scatter_allgather", "ring", "recexch", "tree",
                  "k_reduce_scatter_allgather"],
    "bcast": ["binomial", "scatter_recursive_doubling_allgather", "scatter_ring_allgather",
              "pipelined_tree", "tree"],
    "alltoall": ["brucks", "k_brucks", "pairwise", "pairwise_sendrecv_replace", "scattered"],
}

#: Variables every launch of the proof gets: the library reports what it applied.
PROOF_ENV = {"openmpi": ["OMPI_MCA_mpi_show_mca_params=enviro", "OMPI_MCA_coll_base_verbose=10"],
             "mpich": ["MPIR_CVAR_DEBUG_SUMMARY=1"],
             "cray-mpich": ["MPICH_ENV_DISPLAY=1"]}


def detect_mpi():
    return "openmpi" if shutil.which("ompi_info") else None


def ompi_info_text(path=None):
    if path:
        with open(path) as fp:
            return fp.read()
    return subprocess.run(["ompi_info", "--param", "coll", "tuned", "--level", "9",
                           "--parsable"], capture_output=True, text=True, check=True).stdout


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


def plan(mpi, collective, only=None, ompi_info=None):
    """[(name, [VAR=VALUE])], the MPI's default first."""
    if mpi == "openmpi":
        offered = [name for _, name in ompi_tuned_algorithms(ompi_info_text(ompi_info),
                                                               collective)]
    else:
        offered = MPICH_ALGORITHMS[collective]
    # A name the MPI does not offer is kept: its proof launch shows that the
    # library refused or replaced it, which is a FAIL with the reason, not a
    # silently shorter sweep.
    names = list(only) if only else offered
    return [("default", [])] + [(n, forcing_env(mpi, collective, n)) for n in names]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="hpc_health.jobside.collectives")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("plan")
    p.add_argument("--mpi", choices=["auto", "openmpi", "mpich", "cray-mpich"], default="auto")
    p.add_argument("--collective", choices=sorted(MPICH_ALGORITHMS), required=True)
    p.add_argument("--only", default="")
    p.add_argument("--ompi-info")
    args = ap.parse_args(argv)
    mpi = detect_mpi() if args.mpi == "auto" else args.mpi
    if mpi is None:
        print("hpc-health: no ompi_info on the job's PATH, so the MPI is not Open MPI; "
              "name it in the site settings (osu_algorithms.mpi: mpich or cray-mpich)",
              file=sys.stderr)
        return 2
    try:
        lines = plan(mpi, args.collective, [n for n in args.only.split(",") if n],
                     args.ompi_info)
    except (ParseError, OSError, subprocess.CalledProcessError) as err:
        print(f"hpc-health: cannot list the {args.collective} algorithms: {err}",
              file=sys.stderr)
        return 2
    proof = " ".join(PROOF_ENV[mpi])
    for name, env in lines:
        print(f"{name}\t{' '.join(env)}\t{proof}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
