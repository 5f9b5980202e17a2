"""Sites: one folder under site_configs/ holds everything site-specific.

``site.yaml`` is validated before anything runs so that a mistake is reported
with its file, key path and line instead of surfacing as a ReFrame traceback
in the middle of the night.
"""

from dataclasses import dataclass, field
from pathlib import Path

from hpc_health import paths, yamlio
from hpc_health.errors import ConfigError

_PATH = {"type": ["string", "null"]}
_POSINT = {"type": ["integer", "null"], "minimum": 1}

SITE_SCHEMA = {
    "type": "object",
    "required": ["site", "reframe_config", "partitions"],
    "additionalProperties": False,
    "properties": {
        "site": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"},
        "description": {"type": "string"},
        "reframe_config": {"type": "string"},
        "reframe_options": {"type": "array", "items": {"type": "string"}},
        "spack": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "environment": {"type": "string"},
                "install_tree": _PATH,
                "env_dir": _PATH,
                "builtin_repo": _PATH,
                "bootstrap_mirror": _PATH,
                "source_mirror": _PATH,
                "spack_root": _PATH,
            },
        },
        "partitions": {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "nodes": _POSINT,
                    "ranks_per_node": _POSINT,
                    "scratch": _PATH,
                    "kernels": {"type": "object"},
                    "stream": {"type": "object"},
                    "osu": {"type": "object"},
                    "ior": {"type": "object"},
                    "mdtest": {"type": "object"},
                },
            },
        },
    },
}


@dataclass
class Site:
    name: str
    dir: Path
    settings: dict
    reframe_config: Path
    spack_env: Path = None
    partitions: dict = field(default_factory=dict)

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


def load(name_or_path):
    """Load and validate a site; raises ConfigError naming file and line."""
    d = site_dir(name_or_path)
    doc = yamlio.load(d / "site.yaml")
    yamlio.validate(doc, SITE_SCHEMA)
    s = doc.data
    if s["site"] != d.name:
        raise doc.error(["site"], f"is {s['site']!r} but the folder is {d.name!r}; "
                        "they must match (the ReFrame system is named after the site)")
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
    return Site(name=s["site"], dir=d, settings=s, reframe_config=rcfg,
                spack_env=spack_env, partitions=s["partitions"])


def partition_extras(site_dir_path, partition):
    """Partition ``extras`` for a site's ReFrame configuration.

    Checks read every site setting from here, so check code never names a
    site, a partition or a path.
    """
    site = load(site_dir_path)
    if partition not in site.partitions:
        raise ConfigError(site.settings_file,
                          f"partition {partition!r} of the ReFrame configuration is not "
                          "listed under 'partitions'", keypath="partitions")
    settings = dict(site.partitions[partition] or {})
    if settings.get("scratch"):
        settings["scratch"] = str(paths.expand(settings["scratch"], site.dir))
    spack = {k: site.spack_setting(k) for k in
             ("install_tree", "env_dir", "builtin_repo", "bootstrap_mirror",
              "source_mirror", "spack_root")}
    spack["environment"] = str(site.spack_env) if site.spack_env else None
    return {"hpc_health": {
        "site": site.name,
        "site_dir": str(site.dir),
        "repo_root": str(paths.repo_root()),
        "spack": spack,
        **settings,
    }}
