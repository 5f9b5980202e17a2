"""Where Spack and the benchmarks' sources come from: their official
projects, the checksum each archive must have, and the check of a file
against them.

Spack's own archives (Spack and spack-packages) are declared here; each
benchmark Spack cannot fetch offline declares its archive beside its parser
(``Benchmark(kit=...)``, :mod:`hpc_health.parsers.registry`), read from
there, so adding one edits no module here.  A release tarball is checked by
its sha256, the one Spack's recipe holds.  An archive of a commit (Spack,
spack-packages, a benchmark with no release tarball) is checked by the
sha256 of its *files*: GitHub makes such archives on demand and promises
their files, not their compressed bytes, and the same commit archived by
``git archive`` elsewhere (an offline kit) has the same files.  Every other
source is not fetched here: ``spack mirror create`` fetches it with Spack's
own recipe, which checks the sha256 the recipe holds.

Anything else is used only when a site names it (``--from URL``), and is
then said to be unofficial, file by file.

This module is part of the core: it imports no ReFrame.
"""

import hashlib
import tarfile
from pathlib import Path

from hpc_health.parsers import registry
from hpc_health.parsers.registry import KitSource

SPACK_COMMIT = "9cf66332df3dd988248617fc93400045be59ebab"
PACKAGES_COMMIT = "983d4a3b6c6ec5c62e38970fd916276658b9fca1"

#: Spack's own pinned sources, from their official projects: the commits
#: this suite is tested with (spack-packages after 983d4a3b6c downloads
#: `compiler-wrapper` and breaks offline use).
SPACK = (
    KitSource("spack-1.2.0.dev0-9cf66332df.tar.gz",
              f"https://github.com/spack/spack/archive/{SPACK_COMMIT}.tar.gz",
              "Spack 1.2.0.dev0, commit 9cf66332df of spack/spack",
              files_sha256="d5114f8fc1d00b60f07dc2ae0dd346ab2c05269955b6e7ba3bfe7e12352cd652"),
    KitSource("spack-packages-983d4a3b6c.tar.gz",
              f"https://github.com/spack/spack-packages/archive/{PACKAGES_COMMIT}.tar.gz",
              "Spack's builtin packages, commit 983d4a3b6c of spack/spack-packages",
              files_sha256="b750ab45253696e31bf9007be29215463ad83625c2c446e400a171ee918d8033"),
)


def official():
    """Every pinned source a kit holds: Spack's, then each benchmark's (in
    file name order)."""
    return SPACK + tuple(registry.kit_sources())


def matches(source, path):
    """Whether the file at *path* is the official archive *source*."""
    if source.sha256:
        return file_sha256(path) == source.sha256
    try:
        return files_sha256(path) == source.files_sha256
    except (OSError, tarfile.TarError, EOFError):
        return False


def checksum(source):
    """*source*'s checksum, as said beside it."""
    return (f"sha256 {source.sha256}" if source.sha256 else
            f"sha256 of its files {source.files_sha256}")


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as fp:
        for block in iter(lambda: fp.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def files_sha256(path):
    """The sha256 of a tar archive's files, whatever compressed them and
    whatever its top folder is called: each file's path below the top
    folder, whether it is executable or a link (and to what), and its
    content's sha256, in path order."""
    entries = []
    with tarfile.open(path) as tar:
        for member in tar:
            _, _, below = member.name.partition("/")
            if member.isdir() or not below:
                continue
            if member.issym() or member.islnk():
                entries.append(f"{below}\0link\0{member.linkname}")
            elif member.isfile():
                content = tar.extractfile(member)
                digest = hashlib.sha256(content.read() if content else b"").hexdigest()
                kind = "exec" if member.mode & 0o111 else "file"
                entries.append(f"{below}\0{kind}\0{digest}")
    h = hashlib.sha256()
    for entry in sorted(entries):
        h.update(entry.encode(errors="surrogateescape") + b"\n")
    return h.hexdigest()


def official_for(path):
    """The official source the archive at *path* is, or None."""
    return next((s for s in official() if matches(s, path)), None)


def origin(path, recorded=None):
    """One line saying where the archive at *path* came from: *recorded*
    (what the kit's SOURCES file says) and whether it is an official one."""
    found = official_for(path)
    came = f" (fetched from {recorded})" if recorded else ""
    if found:
        return f"{Path(path).name}: {found.project}{came}, {checksum(found)} verified"
    return (f"{Path(path).name}: NOT an official archive{came}: it matches none of the "
            "official sources' checksums; only this kit's SHA256SUMS vouches for it")


#: The file of a kit that says where each archive was fetched from.
SOURCES_FILE = "SOURCES"


def recorded(kit):
    """{file: where it was fetched from}, from the kit's SOURCES file."""
    try:
        lines = (Path(kit) / SOURCES_FILE).read_text().splitlines()
    except OSError:
        return {}
    return dict(line.split("\t", 1) for line in lines if "\t" in line)


def fetch_archives(dest, base_url=None, say=print):
    """Fetch the archives of a kit into *dest*, each checked before it is
    kept (a file that fails is deleted, and ConfigError names it, the URL
    and both checksums); the SOURCES file says where each came from.

    Without *base_url*: every :func:`official` source from its project.
    With it (a site's own server, another kit): said to be unofficial
    first; the files its ``SHA256SUMS`` lists (else the official names)
    are fetched from there and checked against that list (else against
    the official checksums), and each is said to be an official archive or
    not.  OSError when a URL cannot be read."""
    import urllib.error
    import urllib.request

    from hpc_health.errors import ConfigError
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    wanted = {s.file: (s.url, None) for s in official()}
    if base_url:
        base = base_url.rstrip("/")
        say(f"spack kit: fetching from {base}: NOT the official sources (named by --from); "
            "each archive is checked and said to be official or not")
        listed = _listed(base)
        wanted = ({name: (f"{base}/{name}", digest) for name, digest in listed.items()}
                  if listed else {name: (f"{base}/{name}", None) for name in wanted})
    origins = recorded(dest)
    for name, (url, digest) in wanted.items():
        target = dest / name
        if not target.exists():
            say(f"spack kit: fetching {url}")
            partial = target.with_name(name + ".partial")
            try:
                with urllib.request.urlopen(url, timeout=600) as resp, \
                        open(partial, "wb") as fp:
                    while block := resp.read(1 << 20):
                        fp.write(block)
            except OSError as err:
                why = err if isinstance(err, urllib.error.HTTPError) else \
                    getattr(err, "reason", None) or err
                raise OSError(f"cannot fetch {url}: {why}") from None
            problem = _problem(partial, name, digest)
            if problem:
                partial.unlink()        # ours: fetched just now
                raise ConfigError(url, f"{problem}: not kept")
            partial.replace(target)
            origins[name] = url
        elif _problem(target, name, digest):
            raise ConfigError(target, f"{_problem(target, name, digest)}: delete it, or give "
                              "another directory")
        say(f"spack kit: {origin(target, origins.get(name))}")
    (dest / SOURCES_FILE).write_text("".join(f"{n}\t{u}\n" for n, u in sorted(origins.items())))
    say("spack kit: every other source is fetched by Spack's own recipe (spack mirror create), "
        "which checks each archive against the sha256 the recipe holds")


def _listed(base):
    """{file: sha256} of the archives at the top of another kit's
    SHA256SUMS at *base*, or {} when it has none."""
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen(f"{base}/SHA256SUMS", timeout=60) as resp:
            text = resp.read().decode()
    except (urllib.error.URLError, OSError):
        return {}
    found = {}
    for line in text.splitlines():
        digest, _, name = line.partition("  ")
        if name.endswith(".tar.gz") and "/" not in name:
            found[name] = digest.strip().lower()
    return found


def _problem(path, name, digest):
    """Why the file at *path* (to be kit file *name*) may not be used, or ''."""
    if digest:
        got = file_sha256(path)
        return "" if got == digest else \
            f"{name}: sha256 {got}, but the source's SHA256SUMS says {digest}"
    pinned = next((s for s in official() if s.file == name), None)
    if pinned is None or matches(pinned, path):
        return ""
    try:
        got = file_sha256(path) if pinned.sha256 else files_sha256(path)
    except (OSError, tarfile.TarError, EOFError) as err:
        return (f"{name}: not a readable tar archive ({err}), not the official one "
                f"({pinned.project})")
    return (f"{name}: {'sha256' if pinned.sha256 else 'sha256 of its files'} {got}, not "
            f"the official {checksum(pinned)} ({pinned.project}): not the official archive")
