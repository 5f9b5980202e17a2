"""Provenance collected at run time: the host, user, versions and commit of
the suite, the software stack the figures were measured with (and its
hash), the Spack builds, and the hardware and capabilities of the
partitions a run uses."""

import hashlib
import json
import os
import socket
import subprocess

from hpc_health import __version__, paths
from hpc_health.site import hardware
from hpc_health.spack import records


def git_state(root):
    """Commit of the suite itself, '+dirty' when it has local changes: a
    result must be traceable to the exact checks and references used."""
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (commit + ("+dirty" if dirty else "")) if commit else None


def base_provenance(site):
    return {
        "site": site.name,
        "hostname": socket.gethostname(),
        "user": os.environ.get("USER") or os.environ.get("LOGNAME"),
        "hpc_health": __version__,
        "reframe": _reframe_version(),
        "suite_commit": git_state(paths.repo_root()),
    }


def _reframe_version():
    # The distribution's metadata, not an import: the core stays free of ReFrame.
    from importlib import metadata
    try:
        return metadata.version("reframe-hpc")
    except metadata.PackageNotFoundError:
        return None


def _first_line(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else None


def software_stack(spack_records):
    """What the figures were measured with, and its hash: a change of hash
    between two runs is the first suspect for a change of figures."""
    import platform
    stack = {
        "kernel": platform.release(),
        "mpirun": _first_line(["mpirun", "--version"]),
        "mpicc": _first_line(["mpicc", "--version"]),
        "spack": {k: v.get("hashes", {}) for k, v in sorted(spack_records.items())},
        "environment": tuning_environment(),
    }
    digest = hashlib.sha256(json.dumps(stack, sort_keys=True).encode()).hexdigest()
    return stack, digest[:16]


#: Environment variables that change what MPI and the benchmarks do: a
#: preloaded library, MPI and fabric tuning.
_TUNING = ("LD_PRELOAD", "OMPI_MCA_", "PMIX_MCA_", "UCX_", "FI_", "MPICH_", "I_MPI_",
           "OMP_", "MV2_")


def tuning_environment(environ=None):
    environ = os.environ if environ is None else environ
    return {k: v for k, v in sorted(environ.items())
            if k == "LD_PRELOAD" or k.startswith(_TUNING[1:])}


def collect_spack_records(run_dir):
    """Spack locks and concrete hashes that the build fixtures kept."""
    return records.collect(run_dir)


def site_hardware(site, partition=None):
    """{'site:partition': hardware} of the partitions this run uses."""
    parts = [partition] if partition else list(site.partitions)
    found = {}
    for p in parts:
        settings = site.partitions[p] or {}
        hw = hardware.of_partition(settings.get("hardware"), settings.get("nodes"))
        if hw:
            found[f"{site.name}:{p}"] = hw
    return found


def site_capabilities(site, partition=None):
    """{'site:partition': declared capabilities} of this run's partitions:
    kept with the run, so a comparison elsewhere can normalise by them."""
    parts = [partition] if partition else list(site.partitions)
    found = {}
    for p in parts:
        caps = {k: v for k, v in ((site.partitions[p] or {}).get("capabilities") or {}).items()
                if v is not None}
        if caps:
            found[f"{site.name}:{p}"] = caps
    return found
