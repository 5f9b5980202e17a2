"""What is checked before ReFrame starts: the site, its reference file, the
paths a run writes into, free space, run tags and notes.  A mistake is a
ConfigError naming file, key and line."""

import re
import shutil
from pathlib import Path

from hpc_health import paths
from hpc_health.errors import ConfigError
from hpc_health.run.command import check_classes, declared_figures
from hpc_health.site import sites, yamlio
from hpc_health.store import references


def validate(site_name, partition=None, figures=False):
    """Everything that can be checked before ReFrame starts; ConfigError
    names file, key and line.  With *figures* (``validate``, ``run``) the
    references are checked against the figures the checks declare: their
    units, and bounds that would let a figure pass whatever it measures."""
    site = sites.load(site_name)
    if partition and partition not in site.partitions:
        raise ConfigError(site.settings_file, f"no partition {partition!r} "
                          f"(known: {', '.join(site.partitions)})", keypath="partitions")
    check_site_paths(site)
    known = check_classes()
    _check_names_in_settings(site, known)
    refs = None
    if site.reference_file.exists():
        refs = references.load(site.reference_file, declared_figures() if figures else None)
        unknown = sorted(set(refs.tests) - known)
        if unknown:
            raise ConfigError(refs.path, f"references for {', '.join(unknown)}, which no check "
                              f"in {paths.repo_root() / 'reframe_checks'} defines (known: "
                              f"{', '.join(sorted(known))}): a renamed check?",
                              line=refs.line_of(unknown[0]), keypath=unknown[0])
    return site, refs


def _unknown_checks(settings, known):
    """The keys of the site settings that name a check by name
    (``budget_weights``, ``tolerance``: "Check" or "Check/variable") and
    name none of *known*, as (setting, key)."""
    return [(setting, key) for setting in ("budget_weights", "tolerance")
            for key in (settings.get(setting) or {})
            if str(key).split("/", 1)[0] not in known]


def _check_names_in_settings(site, known):
    """A typo in a check's name would weight or loosen nothing, silently."""
    unknown = _unknown_checks(site.settings, known)
    if unknown:
        setting, key = unknown[0]
        doc = yamlio.load(site.settings_file)
        raise ConfigError(site.settings_file, f"names no check in "
                          f"{paths.repo_root() / 'reframe_checks'} (known: "
                          f"{', '.join(sorted(known))}): a typo?",
                          line=doc.line_of([setting, key]), keypath=f"{setting}.{key}")


#: Free space a run needs in the store: stage directories, builds, outputs
#: (a full local run with its CMake build takes ~20 MiB; Spack builds live
#: in the install tree, elsewhere).
MIN_FREE_MIB = 64


def check_free_space(path, need_mib=MIN_FREE_MIB):
    """Refuse to start a run that would fill the file system mid-way."""
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    usage = shutil.disk_usage(probe)
    if usage.total == 0:
        # /proc, /sys, a cgroup tree: "0.0 MiB free" would send someone to
        # free space on a file system that holds no files at all.
        kind = _fs_type(probe)
        raise ConfigError(path, f"{probe} is on {kind or 'a file system'} of size 0, a kernel's "
                          "view and not a disk: it cannot hold a run; point HPC_HEALTH_STORE "
                          "at a directory on a disk")
    free = usage.free / 2**20
    if free < need_mib:
        raise ConfigError(path, f"only {free:.1f} MiB free in {probe}; a run needs "
                          f"{need_mib} MiB (builds, stage directories, outputs): free space "
                          "or point HPC_HEALTH_STORE elsewhere")


def _fs_type(path):
    """'proc', 'sysfs', ... of the mount holding *path* (/proc/self/mounts),
    or ''."""
    best, kind = "", ""
    try:
        with open("/proc/self/mounts") as fp:
            for line in fp:
                fields = line.split()
                if len(fields) < 3:
                    continue
                point = fields[1].replace("\\040", " ")
                inside = str(path) == point or str(path).startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):
                    best, kind = point, fields[2]
    except OSError:
        return ""
    return f"a {kind} file system ({best})" if kind else ""


def check_site_paths(site):
    """Every directory a run writes into or builds from, before anything
    starts: the store, this checkout, the partitions' scratch and the Spack
    paths."""
    paths.check_path(paths.store_root(), "HPC_HEALTH_STORE", "the results store")
    paths.check_path(paths.repo_root(), "HPC_HEALTH_ROOT", "the hpc-health checkout")
    for name, part in site.partitions.items():
        if (part or {}).get("scratch"):
            paths.check_path(paths.expand(part["scratch"], site.dir),
                             f"partitions.{name}.scratch", site.settings_file)
    for key in ("install_tree", "env_dir", "builtin_repo", "source_mirror", "spack_root"):
        if site.spack_setting(key):
            paths.check_path(site.spack_setting(key), f"spack.{key}", site.settings_file)


#: A run tag: what ``tag:NAME`` run sets and ReFrame's session extras carry.
_TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")
#: A note goes into ReFrame's command line (--session-extras) and run.json.
MAX_NOTE = 1000


def check_run_tags(tags):
    for t in tags:
        # fullmatch: "$" would let a trailing newline through, and the run
        # could never be found by its tag.
        if not _TAG.fullmatch(t):
            raise ConfigError("--tag", f"{t!r} is not a run tag: letters, digits and _.+- "
                              "(up to 64, starting with a letter or digit)")
    return list(dict.fromkeys(tags))


def check_note(note):
    note = (note or "").strip()
    if any(ord(c) < 32 or ord(c) == 127 for c in note):
        raise ConfigError("--note", "a note is one line of text (no control characters)")
    if len(note) > MAX_NOTE:
        raise ConfigError("--note", f"a note is one line of up to {MAX_NOTE} characters "
                          f"(this one has {len(note)}): put longer text in a file beside the run")
    return note
