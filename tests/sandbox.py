"""A throw-away copy of the project's data folders for end-to-end tests.

Checks, kernels and our Spack repo are linked (read only); site folders and
reference files are copied so a test can break them without touching the
checkout, and the results store lives in the test's temporary directory.
"""

import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def make_root(tmp_path, sites=("local",), references=True):
    root = tmp_path / "root"
    root.mkdir(parents=True)
    for name in ("reframe_checks", "kernels", "spack_repo"):
        (root / name).symlink_to(REPO / name)
    (root / "site_configs").mkdir()
    for s in sites:
        shutil.copytree(REPO / "site_configs" / s, root / "site_configs" / s)
    (root / "reference").mkdir()
    if references:
        for s in sites:
            src = REPO / "reference" / f"{s}.yaml"
            if src.exists():
                shutil.copy(src, root / "reference" / src.name)
    return root


def add_site(root, name, **partition):
    """Site *name* in the sandbox *root*: a copy of `local` (settings and
    ReFrame system renamed), its default partition updated with
    *partition*; the folder's path."""
    import yaml
    d = root / "site_configs" / name
    shutil.copytree(root / "site_configs" / "local", d)
    doc = yaml.safe_load((d / "site.yaml").read_text())
    doc["site"] = name
    doc["partitions"]["default"].update(partition)
    (d / "site.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    config = d / "reframe_config.py"
    config.write_text(config.read_text().replace("'name': 'local'", f"'name': '{name}'"))
    return d


def without_spack(env, root):
    """*env* with this machine's Spack out of sight (its cache, $SPACK_ROOT,
    PATH): a test of something else must not build through Spack."""
    env = dict(env)
    env["HPC_HEALTH_CACHE"] = str(root.parent / "cache-without-spack")
    env.pop("SPACK_ROOT", None)
    env.pop("HPC_HEALTH_SPACK_KIT", None)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not os.path.exists(os.path.join(p, "spack")))
    return env


def store(root):
    """The results store of the sandbox *root*."""
    return root.parent / "store"


def environ(root, env=None, spack=False):
    """The environment commands on the sandbox *root* run in: its checkout
    and store; without Spack unless *spack*."""
    env = dict(env or os.environ, HPC_HEALTH_ROOT=str(root), HPC_HEALTH_STORE=str(store(root)))
    return env if spack else without_spack(env, root)


def hpc_health(root, *args, timeout=900, env=None, spack=False):
    """``python -m hpc_health ARGS`` on the sandbox *root*; without Spack
    unless *spack*."""
    env = environ(root, env, spack)
    return subprocess.run([sys.executable, "-m", "hpc_health", *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


def artifacts():
    """Where tests leave what a person should look at (CI keeps it):
    $HPC_HEALTH_TEST_ARTIFACTS, else test-artifacts/ in the checkout."""
    path = Path(os.environ.get("HPC_HEALTH_TEST_ARTIFACTS")
                or Path(__file__).resolve().parent.parent / "test-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def environment_held(env_dir):
    """Another process holding the Spack environment *env_dir* as a build
    does (hpc_health.spack.sources.env_lock); yields its pid."""
    with holding([sys.executable, "-c", (
            "import time; from hpc_health.spack import sources\n"
            f"with sources.env_lock({str(env_dir)!r}, 5):\n"
            "    print('held', flush=True); time.sleep(600)")]) as pid:
        yield pid


@contextmanager
def holding(cmd, env=None):
    """A process started by *cmd* that prints 'held' once it holds what it
    was started to hold, and is killed on leaving; its pid."""
    holder = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder.pid
    finally:
        holder.kill()
        holder.wait()


def barrier_root(tmp_path):
    """A root whose only check is the barrier kernel, slow enough (40
    samples of 200 000 barriers) to be stopped, killed or timed out mid-run."""
    import yaml
    root = make_root(tmp_path, references=False)
    (root / "reframe_checks").unlink()
    (root / "reframe_checks").mkdir()
    (root / "reframe_checks" / "barrier.py").symlink_to(REPO / "reframe_checks" / "barrier.py")
    path = root / "site_configs" / "local" / "site.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["partitions"]["default"]["kernels"] = {"samples": 40, "barrier_iters": 200000}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return root


def code_strings(path):
    """(line, text) of the string constants of a module but its docstrings."""
    import ast
    tree = ast.parse(Path(path).read_text(), str(path))
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docs]


def needs_mpicc():
    """Skip marker of the tests that build the PMPI interposer and run our kernels."""
    import pytest

    from bench import local_mpi
    return pytest.mark.skipif(bool(local_mpi.missing_tools()) or not shutil.which("mpicc"),
                              reason="needs mpirun and mpicc (bash ci/setup.sh installs them)")


def barrier_site(root, baseline_runs, samples, **settings):
    """The sandbox's local site as the MPI_Init tests want it: one rank (the
    barrier check's figure is then MPI_Init's time), *samples* launches a
    run, a baseline of *baseline_runs*, and any other site *settings*."""
    import yaml
    path = root / "site_configs" / "local" / "site.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["baseline_runs"] = baseline_runs
    doc["partitions"]["default"]["ranks_per_node"] = 1
    doc["partitions"]["default"]["kernels"] = {"samples": samples, "barrier_iters": 1000}
    doc.update(settings)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
