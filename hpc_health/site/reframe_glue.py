"""What a site's ReFrame configuration calls: the partitions' ``extras``
(every setting a check reads), ReFrame's results storage and its log."""

import copy
import os

from hpc_health import paths, processes
from hpc_health.errors import ConfigError
from hpc_health.site import hardware
from hpc_health.site.sites import load

# Every site's ReFrame configuration imports this module, in ReFrame's own
# process: where hpc-health started that ReFrame, ReFrame must not outlive it.
processes.orphan_guard()


def _bootstrap_defaults(spack):
    """Where the checks will use a Spack bootstrapped from a kit, what the
    site leaves unset comes from the kit: the builtin repository, the source
    mirror, the trees built from local sources."""
    from hpc_health.spack import kit as spack_kit
    rec = spack_kit.record()
    if not rec or spack_kit.find_spack(spack.get("spack_root")) != rec["spack"]:
        return
    for key in ("builtin_repo", "source_mirror"):
        spack[key] = spack.get(key) or rec.get(key)
    spack["develop"] = {**(rec.get("develop") or {}), **spack["develop"]}


def results_db(site):
    """Where ReFrame keeps this site's sessions: the site setting, else
    ``reframe-results.db`` in the store (next to the runs it judged)."""
    given = site.settings.get("reframe_results_db")
    if given:
        return paths.expand(given, site.dir)
    return paths.store_root() / "reframe-results.db"


def reframe_storage(site_dir_path):
    """ReFrame's ``storage`` configuration for a site's ReFrame config:
    results storage on, in :func:`results_db`."""
    site = load(site_dir_path)
    return [{"enable": True, "backend": "sqlite",
             "sqlite_db_file": str(results_db(site))}]


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
    settings["hardware"] = hardware.of_partition(settings.get("hardware"), settings["nodes"])
    if settings.get("scratch"):
        settings["scratch"] = str(paths.expand(settings["scratch"], site.dir))
    spack = {k: site.spack_setting(k) for k in
             ("install_tree", "env_dir", "builtin_repo", "bootstrap_mirror",
              "source_mirror", "spack_root")}
    spack["environment"] = str(site.spack_env) if site.spack_env else None
    # Develop paths stay as written: spackenv resolves relative ones against
    # the site folder on the machine that builds.
    spack["develop"] = dict((site.settings.get("spack") or {}).get("develop") or {})
    _bootstrap_defaults(spack)
    return {"hpc_health": {
        "site": site.name,
        "site_dir": str(site.dir),
        "repo_root": str(paths.repo_root()),
        "spack": spack,
        **settings,
    }}


#: Where ``hpc-health run`` wants ReFrame's debug log (in the run directory).
REFRAME_LOG_VAR = "HPC_HEALTH_REFRAME_LOG"
#: ``NAME=node1,node2``: the maintenance reservation under which a per-node
#: run tests nodes hpc-health drained (``run --resume-healthy``); the
#: copies pinned to those nodes ask for it (checklib's HealthCheck).
RESERVATION_VAR = "HPC_HEALTH_RESERVATION"


def reframe_logging(builtin_entry):
    """ReFrame's logging as it comes (*builtin_entry*: its own default
    ``logging`` entry), but the debug log at a named path: unnamed, ReFrame
    opens it with mkstemp in /tmp and leaves it there after every run that
    fails or is stopped (thousands of ``/tmp/rfm-*.log`` after a season of
    nights).  ``hpc-health run`` names a file in the run directory; plain
    ``reframe`` writes ``reframe.log`` in its working directory."""
    entry = copy.deepcopy(builtin_entry)
    name = os.environ.get(REFRAME_LOG_VAR) or "reframe.log"
    entry["handlers"] = [dict(h, name=name) if h.get("type") == "file" and not h.get("name")
                         else h for h in entry.get("handlers", [])]
    return [entry]

