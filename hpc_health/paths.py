"""Where the project and its data live."""

import os
from pathlib import Path


def repo_root():
    """The hpc-health checkout: site_configs/, reference/ and reframe_checks/
    are data read at run time, so the tool runs from a checkout."""
    env = os.environ.get("HPC_HEALTH_ROOT")
    if env:
        return Path(env).resolve()
    here = Path(__file__).resolve().parent.parent
    if (here / "site_configs").is_dir():
        return here
    return Path.cwd()


def store_root():
    """Root of the results store (runs, reports, provenance)."""
    env = os.environ.get("HPC_HEALTH_STORE")
    if env:
        return Path(env).expanduser().resolve()
    data_home = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    return Path(data_home) / "hpc-health"


def expand(path, base):
    """Expand ~ and $VARS; relative paths are relative to *base*."""
    p = Path(os.path.expandvars(os.path.expanduser(str(path))))
    if not p.is_absolute():
        p = Path(base) / p
    return p
