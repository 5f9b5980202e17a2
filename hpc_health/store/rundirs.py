"""The results store: one directory per run, holding ReFrame's JSON run
report (the data) and ``run.json`` (our provenance: site, software stack,
nodes, time).  Everything that reads results reads from here; nothing
re-runs a benchmark to answer a question about the past."""

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from hpc_health import __version__, paths, processes

#: The verdicts a run was judged with when it was stored.
VERDICTS_FILE = "verdicts.json"
#: Exit codes of runs whose report holds judged figures: healthy, unhealthy,
#: and stopped by a signal (what completed was judged).
JUDGED_EXITS = (0, 1, 130, 129, 143)


def runs_dir(site=None):
    root = paths.store_root() / "runs"
    return root / site if site else root


def new_run_dir(site):
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    base = runs_dir(site)
    base.mkdir(parents=True, exist_ok=True)
    for i in range(1000):
        d = base / (stamp if i == 0 else f"{stamp}-{i}")
        try:
            d.mkdir()
            return d
        except FileExistsError:
            continue
    raise RuntimeError(f"cannot create a run directory under {base}")


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
    records = {}
    for rec in Path(run_dir).glob("output/**/spack-build.json"):
        try:
            data = json.loads(rec.read_text())
        except (OSError, ValueError):
            continue
        records[str(rec.parent.relative_to(run_dir))] = {
            "hashes": data.get("hashes", {}),
            "prefixes": data.get("prefixes", {}),
            "env_dir": data.get("env_dir"),
            "specs": concrete_specs(rec.parent / "spack.lock"),
        }
    return records


_FLAGS = ("cflags", "cxxflags", "fflags", "cppflags", "ldflags", "ldlibs")


def concrete_specs(lock_path):
    """{name: {version, variants, hash, compiler}} of the root specs of a
    Spack lock: what a stack diff names when a build changed."""
    try:
        data = json.loads(Path(lock_path).read_text())
        specs = data.get("concrete_specs") or {}
        roots = [r["hash"] for r in data.get("roots") or []]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}
    out = {}
    for h in roots:
        spec = specs.get(h)
        if not isinstance(spec, dict) or "name" not in spec:
            continue
        params = spec.get("parameters") or {}
        variants = []
        for key, val in sorted(params.items()):
            if key in _FLAGS or key in ("patches", "dev_path"):
                continue
            if isinstance(val, bool):
                variants.append(f"{'+' if val else '~'}{key}")
            elif isinstance(val, list):
                variants.append(f"{key}={','.join(str(v) for v in val)}")
            else:
                variants.append(f"{key}={val}")
        flags = [f"{k}={' '.join(params[k])}" for k in _FLAGS if params.get(k)]
        out[spec["name"]] = {"version": str(spec.get("version", "")),
                             "variants": " ".join(variants + flags), "hash": h,
                             "compiler": _compiler(spec, specs)}
    return out


def _compiler(spec, specs):
    for dep in spec.get("dependencies") or []:
        virtuals = ((dep.get("parameters") or {}).get("virtuals") or [])
        if "c" in virtuals or "cxx" in virtuals:
            d = specs.get(dep.get("hash"), {})
            return f"{dep.get('name')}@{d.get('version', '?')}"
    old = spec.get("compiler")      # lockfiles before Spack 1.0
    if isinstance(old, dict):
        return f"{old.get('name')}@{old.get('version')}"
    return None


def write_json(path, data):
    """Write atomically: an interrupted run or a full disk must not leave a
    truncated file that later reads take for data."""
    tmp = Path(str(path) + ".tmp")
    with open(tmp, "w") as fp:
        json.dump(data, fp, indent=1, sort_keys=True)
        fp.flush()
        os.fsync(fp.fileno())
    os.replace(tmp, path)


def write_verdicts(run_dir, verdict_list):
    """The verdicts as judged tonight, kept with the run: what history,
    compare and exports show, whatever the references say later."""
    write_json(run_dir / VERDICTS_FILE, [
        {"check": v.measurement.check, "partition": v.measurement.partition_fullname,
         "environ": v.measurement.environ, "variable": v.measurement.variable,
         "verdict": v.verdict, "reason": v.reason} for v in verdict_list])


def index_run(run_dir):
    """Add a stored run to the store's index; a failure to index loses
    nothing (the index is rebuilt from the run directories when read)."""
    from hpc_health.store import index
    try:
        with index.open_index() as idx:
            idx.add(Path(run_dir))
    except Exception as err:   # noqa: BLE001 - the run is stored; the index can wait
        print(f"hpc-health: the run is stored, but the index was not updated ({err}); "
              "it is brought up to date when next read", file=sys.stderr)


@dataclass
class Scan:
    """The runs of the store that can be read, and those that cannot, with
    why: a damaged run is named wherever runs are read, never dropped
    silently."""
    runs: list = field(default_factory=list)      # [(run_dir, run.json)], oldest first
    damaged: list = field(default_factory=list)   # [(run id, reason)]


def alive(meta):
    """Is the run's own process still running (a run in progress)?"""
    pid = meta.get("pid")
    if not isinstance(pid, int) or meta.get("hostname") != socket.gethostname():
        return False
    return processes.alive(pid)


def scan(site=None):
    """Every stored run of *site* (or all sites), sorted by start."""
    found = Scan()
    base = runs_dir(site)
    if not base.is_dir():
        return found
    pattern = "*/run.json" if site else "*/*/run.json"
    for path in sorted(base.glob(pattern)):
        try:
            meta = json.loads(path.read_text())
            if not isinstance(meta, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as err:
            found.damaged.append((path.parent.name, f"run.json unreadable ({err})"))
            continue
        if "exit_code" not in meta:
            if not alive(meta):
                found.damaged.append((path.parent.name, "the run never finished (its process "
                                      "was killed, or the machine stopped): no verdicts"))
            continue
        if meta.get("exit_code") not in JUDGED_EXITS or \
                not (path.parent / "report.json").exists():
            continue    # a configuration error or a run stopped before any report
        found.runs.append((path.parent, meta))
    found.runs.sort(key=lambda r: r[1].get("started", ""))
    return found


def list_runs(site=None):
    """Stored runs with a report, oldest first: (run_dir, run.json data)."""
    return scan(site).runs
