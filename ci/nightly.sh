#!/usr/bin/env bash
# Nightly health run for a site, for cron or a CI scheduler.
#
#   ci/nightly.sh SITE [hpc-health run options]
#
# Runs the suite, keeps the run in the store ($HPC_HEALTH_STORE), then scans
# every figure's history for sustained steps that stayed inside the bounds.
# Exit: 0 healthy, 1 degraded/failed/outlier or a drift step, 2 configuration
# error (the first non-zero of the two steps wins).
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
site=${1:?usage: ci/nightly.sh SITE [hpc-health run options]}
shift
hh=${HPC_HEALTH:-$repo/.venv/bin/hpc-health}
[[ -x $hh ]] || hh=hpc-health

"$hh" run --site "$site" "$@"
run_rc=$?
if [[ $run_rc -eq 2 || $run_rc -ge 128 ]]; then   # config error, or stopped by a signal
    exit "$run_rc"
fi
echo
echo "== drift over the stored runs of $site"
"$hh" history --site "$site" --all
drift_rc=$?
(( run_rc != 0 )) && exit "$run_rc"
exit "$drift_rc"
