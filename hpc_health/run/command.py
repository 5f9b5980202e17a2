"""ReFrame's command line for a run: the executable, the check files, the
options a run passes, and the environment it runs in."""

import ast
import glob
import os
import shutil
import sys

from hpc_health import paths
from hpc_health.errors import ConfigError
from hpc_health.jobside.spackenv import RUN_ID_VAR


def reframe_executable():
    beside = os.path.join(os.path.dirname(sys.executable), "reframe")
    if os.path.isfile(beside):
        return beside
    found = shutil.which("reframe")
    if not found:
        raise ConfigError("reframe", "the reframe command is not installed "
                          "(pip install -e . installs the pinned reframe-hpc)")
    return found


def check_files():
    return sorted(glob.glob(str(paths.repo_root() / "reframe_checks" / "*.py")))



def check_classes():
    """Names of the test classes the check files define (read, not run)."""
    found = set()
    for path in check_files():
        try:
            tree = ast.parse(open(path).read(), path)
        except (OSError, SyntaxError):
            continue
        found |= {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    return found


def reframe_command(site, partition=None, tags=(), extra=(), list_only=False,
                    prefix=None, report=None, per_node=False, rounds=1, extras=None,
                    dry_run=False):
    system = f"{site.name}:{partition}" if partition else site.name
    cmd = [reframe_executable(), "-C", str(site.reframe_config), "--system", system]
    for c in check_files():
        cmd += ["-c", c]
    for t in tags:
        cmd += ["-t", t]
    if per_node:
        # Every node of the partition runs the single-node checks; the
        # checks confine themselves to one node when per_node is set.
        cmd += ["--distribute=all", "-t", "single_node", "-S", "per_node=1"]
    if rounds > 1:
        # The whole session again, node after node each time: a disturbance
        # that passes (another job, an episode on shared hardware) hits one
        # round of one node, and the median over rounds outvotes it.
        cmd += [f"--reruns={rounds - 1}"]
    if list_only:
        cmd += ["-l"]
    else:
        cmd += ["--dry-run" if dry_run else "-r", "--prefix", str(prefix),
                "--report-file", str(report)]
        if extras:
            # In ReFrame's own results database too, so its stored sessions
            # can be found by the run id and tags hpc-health knows them by.
            cmd += ["--session-extras", ",".join(f"{k}={v}" for k, v in extras.items())]
    cmd += list(site.settings.get("reframe_options") or [])
    cmd += list(extra)
    return cmd


def reframe_environ(run_id=None):
    """ReFrame reads the references next to the checks unless told; tell it,
    so a run always gates on this checkout's reference files.  The run id
    reaches the build jobs (a Spack failure is not retried within a run)."""
    env = dict(os.environ)
    env["RFM_REFERENCE_PREFIX"] = str(paths.repo_root() / "reference")
    if run_id:
        env[RUN_ID_VAR] = run_id
    return env


def rounds_for(site, per_node, rounds=None):
    """Rounds asked for, else the site's setting: per_node_rounds for
    --per-node runs, rounds for the others (reference captures included)."""
    if rounds is not None:
        return max(1, int(rounds))
    return int(site.settings.get("per_node_rounds" if per_node else "rounds") or 1)
