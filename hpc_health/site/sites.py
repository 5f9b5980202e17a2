"""Sites: one folder under site_configs/ holds everything site-specific.

``site.yaml`` is validated before anything runs so that a mistake is reported
with its file, key path and line instead of surfacing as a ReFrame traceback
in the middle of the night.
"""

import ast
import os
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path

from hpc_health import paths
from hpc_health.errors import ConfigError
from hpc_health.parsers import registry
from hpc_health.site import yamlio
from hpc_health.site.schema import SITE_SCHEMA, with_defaults


@dataclass
class Site:
    name: str
    dir: Path
    settings: dict
    reframe_config: Path
    spack_env: Path = None
    partitions: dict = field(default_factory=dict)
    chosen_because: str = "--site"

    @property
    def settings_file(self):
        return self.dir / "site.yaml"

    @property
    def reference_file(self):
        return paths.repo_root() / "reference" / f"{self.name}.yaml"

    def spack_setting(self, key):
        value = (self.settings.get("spack") or {}).get(key)
        return None if value is None else str(paths.expand(value, self.dir))


def sites_dir():
    return paths.repo_root() / "site_configs"


def available():
    d = sites_dir()
    return sorted(p.name for p in d.iterdir() if (p / "site.yaml").is_file()) if d.is_dir() else []


def site_dir(name_or_path):
    p = Path(name_or_path)
    if p.is_dir() and (p / "site.yaml").is_file():
        return p.resolve()
    d = sites_dir() / str(name_or_path)
    if not (d / "site.yaml").is_file():
        known = ", ".join(available()) or "none"
        raise ConfigError(d / "site.yaml",
                          f"no such site {name_or_path!r} (known sites: {known})")
    return d.resolve()


def hostname_patterns(site_name):
    """The ``hostnames`` patterns of a site's ReFrame configuration, read
    without running it (it may import ReFrame or probe the machine)."""
    path = sites_dir() / site_name / "reframe_config.py"
    try:
        tree = ast.parse(path.read_text(), str(path))
    except (OSError, SyntaxError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if (isinstance(key, ast.Constant) and key.value == "hostnames"
                        and isinstance(value, (ast.List, ast.Tuple))):
                    found += [e.value for e in value.elts
                              if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return found


def _matches_host(patterns, host):
    """ReFrame's rule (re.match), ignoring catch-all patterns: a site that
    matches any host (``local``) is never chosen for a host by its name."""
    probe = "hpc-health-no-such-host-0"
    return any(re.match(p, host) and not re.match(p, probe) for p in patterns)


def choose(explicit=None, host=None):
    """(site name, why) for a command without a usable ``--site``:
    ``$HPC_HEALTH_SITE``, else the one site whose ReFrame hostnames match
    this host, else ``local``.  A login node of a real site must not run the
    suite as ``local`` (mpirun on the login node) by accident."""
    if explicit:
        return explicit, "--site"
    env = os.environ.get("HPC_HEALTH_SITE")
    if env:
        return env, "$HPC_HEALTH_SITE"
    host = host or socket.gethostname()
    matches = [s for s in available() if _matches_host(hostname_patterns(s), host)]
    if len(matches) > 1:
        raise ConfigError(sites_dir(), f"host {host} matches the ReFrame hostnames of "
                          f"sites {', '.join(matches)}: choose one with --site or "
                          "$HPC_HEALTH_SITE")
    if matches:
        return matches[0], f"chosen because its ReFrame hostnames match {host}"
    return "local", f"chosen because no site's ReFrame hostnames match {host}"


def load(name_or_path):
    """Load and validate a site; raises ConfigError naming file and line."""
    d = site_dir(name_or_path)
    doc = yamlio.load(d / "site.yaml")
    yamlio.validate(doc, SITE_SCHEMA)
    s = doc.data
    if s["site"] != d.name:
        raise doc.error(["site"], f"is {s['site']!r} but the folder is {d.name!r}; "
                        "they must match (the ReFrame system is named after the site)")
    _check_benchmark_settings(doc)
    rcfg = d / s["reframe_config"]
    if not rcfg.is_file():
        raise doc.error(["reframe_config"], f"file {rcfg} does not exist")
    spack_env = None
    spack = s.get("spack") or {}
    if spack.get("environment"):
        spack_env = d / spack["environment"]
        if not spack_env.is_file():
            raise doc.error(["spack", "environment"], f"file {spack_env} does not exist")
        env_doc = yamlio.load(spack_env)
        if not isinstance(env_doc.data, dict) or "spack" not in env_doc.data:
            raise env_doc.error([], "a Spack environment file needs a top-level 'spack:' key")
    s = with_defaults(SITE_SCHEMA, s)
    return Site(name=s["site"], dir=d, settings=s, reframe_config=rcfg,
                spack_env=spack_env, partitions=s["partitions"])


def _check_benchmark_settings(doc):
    """What the schema cannot say about the benchmark settings: each
    benchmark's own check (:mod:`hpc_health.parsers.registry`)."""
    for pname, part in (doc.data.get("partitions") or {}).items():
        for path, why in registry.check_settings(part or {}):
            raise doc.error(["partitions", pname, *path], why)
