#!/usr/bin/env bash
# Acceptance after an upgrade: several runs judged against the site's
# references, so one lucky or unlucky run does not decide.
#
#   ci/acceptance.sh SITE [RUNS] [hpc-health run options]
#
# Exit 0 only when every run is healthy; the runs stay in the store, so
# `hpc-health compare` can put the new stack beside the old one and, if
# accepted, `hpc-health reference capture --site SITE --from RUN,... --write`
# re-baselines on exactly these runs.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
site=${1:?usage: ci/acceptance.sh SITE [RUNS] [hpc-health run options]}
runs=${2:-3}
shift $(( $# >= 2 ? 2 : 1 ))
hh=${HPC_HEALTH:-$repo/.venv/bin/hpc-health}
[[ -x $hh ]] || hh=hpc-health

worst=0
for ((i = 1; i <= runs; i++)); do
    echo "== acceptance run $i/$runs on $site"
    "$hh" run --site "$site" "$@"
    rc=$?
    case $rc in
        0) ;;
        2|129|130|143) exit "$rc" ;;   # configuration error, or stopped by a signal
        *) worst=1 ;;
    esac
done
echo "== acceptance of $site: $([[ $worst -eq 0 ]] && echo ACCEPTED || echo REJECTED)"
exit "$worst"
