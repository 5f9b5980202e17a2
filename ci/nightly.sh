#!/usr/bin/env bash
# Nightly health run for a site, for cron or a CI scheduler.
#
#   ci/nightly.sh SITE [hpc-health run options]
#
# Runs the suite and keeps the run in the store ($HPC_HEALTH_STORE, which
# must persist from night to night): the run judges the night against the
# references and then every figure it measured over the stored runs.
# Exit: 0 healthy, 1 degraded/failed/outlier tonight, 2 configuration error,
# 3 drifting (tonight passed, but a figure has stayed worse over the recent
# runs), 128 + signal when stopped.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
site=${1:?usage: ci/nightly.sh SITE [hpc-health run options]}
shift
hh=${HPC_HEALTH:-$repo/.venv/bin/hpc-health}
[[ -x $hh ]] || hh=hpc-health

# exec: in a Slurm batch job, scancel signals only the batch shell; the run
# must be that shell to hear it and close the night.  Under a time limit,
# also ask for the signal before it (#SBATCH --signal=B:TERM@300), so the
# night is closed before the limit (docs/faults.md, "The stop, phase by phase").
exec "$hh" run --site "$site" "$@"
