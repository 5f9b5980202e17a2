#!/usr/bin/env bash
# Set up hpc-health and run the health suite on this machine (site `local`
# unless --site is given), printing the health table.
#
#   bash ci/health.sh [hpc-health run options]
# Exit code: 0 healthy, 1 degraded or failed, 2 configuration error.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$repo/ci/setup.sh"
venv=${HPC_HEALTH_VENV:-$repo/.venv}
exec "$venv/bin/hpc-health" run "$@"
