#!/usr/bin/env bash
# The newcomer walk (docs/development.md, "The newcomer path, measured"):
# on a fresh clone with its own store, the README's first command five
# times, the capture command run 5 prints, twelve clean runs, three runs
# beside two paced memory-copy hogs, the `Next:` command night 19 prints,
# and one clean run.  Each run's output and a summary line (exit code,
# seconds, load) go to LOG.  Runs nothing else: start it alone.
#
#   bash bench/gate/walk.sh CLONE STORE LOG [KIT]
#
# CLONE, STORE and LOG are made afresh (removed first if they exist: give
# scratch paths); KIT is the offline Spack kit (default ../shared/spack-kit).
# WALK_CLEAN and WALK_HOGS (default 12 and 3) shorten it.
set -u
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
clone=${1:?usage: walk.sh CLONE STORE LOG [KIT]}; store=${2:?}; log=${3:?}
kit=$(cd "${4:-$repo/../shared/spack-kit}" && pwd)
rm -rf "$clone" "$store" "$log"; mkdir -p "$log"
git clone -q "$repo" "$clone"
export HPC_HEALTH_STORE=$store HPC_HEALTH_SPACK_KIT=$kit
cd "$clone" || exit 2
run() {
    local n=$1 t0; t0=$(date +%s)
    bash ci/health.sh > "$log/run$n.log" 2>&1
    echo "run $n rc=$? $(( $(date +%s) - t0 ))s $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)" >> "$log/summary"
}
for n in 1 2 3 4 5; do run $n; done
capture=$(grep -o "make it the reference: .*" "$log/run5.log" | sed 's/^make it the reference: //')
echo "capture: $capture" >> "$log/summary"
eval "$capture" > "$log/capture.log" 2>&1; echo "capture rc=$?" >> "$log/summary"
clean=${WALK_CLEAN:-12} hogs=${WALK_HOGS:-3}
last=$((5 + clean))
for n in $(seq 6 $last); do run $n; done
gcc -O2 -o "$log/memhog" bench/fault_injection/memhog.c
for n in $(seq $((last + 1)) $((last + hogs))); do
    "$log/memhog" 8000 512 & h1=$!
    "$log/memhog" 8000 512 & h2=$!
    sleep 1; run $n; kill $h1 $h2; wait $h1 $h2 2>/dev/null
done
next=$(grep -o "Next: look at .*when it started: .*" "$log/run$((last + (hogs > 1 ? 2 : 1))).log" \
       | sed 's/.*when it started: //')
echo "next: $next" >> "$log/summary"
eval "$next" > "$log/next.log" 2>&1; echo "next rc=$?" >> "$log/summary"
run $((last + hogs + 1))
echo DONE >> "$log/summary"
