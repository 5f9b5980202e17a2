"""Where Spack and the benchmarks' sources come from: their official
projects, the checksum each archive must have, and the check of a file
against them.

A release tarball (OSU's) is checked by its sha256, the one Spack's recipe
holds.  An archive of a commit (Spack, spack-packages, STREAM, which has no
release tarball: Spack's ``stream`` recipe names only its git repository)
is checked by the sha256 of its *files*: GitHub makes such archives on
demand and promises their files, not their compressed bytes, and the same
commit archived by ``git archive`` elsewhere (an offline kit) has the same
files.  IOR and Darshan are not fetched here: ``spack mirror create``
fetches them with Spack's own recipes, which check the sha256 each recipe
holds.

Anything else is used only when a site names it (``--from URL``), and is
then said to be unofficial, file by file.

This module is part of the core: it imports no ReFrame.
"""

import hashlib
import tarfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Source:
    """One archive a kit holds: its *file* name in the kit, the official
    *url* and *project* it comes from, and either the *sha256* of the file
    (a release tarball) or the *files_sha256* of its files (a commit)."""
    file: str
    url: str
    project: str
    sha256: str = ""
    files_sha256: str = ""

    def matches(self, path):
        """Whether the file at *path* is this official archive."""
        if self.sha256:
            return file_sha256(path) == self.sha256
        try:
            return files_sha256(path) == self.files_sha256
        except (OSError, tarfile.TarError, EOFError):
            return False

    @property
    def checksum(self):
        return (f"sha256 {self.sha256}" if self.sha256 else
                f"sha256 of its files {self.files_sha256}")


SPACK_COMMIT = "9cf66332df3dd988248617fc93400045be59ebab"
PACKAGES_COMMIT = "983d4a3b6c6ec5c62e38970fd916276658b9fca1"
STREAM_COMMIT = "6703f7504a38a8da96b353cadafa64d3c2d7a2d3"

#: The pinned sources, from their official projects.  Spack and
#: spack-packages: the commits this suite is tested with (spack-packages
#: after 983d4a3b6c downloads `compiler-wrapper` and breaks offline use).
OFFICIAL = (
    Source("spack-1.2.0.dev0-9cf66332df.tar.gz",
           f"https://github.com/spack/spack/archive/{SPACK_COMMIT}.tar.gz",
           "Spack 1.2.0.dev0, commit 9cf66332df of spack/spack",
           files_sha256="d5114f8fc1d00b60f07dc2ae0dd346ab2c05269955b6e7ba3bfe7e12352cd652"),
    Source("spack-packages-983d4a3b6c.tar.gz",
           f"https://github.com/spack/spack-packages/archive/{PACKAGES_COMMIT}.tar.gz",
           "Spack's builtin packages, commit 983d4a3b6c of spack/spack-packages",
           files_sha256="b750ab45253696e31bf9007be29215463ad83625c2c446e400a171ee918d8033"),
    Source("STREAM-5.10-6703f75.tar.gz",
           f"https://github.com/jeffhammond/STREAM/archive/{STREAM_COMMIT}.tar.gz",
           "STREAM 5.10, commit 6703f75 of jeffhammond/STREAM (the repository Spack's "
           "stream recipe names)",
           files_sha256="ffe58f23aee69cc2d1fda64394d478ebfbae8d7b84adbb2f416362acbda6c3c5"),
    Source("osu-micro-benchmarks-7.4.tar.gz",
           "https://mvapich.cse.ohio-state.edu/download/mvapich/osu-micro-benchmarks-7.4.tar.gz",
           "OSU Micro-Benchmarks 7.4, the release tarball of Ohio State's MVAPICH project "
           "(sha256 from Spack's osu-micro-benchmarks recipe)",
           sha256="1edd0c2efa61999409bfb28740a7f39689a5b42b1a1b4c66d1656e5637f7cefc"),
)


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
    return next((s for s in OFFICIAL if s.matches(path)), None)


def origin(path, recorded=None):
    """One line saying where the archive at *path* came from: *recorded*
    (what the kit's SOURCES file says) and whether it is an official one."""
    found = official_for(path)
    came = f" (fetched from {recorded})" if recorded else ""
    if found:
        return f"{Path(path).name}: {found.project}{came}, {found.checksum} verified"
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

    Without *base_url*: every :data:`OFFICIAL` source from its project.
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
    wanted = {s.file: (s.url, None) for s in OFFICIAL}
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
    say("spack kit: IOR and Darshan are fetched by Spack's own recipes (spack mirror create), "
        "which check each archive against the sha256 the recipe holds")


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
    official = next((s for s in OFFICIAL if s.file == name), None)
    if official is None or official.matches(path):
        return ""
    try:
        got = file_sha256(path) if official.sha256 else files_sha256(path)
    except (OSError, tarfile.TarError, EOFError) as err:
        return (f"{name}: not a readable tar archive ({err}), not the official one "
                f"({official.project})")
    return (f"{name}: {'sha256' if official.sha256 else 'sha256 of its files'} {got}, not "
            f"the official {official.checksum} ({official.project}): not the official archive")
