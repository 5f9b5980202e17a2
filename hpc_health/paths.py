"""Where the project and its data live."""

import errno
import os
import re
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


def command():
    """How the user can type ``hpc-health`` here: the name when it is on
    PATH (an activated or installed environment), else the path of the
    script that is running (``ci/health.sh`` runs ``.venv/bin/hpc-health``,
    which no shell finds by name)."""
    import shutil
    import sys
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    on_path = shutil.which("hpc-health")
    if on_path and (not script.endswith("hpc-health")
                    or os.path.realpath(on_path) == os.path.realpath(script)):
        return "hpc-health"
    if script.endswith("hpc-health") and os.access(script, os.X_OK):
        return script
    return f"{sys.executable} -m hpc_health"


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


# Characters a path may hold: ReFrame writes stage, output and prefix paths
# into job scripts unquoted (and expands $(...) in some), so a space or a
# shell metacharacter in one is a broken script or an executed command.
_SAFE = re.compile(r"[A-Za-z0-9_./+,:=@%~-]*")
#: Directories the suite must never be pointed at: it creates and (in its
#: own scratch subdirectories) removes files there.
SYSTEM_DIRS = ("/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/root",
               "/sbin", "/sys", "/usr", "/var", "/home", "/tmp", "/opt")


def check_path(path, what, where):
    """Refuse a path the suite cannot use safely; ConfigError names *where*
    (file or variable) and *what* (key)."""
    from hpc_health.errors import ConfigError
    text = str(path)
    if not _SAFE.fullmatch(text):
        chars = "".join(dict.fromkeys(c for c in text if not _SAFE.fullmatch(c)))
        raise ConfigError(where, f"{text!r} holds {chars!r}: paths may hold letters, digits "
                          "and . _ / + , : = @ % ~ - only (ReFrame writes them into job "
                          "scripts unquoted); choose another directory", keypath=what)
    resolved = os.path.realpath(text)
    if resolved in SYSTEM_DIRS:
        raise ConfigError(where, f"{text!r} is the system directory {resolved}: give the "
                          "suite a directory of its own below it", keypath=what)


def cache_root():
    """Where Spack is bootstrapped and built: $HPC_HEALTH_CACHE, else
    ~/.cache/hpc-health."""
    return Path(os.environ.get("HPC_HEALTH_CACHE") or
                Path(os.path.expanduser("~/.cache")) / "hpc-health")


def _setting_of(path) -> str:
    """The variable that moves *path* elsewhere."""
    try:
        p = Path(os.path.abspath(path))
    except (TypeError, ValueError):
        return "HPC_HEALTH_STORE or HPC_HEALTH_CACHE"
    for var, root in (("HPC_HEALTH_CACHE", cache_root()), ("HPC_HEALTH_STORE", store_root())):
        if p == Path(root) or Path(root) in p.parents:
            return var
    return "HPC_HEALTH_STORE or HPC_HEALTH_CACHE"


def os_hint(err: OSError) -> str:
    """What to do about a failed file operation, by what failed."""
    var = _setting_of(err.filename) if err.filename else "HPC_HEALTH_STORE"
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"free space (or quota), or point {var} elsewhere"
    if err.errno == errno.ENAMETOOLONG:
        return (f"a name in this path is too long (255 bytes a name, 4096 a path): point {var} "
                "at a shorter directory")
    if err.errno == errno.E2BIG:
        return "a command line grew too long: a shorter --note or fewer options"
    if err.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return f"choose a directory you may write ({var})"
    return f"check the directory, or point {var} elsewhere"
