#!/usr/bin/env bash
# Set up hpc-health and run its test suite (what CI runs).
#
#   bash ci/test.sh [pytest options]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$repo/ci/setup.sh"
venv=${HPC_HEALTH_VENV:-$repo/.venv}
cd "$repo"
# Results of test runs never mix with a real store.
export HPC_HEALTH_STORE=${HPC_HEALTH_STORE:-$(mktemp -d /tmp/hpc-health-test-store.XXXXXX)}
exec "$venv/bin/python" -m pytest -ra "$@"
