"""What the build fixtures kept, read back for a run's provenance: each
build's record (root hashes, install prefixes, environment) and the root
specs of its ``spack.lock`` (version, variants, flags, compiler), which a
stack diff names when a build changed."""

import json
from pathlib import Path

from hpc_health.spack.fixtures import RECORD


def collect(run_dir):
    """Spack locks and concrete hashes that the build fixtures of the run in
    *run_dir* kept in its output folder, by the folder they are in."""
    records = {}
    for rec in Path(run_dir).glob(f"output/**/{RECORD}"):
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
