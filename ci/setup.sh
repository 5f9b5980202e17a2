#!/usr/bin/env bash
# Set up hpc-health on this machine: system packages (when root and missing)
# and a virtual environment in .venv with the hpc-health command.
#
#   bash ci/setup.sh            # then: .venv/bin/hpc-health --help
#
# Environment: HPC_HEALTH_VENV (default: <repo>/.venv), PYTHON (default: python3).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${HPC_HEALTH_VENV:-$repo/.venv}
python=${PYTHON:-python3}

need=()
command -v mpicc >/dev/null 2>&1 || need+=(openmpi-bin libopenmpi-dev)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v make >/dev/null 2>&1 || need+=(make)
# Where Spack builds the benchmarks: the local site's spack.yaml declares
# Debian's gcc with Fortran (STREAM's recipe builds stream_f.exe), and IOR's
# and Darshan's builds run autoreconf (libtoolize).
if command -v spack >/dev/null 2>&1 || [[ -n ${SPACK_ROOT:-} ]]; then
    command -v gfortran >/dev/null 2>&1 || need+=(gfortran)
    command -v libtoolize >/dev/null 2>&1 || need+=(libtool)
fi
if ((${#need[@]})); then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: installing ${need[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    else
        echo "setup: missing ${need[*]}: install them (Debian: apt-get install ${need[*]})" >&2
        exit 2
    fi
fi

if [[ ! -x $venv/bin/python ]]; then
    echo "setup: creating $venv"
    "$python" -m venv "$venv"
fi
echo "setup: installing hpc-health and its pinned dependencies into $venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -e "$repo[test]"
"$venv/bin/hpc-health" --version
