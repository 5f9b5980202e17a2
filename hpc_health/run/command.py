"""ReFrame's command line for a run: the executable, the check files, the
options a run passes, and the environment it runs in."""

import ast
import contextlib
import functools
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from hpc_health import paths, processes
from hpc_health.errors import ConfigError
from hpc_health.site.reframe_glue import REFRAME_LOG_VAR
from hpc_health.spack.environment import RUN_ID_VAR


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


def declared_figures():
    """{check class: [(figure name, unit, which way is better)]} as the
    check files declare them: the files imported (ReFrame with them), no
    check run.  A file that does not import is left out: ReFrame says why
    when it loads it."""
    import importlib.util
    import inspect

    from hpc_health.model.figures import Figure
    found = {}
    for path in check_files():
        name = f"hpc_health_declared_{Path(path).stem}"
        try:
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module      # ReFrame looks its checks' files up there
            spec.loader.exec_module(module)
        except Exception:   # noqa: BLE001 - any error of a check file is ReFrame's to report
            sys.modules.pop(name, None)
            continue
        for cls in vars(module).values():
            figures = getattr(cls, "figures", None) if inspect.isclass(cls) else None
            if isinstance(figures, (list, tuple)) and figures and \
                    all(isinstance(f, Figure) for f in figures):
                found[cls.__name__] = [(f.name, f.unit, f.better) for f in figures]
    return found


#: ReFrame tag of the tuning sweeps (docs/tuning.md): which setting is right
#: on this machine is asked after an upgrade or weekly, not every night.
TUNING_TAG = "tuning"
#: ReFrame options that choose checks by name or tag.
_SELECTING = ("-n", "--name", "-t", "--tag")


def left_out_tags(tags=(), extra=(), tuning=False):
    """ReFrame tags a run leaves out: the tuning sweeps, unless asked for
    (*tuning*), or selected by tag (*tags*) or by name or tag among the
    ReFrame options *extra*."""
    # "-n", "-nX", "--name", "--name=X" (likewise -t, --tag).
    selecting = any(a.split("=")[0] in _SELECTING or a[:2] in ("-n", "-t") for a in extra)
    return () if tuning or TUNING_TAG in tags or selecting else (TUNING_TAG,)


def reframe_command(site, partition=None, tags=(), extra=(), list_only=False,
                    prefix=None, report=None, per_node=False, rounds=1, extras=None,
                    dry_run=False, left_out=()):
    system = f"{site.name}:{partition}" if partition else site.name
    cmd = [reframe_executable(), "-C", str(site.reframe_config), "--system", system]
    for c in check_files():
        cmd += ["-c", c]
    for t in tags:
        cmd += ["-t", t]
    for t in left_out:
        cmd += ["-T", t]        # ReFrame's --exclude-tag
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


def reframe_environ(run_id=None, log=None):
    """ReFrame reads the references next to the checks unless told; tell it,
    so a run always gates on this checkout's reference files.  The run id
    reaches the build jobs (a Spack failure is not retried within a run).
    ReFrame's debug log goes to *log* (the run directory), else nowhere."""
    env = dict(os.environ)
    env["RFM_REFERENCE_PREFIX"] = str(paths.repo_root() / "reference")
    env[REFRAME_LOG_VAR] = str(log) if log else os.devnull
    # ReFrame's configuration starts processes.orphan_guard on seeing it.
    env[processes.PARENT_VAR] = str(os.getpid())
    if run_id:
        env[RUN_ID_VAR] = run_id
    return env


def start_reframe(cmd, env):
    """ReFrame started in its own process group: a stop reaches every
    benchmark it started, and a Ctrl-C at the terminal reaches only us, who
    pass it on.  Its output is read as text with errors="replace": under an
    ASCII locale a byte ReFrame or a benchmark wrote in UTF-8 must not end
    the reading of it."""
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace", bufsize=1, env=env, start_new_session=True,
                            preexec_fn=functools.partial(processes.child_setup, os.getpid()))


def rounds_for(site, per_node, rounds=None):
    """Rounds asked for, else the site's setting: per_node_rounds for
    --per-node runs, rounds for the others (reference captures included)."""
    if rounds is not None:
        return max(1, int(rounds))
    return int(site.settings.get("per_node_rounds" if per_node else "rounds") or 1)


#: ReFrame's first lines, written before it reads the site's configuration.
_EARLY = "debug: reframe: Loading user configuration"


def gather_early_logs(since, config_path, into=None):
    """Move into *into* (or remove) the debug logs ReFrame left in $TMPDIR.

    ReFrame configures its logging twice: from its builtin configuration
    first, whose debug log is an unnamed file handler (``mkstemp``,
    ``rfm-*.log`` in $TMPDIR, never removed), then from the site's (ours
    names a file in the run directory).  Every ReFrame process leaves the
    first behind: a few hundred bytes, thousands after a season of nights.
    Ours are those begun since *since* (epoch seconds) that name this
    site's configuration file; they are kept with the run when there is one
    (they hold ReFrame's complaint when it could not load the configuration).
    """
    marker = f"Loading configuration file: '{config_path}'"
    for path in Path(tempfile.gettempdir()).glob("rfm-*.log"):
        try:
            st = path.stat()
            if st.st_mtime < since - 1 or st.st_size > (1 << 20):
                continue
            text = path.read_text(errors="replace")
        except OSError:
            continue
        if _EARLY not in text.split("\n", 1)[0] or marker not in text:
            continue
        if into is not None:
            # A store that is full or read-only by now loses these few lines.
            with contextlib.suppress(OSError), open(into, "a") as fp:
                fp.write(text)
        with contextlib.suppress(OSError):      # another run took it first
            path.unlink()
