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

echo "== fast stage: lint, types, unit tests, parsers, dry runs"
start=$SECONDS
"$venv/bin/ruff" check .
"$venv/bin/mypy"      # the judge and store layers (pyproject.toml [tool.mypy])
# --durations: every CI log says where its time went (docs/development.md, CI time).
# Two workers, a test module each (its module fixtures stay in one process):
# most fast tests start hpc-health or ReFrame processes and wait on them.
"$venv/bin/python" -m pytest -q -ra --durations=10 -m "not slow" \
    -n "${HPC_HEALTH_TEST_WORKERS:-2}" --dist loadfile "$@"
echo "== fast stage passed in $((SECONDS - start)) s (load $(cut -d' ' -f1-3 /proc/loadavg))"

echo "== slow stage: MPI, ReFrame end to end, Slurm, faults, Spack"
start=$SECONDS
rc=0
"$venv/bin/python" -m pytest -ra --durations=25 -m slow "$@" || rc=$?
echo "== slow stage $( ((rc)) && echo "failed (exit $rc)" || echo passed) in $((SECONDS - start)) s" \
     "(load $(cut -d' ' -f1-3 /proc/loadavg))"
exit "$rc"
