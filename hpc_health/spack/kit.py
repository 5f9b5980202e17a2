"""Spack for the benchmarks, where the machine has none: bootstrapped from an
offline kit into a cache outside the checkout.

A *kit* is a directory an air-gapped centre can carry in (``hpc-health spack
kit DIR`` makes one on a connected host):

- ``spack-<version>-<commit>.tar.gz``: Spack itself, unpacking to one folder;
- ``spack-packages-<commit>.tar.gz``: the builtin package repository
  (``repos/spack_repo/builtin`` inside);
- ``mirror/``: a source mirror in the layout ``spack mirror create`` writes
  (``_source-cache/archive/<sha256[:2]>/<sha256>.tar.gz``);
- ``<name>-<version>[-<commit>].tar.gz``: source trees of the packages
  built from a local tree, as each benchmark declares them beside its
  parser (``Benchmark(kit=...)``: STREAM, whose Spack recipe has only a git
  URL, and OSU);
- ``SHA256SUMS``: the checksum of every file, verified before anything is
  unpacked.

The bootstrap unpacks Spack and its packages into
``$HPC_HEALTH_CACHE/spack/<spack>+<packages>/`` (default
``~/.cache/hpc-health``), a fresh copy of each develop tree (builds write
into them; OSU must come from its archive, whose file times keep automake
from regenerating ``aclocal.m4`` against Debian's libtool), installs clingo
from PyPI into the Python that runs Spack (``SPACK_PYTHON``), turns
bootstrapping off, names the builtin repository and registers this
machine's build tools as externals (zlib among them: otherwise the
concretizer plans zlib-ng, which no offline mirror has) in Spack's own site
scope, and writes ``bootstrap.json``, which the checks read.

This module is part of the core: it imports no ReFrame.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from hpc_health import paths
from hpc_health.errors import ConfigError
from hpc_health.parsers import registry
from hpc_health.spack import commands, kit_sources, lock

RECORD = "bootstrap.json"
#: Build tools registered as externals: the ones the local site's spec sets
#: are concretized with (their spack.lock files: IOR and Darshan build with
#: autotools and zlib, our kernels with CMake, all with make).  zlib must be
#: among them, else the concretizer plans zlib-ng, which no offline mirror
#: has.  Detecting more costs seconds each (python: six, through pyenv's shims).
EXTERNALS = ("autoconf", "automake", "libtool", "m4", "gmake", "cmake", "zlib")
#: ``NAME[-VERSION][-COMMIT].tar.gz``: Spack's and its packages' name their
#: commit; a release tarball (OSU's) has none.
_ARCHIVE = re.compile(r"^(?P<name>spack-packages|.+?)(-(?P<version>\d[\w.]*?))??"
                      r"(-(?P<commit>[0-9a-f]{7,40}))?\.tar\.gz$")
CLINGO = "clingo>=5.6,<5.9"


def develop_packages():
    """{kit archive name: the Spack package built from it as a develop
    tree}, as each benchmark declares its archive (``Benchmark(kit=...)``)."""
    found = {}
    for source in registry.kit_sources():
        m = _ARCHIVE.match(source.file)
        if source.develop and m:
            found[m.group("name")] = source.develop
    return found


def cache_root():
    return paths.cache_root()


def kit_from(site=None, explicit=None):
    """The kit to bootstrap from: *explicit*, ``$HPC_HEALTH_SPACK_KIT``, or the
    site's ``spack.kit``; None when none is given."""
    given = explicit or os.environ.get("HPC_HEALTH_SPACK_KIT")
    if not given and site is not None:
        given = site.spack_setting("kit")
    return Path(given).expanduser().resolve() if given else None


class Kit:
    """The files of a kit directory, checked."""

    def __init__(self, path):
        self.path = Path(path)
        if not self.path.is_dir():
            raise ConfigError(self.path, "no such kit directory (HPC_HEALTH_SPACK_KIT or "
                              "spack.kit names it)")
        archives = {}
        for f in sorted(self.path.glob("*.tar.gz")):
            m = _ARCHIVE.match(f.name)
            if m:
                archives.setdefault(m["name"], []).append((f, m["version"], m["commit"]))
        spack = [a for a in archives.get("spack", []) if a[2]]
        packages = [a for a in archives.get("spack-packages", []) if a[2]]
        if not spack or not packages:
            raise ConfigError(self.path, "a kit holds spack-<version>-<commit>.tar.gz and "
                              "spack-packages-<commit>.tar.gz; found "
                              f"{', '.join(f.name for f in self.path.iterdir()) or 'nothing'}")
        self.spack = spack[-1]
        self.packages = packages[-1]
        develop = develop_packages()
        self.sources = {develop[name]: found[-1] for name, found in archives.items()
                        if name in develop}
        self.mirror = self.path / "mirror" if (self.path / "mirror").is_dir() else None

    @property
    def key(self):
        """The cache folder's name: which Spack and which packages."""
        return f"spack-{self.spack[1]}-{self.spack[2][:10]}+packages-{self.packages[2][:10]}"

    def say_origins(self, say=print):
        """Where each archive used came from, and whether it is an official
        one: an unofficial one is used only because this kit holds it."""
        fetched = kit_sources.recorded(self.path)
        for archive, _, _ in [self.spack, self.packages, *self.sources.values()]:
            say(f"spack setup: {kit_sources.origin(archive, fetched.get(archive.name))}")

    def verify(self, say=print):
        """Check every file SHA256SUMS lists; ConfigError naming the first
        that is missing or differs."""
        sums = self.path / "SHA256SUMS"
        if not sums.is_file():
            raise ConfigError(sums, "the kit has no SHA256SUMS: it cannot be verified")
        lines = [line.split(None, 1) for line in sums.read_text().splitlines() if line.strip()]
        for n, (digest, name) in enumerate(lines, 1):
            target = self.path / name.strip().lstrip("*")
            if not target.is_file():
                raise ConfigError(sums, f"lists {name.strip()}, which the kit does not have",
                                  line=n)
            if kit_sources.file_sha256(target) != digest.lower():
                raise ConfigError(sums, f"{name.strip()} does not match its checksum: a "
                                  "damaged or altered kit", line=n)
        say(f"spack setup: kit {self.path}: {len(lines)} files verified")


def _unpack(archive, dest):
    """Unpack *archive* (one top folder) as *dest*; nothing half-unpacked is
    left under *dest*'s name."""
    dest = Path(dest)
    tmp = dest.with_name(dest.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)   # ours: a previous unpack that was interrupted
    tmp.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        tar.extractall(tmp, filter="tar") if hasattr(tarfile, "data_filter") else \
            tar.extractall(tmp)
    (top,) = list(tmp.iterdir())
    top.rename(dest)
    tmp.rmdir()
    return dest


def record(cache=None):
    """The bootstrap record of the pinned Spack in the cache, or None."""
    root = Path(cache or cache_root()) / "spack"
    found = sorted(root.glob(f"*/{RECORD}"), key=lambda p: p.stat().st_mtime)
    for path in reversed(found):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if os.access(data.get("spack", ""), os.X_OK):
            data["record"] = str(path)
            return data
    return None


def spack_env(rec):
    """Environment for a Spack command of a bootstrap record."""
    env = dict(os.environ)
    if rec and rec.get("spack_python"):
        env["SPACK_PYTHON"] = rec["spack_python"]
    return env


def _spack(rec, *args, say=print, check=True, limit=commands.SETUP_LIMIT_S):
    cmd = [rec["spack"], *args]
    t0 = time.monotonic()
    try:
        rc, output = lock.run(cmd, float(os.environ.get(commands.LIMIT_VAR) or limit),
                                   env=spack_env(rec))
    except lock.TimedOut as err:
        raise RuntimeError(str(err)) from None
    proc = subprocess.CompletedProcess(cmd, rc, output, "")
    if check and proc.returncode:
        tail = "\n".join(proc.stdout.strip().splitlines()[-10:])
        raise RuntimeError(f"{' '.join(cmd[1:])} failed (exit {proc.returncode}):\n{tail}")
    named = args[2:] if args[:1] == ("-c",) else args    # the command, not its config
    shown = " ".join(a if len(a) < 60 else a[:30] + "..." for a in named[:3])
    say(f"spack setup: spack {shown} ({time.monotonic() - t0:.0f} s)")
    return proc


def _detect_externals(packages, scope):
    """Python for ``spack python -c``: what ``spack external find --scope
    SCOPE --not-buildable PACKAGES`` does, without the package-repository
    index that command filters its candidates with.  Building that index
    loads all 8 000+ builtin recipes (75-95 s on a 2-core machine with a new
    ``$HOME``); the search itself loads only *packages* (a few seconds).
    The first concretization builds the index when it needs it."""
    return (
        "import spack.detection, spack.repo\n"
        f"found = spack.detection.by_path({list(packages)!r})\n"
        f"new = spack.detection.update_configuration(found, scope={scope!r}, buildable=False)\n"
        "virtuals = {v.name for s in new for vs in\n"
        "            spack.repo.PATH.get_pkg_class(s.name).provided.values() for v in vs}\n"
        f"spack.detection.set_virtuals_nonbuildable(virtuals, scope={scope!r})\n"
        "print('detected:', ' '.join(sorted(s.name for s in new)) or 'nothing new')\n")


_PYTHONS_OK = set()


def python_ok(python):
    """Whether *python* exists and imports clingo: Spack's concretizer needs
    it, and with bootstrapping disabled Spack cannot get it itself.  (Only a
    yes is remembered: a no may be mended by setup in this process.)"""
    if python in _PYTHONS_OK:
        return True
    if not python or not os.access(python, os.X_OK):
        return False
    if subprocess.run([python, "-c", "import clingo"], capture_output=True).returncode:
        return False
    _PYTHONS_OK.add(python)
    return True


def _clingo(python, say=print):
    """clingo from PyPI in the Python that runs Spack."""
    if python_ok(python):
        return
    say(f"spack setup: installing {CLINGO} into {python}")
    # The set-up's venv has uv beside its Python and may have no pip.
    uv = Path(python).parent / "uv"
    cmd = ([str(uv), "pip", "install", "-q", "--native-tls", "--python", python, CLINGO]
           if os.access(uv, os.X_OK) else
           [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", CLINGO])
    subprocess.run(cmd, check=True)


def setup(kit_path, cache=None, python=None, say=print):
    """Bootstrap the kit's Spack into the cache (idempotent); the record."""
    kit = Kit(kit_path)
    home = Path(cache or cache_root()) / "spack" / kit.key
    done = home / RECORD
    if done.is_file():
        rec = json.loads(done.read_text())
        if os.access(rec.get("spack", ""), os.X_OK):
            mend_python(rec, done, python, say)
            say(f"spack setup: Spack ready at {rec['spack']} (bootstrapped "
                f"{rec['bootstrapped']}; nothing to do)")
            return rec
    kit.verify(say)
    kit.say_origins(say)
    home.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    for name, (archive, _, _) in (("spack", kit.spack), ("spack-packages", kit.packages)):
        if not (home / name).is_dir():
            say(f"spack setup: unpacking {archive.name}")
            _unpack(archive, home / name)
    develop = {}
    for package, (archive, version, _) in sorted(kit.sources.items()):
        dest = home / "src" / f"{package}-{version}"
        if not dest.is_dir():
            say(f"spack setup: unpacking {archive.name} (built from this tree)")
            dest.parent.mkdir(exist_ok=True)
            _unpack(archive, dest)
        develop[package] = f"{dest}@{version}"
    mirror = None
    if kit.mirror:
        mirror = home / "mirror"
        if not mirror.is_dir():
            shutil.copytree(kit.mirror, home / "mirror.partial", symlinks=True)
            (home / "mirror.partial").rename(mirror)
    python = python or sys.executable
    _clingo(python, say)
    _compile(home / "spack", python)
    builtin = home / "spack-packages" / "repos" / "spack_repo" / "builtin"
    rec = {"spack": str(home / "spack" / "bin" / "spack"), "spack_python": python,
           "builtin_repo": str(builtin), "source_mirror": str(mirror) if mirror else None,
           "develop": develop, "kit": str(kit.path), "key": kit.key}
    site_scope = home / "spack" / "etc" / "spack" / "site"
    site_scope.mkdir(parents=True, exist_ok=True)
    # Spack's own site scope: its commands work outside our environments too.
    (site_scope / "bootstrap.yaml").write_text("bootstrap:\n  enable: false\n")
    (site_scope / "repos.yaml").write_text(f"repos:\n  builtin: {builtin}\n")
    if mirror:
        (site_scope / "mirrors.yaml").write_text(f"mirrors:\n  hpc-health-kit: file://{mirror}\n")
    version = _spack(rec, *commands.version(), say=say).stdout.strip().splitlines()[-1]
    _spack(rec, *commands.python_code(_detect_externals(EXTERNALS, "site")), say=say)
    rec.update(version=version, bootstrapped=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    _write_record(done, rec)
    say(f"spack setup: Spack {version} ready at {rec['spack']} "
        f"({time.monotonic() - t0:.0f} s)")
    return rec


def _compile(spack_root, python):
    """Spack's own modules to bytecode, once: where Python may not write it
    itself (PYTHONDONTWRITEBYTECODE) every Spack command compiles them
    again, about a second of CPU each."""
    lib = Path(spack_root) / "lib"
    if (lib / "spack" / "spack" / "__pycache__").is_dir():
        return
    subprocess.run([python, "-m", "compileall", "-q", "-j", "0", str(lib)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def mend_python(rec, path, python=None, say=print):
    """When the Python of bootstrap record *rec* (file *path*) is gone or
    lacks clingo -- the virtualenv it was bootstrapped with was removed or
    made anew, as a fresh clone at the same path does -- clingo into
    *python* (this one by default), recorded as Spack's Python.  Either way
    Spack's lib compiled, once (a record of an older hpc-health)."""
    if not python_ok(rec.get("spack_python")):
        python = python or sys.executable
        _clingo(python, say)
        say(f"spack setup: Spack's Python {rec.get('spack_python')} is gone or has no "
            f"clingo; Spack now runs with {python}")
        rec["spack_python"] = python
        _write_record(Path(path), rec)
    _compile(Path(rec["spack"]).parent.parent, rec["spack_python"])


def broken_python(rec):
    """Why the Spack of bootstrap record *rec* is not used."""
    return (f"bootstrapped from a kit at {rec['spack']}, but its Python "
            f"{rec.get('spack_python')} is gone or has no clingo")


def _write_record(path, rec):
    # Two test groups may set up at once: each writes its own temporary file.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".bootstrap-", suffix=".tmp")
    with os.fdopen(fd, "w") as fp:
        fp.write(json.dumps({k: v for k, v in rec.items() if k != "record"}, indent=1))
    os.replace(tmp, path)


def find_spack(spack_root=None):
    """The spack executable: the site's spack_root, then PATH, then
    $SPACK_ROOT, then one bootstrapped from a kit whose Python can still run
    its concretizer; None when there is none."""
    candidates = []
    if spack_root:
        candidates.append(os.path.join(spack_root, "bin", "spack"))
    if shutil.which("spack"):
        candidates.append(shutil.which("spack"))
    if os.environ.get("SPACK_ROOT"):
        candidates.append(os.path.join(os.environ["SPACK_ROOT"], "bin", "spack"))
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    rec = record()
    if rec and python_ok(rec.get("spack_python")):
        return rec["spack"]
    return None


def make_kit(dest, base_url=None, spack=None, specs=None, say=print):
    """A kit in *dest* on a connected host: the pinned archives from their
    official projects, each checked (from *base_url*/<name> when a site
    names another source, e.g. another kit: said to be unofficial), a
    source mirror of *specs* (by default the tarball packages each
    benchmark declares, ``Benchmark(mirrored=...)``) made by ``spack mirror
    create`` with *spack* (a record), and SHA256SUMS over everything."""
    dest = Path(dest)
    specs = registry.mirrored() if specs is None else specs
    kit_sources.fetch_archives(dest, base_url, say)
    if spack is not None and specs:
        _spack(spack, *commands.mirror_create(dest / "mirror", specs), say=say)
    files = sorted(p for p in dest.rglob("*") if p.is_file() and not p.is_symlink()
                   and p.name != "SHA256SUMS")
    (dest / "SHA256SUMS").write_text("".join(f"{kit_sources.file_sha256(p)}  {p.relative_to(dest)}\n"
                                             for p in files))
    say(f"spack kit: {dest}: {len(files)} files, SHA256SUMS written")
    return Kit(dest)


def status(site):
    """(found, how, fix) for a run's header: which Spack the checks will
    use, or why there is none and what to do about it."""
    found = find_spack(site.spack_setting("spack_root"))
    kit = kit_from(site)
    fix = (f"hpc-health spack setup --kit {kit}" if kit else
           "install Spack (spack on PATH, $SPACK_ROOT or spack.spack_root), or bootstrap "
           "one from an offline kit: HPC_HEALTH_SPACK_KIT=DIR bash ci/health.sh "
           "(docs/spack.md)")
    rec = record()
    if found:
        how = "bootstrapped from a kit" if rec and rec["spack"] == found else "found"
        return True, f"{how}: {found}", ""
    if rec:
        return False, broken_python(rec), fix if kit else "hpc-health spack setup --kit DIR"
    return False, "not found (no spack on PATH, no $SPACK_ROOT, no spack.spack_root, " \
                  "none bootstrapped)", fix
