#!/usr/bin/env bash
# Acceptance after an upgrade, as one command: N runs of the new stack,
# tagged, compared with the runs before the upgrade (the runs tagged
# pre-upgrade, else the last N runs stored before this acceptance), with the
# compare table and the stack diff; ACCEPT or REJECT.
#
#   ci/acceptance.sh SITE [RUNS] [hpc-health run options]
#
#   BEFORE=SET   the runs to compare with (a run set: tag:NAME, A..B, ...)
#   TAG=NAME     the tag of the new runs (default acceptance-<UTC time>)
#
# Exit 0 ACCEPT: no figure REGRESSED, the figures together not BROADLY
# WORSE, and every run healthy; 1 REJECT;
# 2 a configuration error or no runs to compare with; 128+n stopped by a
# signal.  The one command that re-baselines on exactly the new runs is
# printed at the end.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
site=${1:?usage: ci/acceptance.sh SITE [RUNS] [hpc-health run options]}
runs=${2:-3}
shift $(( $# >= 2 ? 2 : 1 ))
hh=${HPC_HEALTH:-$repo/.venv/bin/hpc-health}
[[ -x $hh ]] || hh=hpc-health
tag=${TAG:-acceptance-$(date -u +%Y%m%dT%H%M%S)}

# The runs before, fixed now: "the last N" must not include the new ones.
if [[ -n ${BEFORE:-} ]]; then
    before=$BEFORE
elif "$hh" runs --site "$site" tag:pre-upgrade >/dev/null 2>&1; then
    before=tag:pre-upgrade
else
    ids=$("$hh" runs --site "$site" --ids "last:$runs") || {
        echo "acceptance: no stored runs of $site to compare with: run the suite before the" \
             "upgrade (hpc-health run --site $site --tag pre-upgrade, $runs times)" >&2
        exit 2
    }
    before="$(head -n 1 <<<"$ids")..$(tail -n 1 <<<"$ids")"
fi
echo "== acceptance of $site: $runs runs tagged $tag, compared with $before"

unhealthy=0
for ((i = 1; i <= runs; i++)); do
    echo "== acceptance run $i/$runs on $site"
    "$hh" run --site "$site" --tag "$tag" --note "acceptance run $i/$runs" "$@"
    rc=$?
    case $rc in
        0|3) ;;            # 3: drifting over earlier runs, not this acceptance's question
        1) unhealthy=1 ;;
        *) exit "$rc" ;;   # configuration error, or stopped by a signal
    esac
done

echo "== the new stack ($tag) against the old ($before)"
table=$(mktemp)
trap 'rm -f "$table"' EXIT
"$hh" compare --site "$site" "$before" "tag:$tag" | tee "$table"
rc=${PIPESTATUS[0]}
[[ $rc -ge 2 ]] && exit "$rc"
if [[ $rc -eq 0 && $unhealthy -eq 0 ]]; then
    undecided=$(grep -c 'INCONCLUSIVE$' "$table")
    echo "== acceptance of $site: ACCEPT$( ((undecided)) && echo " ($undecided figure(s) INCONCLUSIVE: nothing regressed that these runs could see; more runs on each side narrow it)")"
    echo "Re-baseline on exactly these runs: $hh reference capture --site $site --from tag:$tag --write"
    exit 0
fi
if grep -q ' REGRESSED$' "$table"; then
    why_rc="figures REGRESSED against $before$(grep -q '^BROADLY WORSE' "$table" && echo "; all of them together BROADLY WORSE")"
else
    why_rc="the figures together are BROADLY WORSE than $before"
fi
echo "== acceptance of $site: REJECT ($([[ $rc -eq 1 ]] && echo "$why_rc")$([[ $rc -eq 1 && $unhealthy -eq 1 ]] && echo "; ")$([[ $unhealthy -eq 1 ]] && echo "a run was unhealthy against the references"))"
echo "If the change is intended, re-baseline on exactly these runs: $hh reference capture --site $site --from tag:$tag --write"
exit 1
