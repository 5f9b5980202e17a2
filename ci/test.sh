#!/usr/bin/env bash
# Set up hpc-health and run its test suite (what CI runs): a fast stage first
# (lint, unit tests, parsers, dry runs of every check on every site), and
# only when it passes the slow one (kernels under mpirun, ReFrame end to
# end, local Slurm, faults, and the real Spack path when Spack or an
# offline kit is there).
#
#   bash ci/test.sh [pytest options]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$repo/ci/setup.sh"
venv=${HPC_HEALTH_VENV:-$repo/.venv}
cd "$repo"
# The report's browser test draws pages in headless Chromium (network off).
if ! command -v chromium >/dev/null 2>&1 && [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "test: installing chromium (the HTML report's browser test)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends chromium >/dev/null; } \
        || echo "test: chromium could not be installed: the browser test will say it skipped"
fi
# The collective sweep's MPICH side runs for real against Debian's MPICH,
# installed beside Open MPI (which stays the default mpirun and mpicc).
if ! command -v mpicc.mpich >/dev/null 2>&1 && [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "test: installing mpich libmpich-dev (the collective sweep on MPICH)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends mpich libmpich-dev >/dev/null; } \
        || echo "test: MPICH could not be installed: its test will say it skipped"
fi
# Screenshots and pages for a person to look at (CI keeps the folder).
export HPC_HEALTH_TEST_ARTIFACTS=${HPC_HEALTH_TEST_ARTIFACTS:-$repo/test-artifacts}
# Results of test runs never mix with a real store.
export HPC_HEALTH_STORE=${HPC_HEALTH_STORE:-$(mktemp -d /tmp/hpc-health-test-store.XXXXXX)}

echo "== fast stage: lint, types, unit tests, parsers, dry runs"
start=$SECONDS
"$venv/bin/ruff" check .
"$venv/bin/mypy"      # the judge and store layers, spack/ (pyproject.toml [tool.mypy])
# --durations: every CI log says where its time went (docs/development.md, CI time).
# Two workers, a test module each (its module fixtures stay in one process):
# most fast tests start hpc-health or ReFrame processes and wait on them.
"$venv/bin/python" -m pytest -q -ra --durations=10 -m "not slow" \
    -n "${HPC_HEALTH_TEST_WORKERS:-2}" --dist loadfile "$@"
echo "== fast stage passed in $((SECONDS - start)) s (load $(cut -d' ' -f1-3 /proc/loadavg))"

# The slow tests in three groups (docs/development.md, CI time).  The cold
# Spack test (marker `spack_build`: a cold build is most of CI's time) and
# slow stage 1 judge no figure: they run side by side, their Open MPI
# ranks yielding when they wait so that two jobs on the same cores both
# progress.  The tests marked `quiet` judge live figures: last, alone.
slow() {   # slow MARKER PYTEST-OPTIONS...: one group, with its own store
    local marker=$1 got=0
    shift
    HPC_HEALTH_STORE=$(mktemp -d /tmp/hpc-health-test-store.XXXXXX) OMPI_MCA_mpi_yield_when_idle=1 \
        "$venv/bin/python" -m pytest -ra --durations=25 -m "slow and $marker" "$@" || got=$?
    # 5: no test of the group ran (without Spack its module skips, saying why).
    ((got == 5)) && got=0
    return "$got"
}
rc=0
said() {   # said LABEL START RC: the group's verdict line; CI's exit code
    echo "== $1 $( (($3)) && echo "failed (exit $3)" || echo passed) in $((SECONDS - $2)) s" \
         "(load $(cut -d' ' -f1-3 /proc/loadavg))"
    if (($3)); then rc=$3; fi
}
start=$SECONDS
spack_log=$(mktemp /tmp/hpc-health-spack-tests.XXXXXX)
# Its own process group, so that a CI stopped half-way stops its builds too.
set -m
slow spack_build -p no:cacheprovider "$@" >"$spack_log" 2>&1 &
spack_pid=$!
set +m
trap 'kill -- -"$spack_pid" 2>/dev/null || true; rm -f "$spack_log"' EXIT
echo "== slow stage 1: MPI, ReFrame end to end, faults, Slurm (beside the cold Spack test)"
got=0 && slow "not spack_build and not quiet" "$@" || got=$?
said "slow stage 1" "$start" "$got"
echo "== the cold Spack test (started with slow stage 1)"
got=0 && wait "$spack_pid" || got=$?
cat "$spack_log"
said "the cold Spack test" "$start" "$got"
echo "== slow stage 2, alone: live figures judged (first run, newcomer, acceptance, per-node)"
start=$SECONDS
got=0 && slow quiet "$@" || got=$?
said "slow stage 2" "$start" "$got"
exit "$rc"
