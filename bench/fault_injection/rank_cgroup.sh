#!/bin/sh
# Puts this process (and so what it execs) into a cgroup before the benchmark
# starts, so a limit can hit one MPI rank only: mpirun starts every rank
# through this wrapper, and only the rank named by FI_CGROUP_RANK (every
# process when it is empty, e.g. a singleton IOR) joins FI_CGROUP_PROCS.
# Joining before exec means the benchmark never runs a cycle outside it.
set -e
if [ -n "${FI_CGROUP_PROCS:-}" ]; then
    rank="${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-}}"
    if [ -z "${FI_CGROUP_RANK:-}" ] || [ "$rank" = "$FI_CGROUP_RANK" ]; then
        echo $$ > "$FI_CGROUP_PROCS"
    fi
fi
exec "$@"
