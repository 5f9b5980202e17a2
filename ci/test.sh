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
# Screenshots and pages for a person to look at (CI keeps the folder).
export HPC_HEALTH_TEST_ARTIFACTS=${HPC_HEALTH_TEST_ARTIFACTS:-$repo/test-artifacts}
# Results of test runs never mix with a real store.
export HPC_HEALTH_STORE=${HPC_HEALTH_STORE:-$(mktemp -d /tmp/hpc-health-test-store.XXXXXX)}

# The slow tests in three groups (docs/development.md, CI time).  Those
# marked `spack_build` build every spec set through the real Spack path (a
# cold build is most of CI's time) and judge no figure: they start now,
# beside the fast stage.
# The other slow tests that judge no figure run beside them once the fast
# stage has passed; in both groups Open MPI's ranks yield when they wait,
# so two jobs on the same cores both progress.  The tests marked `quiet`
# judge live figures: they run last, alone.
slow() {   # slow MARKER PYTEST-OPTIONS...: one group, with its own store
    local marker=$1
    shift
    HPC_HEALTH_STORE=$(mktemp -d /tmp/hpc-health-test-store.XXXXXX) \
        "$venv/bin/python" -m pytest -ra --durations=25 -m "slow and $marker" "$@"
}
spack_log=$(mktemp /tmp/hpc-health-spack-tests.XXXXXX)
spack_start=$SECONDS
set -m      # the Spack tests in their own process group: a failed fast stage stops them
# At nice 10 while the fast stage runs, so that it still answers in about
# two minutes; back to 0 once it passed (lowering a nice value needs root:
# elsewhere the Spack test stays at 10 and only takes longer).
(export OMPI_MCA_mpi_yield_when_idle=1; nice -n 10 bash -c "$(declare -f slow); venv=$venv; \
    slow spack_build -p no:cacheprovider \"\$@\"" slow "$@") >"$spack_log" 2>&1 &
spack_pid=$!
set +m
trap 'kill -INT -- "-$spack_pid" 2>/dev/null || true' EXIT

echo "== fast stage: lint, types, unit tests, parsers, dry runs (the Spack tests start beside it)"
start=$SECONDS
"$venv/bin/ruff" check .
"$venv/bin/mypy"      # the judge and store layers (pyproject.toml [tool.mypy])
# --durations: every CI log says where its time went (docs/development.md, CI time).
# Two workers, a test module each (its module fixtures stay in one process):
# most fast tests start hpc-health or ReFrame processes and wait on them.
"$venv/bin/python" -m pytest -q -ra --durations=10 -m "not slow" \
    -n "${HPC_HEALTH_TEST_WORKERS:-2}" --dist loadfile "$@"
echo "== fast stage passed in $((SECONDS - start)) s (load $(cut -d' ' -f1-3 /proc/loadavg))"

descendants() { local p; for p in $(ps -o pid= --ppid "$1"); do echo "$p"; descendants "$p"; done; }
renice -n 0 -p "$spack_pid" $(descendants "$spack_pid") >/dev/null 2>&1 || true

rc=0
said() {   # said LABEL START RC
    echo "== $1 $( (($3)) && echo "failed (exit $3)" || echo passed) in $((SECONDS - $2)) s" \
         "(load $(cut -d' ' -f1-3 /proc/loadavg))"
}
echo "== slow stage 1: MPI, ReFrame end to end, faults (beside the Spack tests)"
start=$SECONDS
got=0
(export OMPI_MCA_mpi_yield_when_idle=1; slow "not spack_build and not quiet" "$@") || got=$?
said "slow stage 1" "$start" "$got"
((got)) && rc=$got
echo "== the Spack tests (started with the fast stage)"
got=0
wait "$spack_pid" || got=$?
trap - EXIT
cat "$spack_log"
rm -f "$spack_log"
said "Spack tests" "$spack_start" "$got"
((got)) && rc=$got
echo "== slow stage 2, alone: live figures judged (first run, newcomer, acceptance, Slurm)"
start=$SECONDS
got=0
slow quiet "$@" || got=$?
said "slow stage 2" "$start" "$got"
((got)) && rc=$got
exit "$rc"
