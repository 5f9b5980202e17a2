#!/usr/bin/env bash
# Set up hpc-health on this machine: system packages (when root and missing),
# a virtual environment in .venv with the hpc-health command, and -- when no
# Spack is found and an offline kit is given -- Spack bootstrapped from it.
#
#   bash ci/setup.sh                              # then: .venv/bin/hpc-health --help
#   HPC_HEALTH_SPACK_KIT=DIR bash ci/setup.sh     # ... and Spack from the kit DIR
#
# Environment: HPC_HEALTH_VENV (default: <repo>/.venv), PYTHON (default: python3),
# HPC_HEALTH_SPACK_KIT (an offline Spack kit, docs/spack.md), HPC_HEALTH_CACHE
# (where Spack is bootstrapped; default ~/.cache/hpc-health).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${HPC_HEALTH_VENV:-$repo/.venv}
python=${PYTHON:-python3}

spack_wanted() {
    # A kit to bootstrap from, a Spack on PATH or $SPACK_ROOT, or the site's
    # spack.spack_root / spack.kit (any site folder that sets one).
    [[ -n ${HPC_HEALTH_SPACK_KIT:-} || -n ${SPACK_ROOT:-} ]] && return 0
    command -v spack >/dev/null 2>&1 && return 0
    grep -Eqs '^\s*(spack_root|kit):\s*[^[:space:]#n]' "$repo"/site_configs/*/site.yaml
}

need=()
command -v mpicc >/dev/null 2>&1 || need+=(openmpi-bin libopenmpi-dev)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v make >/dev/null 2>&1 || need+=(make)
if spack_wanted; then
    # What Spack builds with here: the local site declares Debian's gcc with
    # Fortran (STREAM's recipe builds stream_f.exe); IOR's and Darshan's
    # builds run autoreconf; the rest are build tools Spack takes as
    # externals instead of building them.
    for tool in gfortran:gfortran libtoolize:libtool autoreconf:autoconf automake:automake \
                m4:m4 bison:bison flex:flex gawk:gawk file:file; do
        command -v "${tool%%:*}" >/dev/null 2>&1 || need+=("${tool#*:}")
    done
    [[ -e /usr/include/zlib.h ]] || need+=(zlib1g-dev)
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

venv_pip() {
    # pip in the venv (a venv made without it gets it now), then pip install.
    "$venv/bin/python" -m pip --version >/dev/null 2>&1 || "$venv/bin/python" -m ensurepip -q
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "$@"
}
if [[ ! -x $venv/bin/python ]]; then
    echo "setup: creating $venv"
    # Without pip when this Python's pip can put uv into it (pip --python):
    # ensurepip is 7 s of a cold set-up here, and uv installs the rest.
    "$python" -m venv --without-pip "$venv"
    "$python" -m pip --python "$venv/bin/python" install -q --disable-pip-version-check \
        "uv==0.13.9" 2>/dev/null || true
fi
echo "setup: installing hpc-health and its pinned dependencies into $venv"
# uv installs the same requirements as pip in a few seconds instead of most
# of a minute (it resolves and unpacks in parallel); pip when uv cannot be had.
# Compiled, as pip does: where Python may not write bytecode itself
# (PYTHONDONTWRITEBYTECODE, a read-only venv) every hpc-health and ReFrame
# process would otherwise compile ReFrame, numpy and scipy again: 5 s
# instead of 2 s of imports each, 50 % on the whole fast stage here.
# Editable as a plain path in a .pth (editable_mode=compat), not setuptools'
# import hook: the hook is Python code every start-up of the venv runs in its
# site module, before any line of ours can catch a stop signal (a Ctrl-C
# there prints Python's KeyboardInterrupt traceback: bench/startup_signal.py).
editable=(-e "$repo[test]")
if [[ -x $venv/bin/uv ]] || venv_pip "uv==0.13.9" 2>/dev/null; then
    VIRTUAL_ENV=$venv "$venv/bin/uv" pip install -q --native-tls --compile-bytecode \
        --python "$venv/bin/python" -C editable_mode=compat "${editable[@]}" ||
        venv_pip --config-settings editable_mode=compat "${editable[@]}"
else
    venv_pip --config-settings editable_mode=compat "${editable[@]}"
fi
"$venv/bin/hpc-health" --version
# Spack for the benchmarks when none is found: from the kit, else from the
# network; without either the run says so and skips those checks.
if [[ -n ${HPC_HEALTH_SPACK_KIT:-} ]]; then
    "$venv/bin/hpc-health" spack setup --site local
elif ! "$venv/bin/hpc-health" spack setup --site local; then
    echo "setup: continuing without Spack: STREAM, OSU and IOR/mdtest will be SKIPPED" >&2
fi
