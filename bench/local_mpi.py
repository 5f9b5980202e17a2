"""Running our MPI kernels on this machine, outside ReFrame: which tools are
missing, the environment ``mpirun`` needs here, and a CMake build of
``kernels/``.  The tests and the fault-injection bench share it, so both
launch the kernels exactly the same way.

``missing_tools()``
    names of the programs (mpicc, mpirun, cmake) not on PATH.
``mpi_env(base=None)``
    an environment for Open MPI's ``mpirun``: allowed to run as root, to
    start more ranks than there are cores, and not binding ranks to cores.
``build_kernels(build_dir, source=None)``
    configure, build and install ``kernels/`` with CMake under *build_dir*;
    returns the ``bin`` directory holding ``halo`` and ``barrier``.
"""

import os
import shutil
import subprocess
from pathlib import Path

from hpc_health import paths

_TOOLS = ("mpicc", "mpirun", "cmake")


def missing_tools():
    """Names of the tools needed to build and run the kernels that are not on PATH."""
    return [tool for tool in _TOOLS if shutil.which(tool) is None]


def mpi_env(base=None):
    """A copy of *base* (default: ``os.environ``) set up for Open MPI's mpirun."""
    env = dict(os.environ if base is None else base)
    env.update({
        # CI containers and the development machines run as root.
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        # Tests start 3 to 6 ranks on 2 cores.
        "OMPI_MCA_rmaps_base_oversubscribe": "1",
        # Concurrent launches would otherwise pin their ranks to the same
        # cores and wait for each other; a memory hog or another user may
        # also be pinned there.
        "OMPI_MCA_hwloc_base_binding_policy": "none",
    })
    return env


def build_kernels(build_dir, source=None):
    """Build and install the kernels (*source*, default the checkout's
    ``kernels/``) under *build_dir*; return the bin directory.

    The CMake output goes to ``<build_dir>/build.log`` (named in the error
    when a step fails).  Raises ``RuntimeError`` when a step fails.
    """
    source = Path(source) if source else paths.repo_root() / "kernels"
    build_dir = Path(build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    objdir = build_dir / "build"
    prefix = build_dir / "install"
    log = build_dir / "build.log"
    steps = [
        ["cmake", "-S", str(source), "-B", str(objdir),
         "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_INSTALL_PREFIX={prefix}"],
        ["cmake", "--build", str(objdir), "--parallel", "2"],
        ["cmake", "--install", str(objdir)],
    ]
    with open(log, "w") as out:
        for cmd in steps:
            out.write("$ " + " ".join(cmd) + "\n")
            out.flush()
            proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT)
            if proc.returncode != 0:
                raise RuntimeError(f"kernels build step failed ({' '.join(cmd)}); see {log}")
    return prefix / "bin"
