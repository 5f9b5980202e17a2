"""``hpc-health spack setup`` and ``spack kit``: Spack from an offline kit."""

import subprocess
import sys

import click

from hpc_health.cli.common import site_option
from hpc_health.errors import ConfigError


@click.group()
def spack():
    """Spack for the benchmarks: bootstrap it from an offline kit."""


@spack.command("setup")
@click.option("--kit", type=click.Path(file_okay=False), metavar="DIR",
              help="The offline kit (default: $HPC_HEALTH_SPACK_KIT, else the site's spack.kit).")
@click.option("--from", "base_url", metavar="URL",
              help="Without a kit: fetch the archives from URL/<name> (a site's own server, "
                   "another kit) instead of their official projects; said to be unofficial.")
@site_option
def spack_setup(kit, base_url, site):
    """Bootstrap Spack from a kit into ~/.cache/hpc-health ($HPC_HEALTH_CACHE)
    unless a Spack is found; nothing to do when it is already there.
    Without a kit, the archives are fetched from their official projects
    (Spack and spack-packages from spack/, OSU's release tarball, STREAM
    from the repository Spack's recipe names), each checked before use."""
    from hpc_health.site import sites
    from hpc_health.spack import kit as spack_kit
    s = sites.load(site)
    found, how, fix = spack_kit.status(s)
    source = spack_kit.kit_from(s, kit)
    rec = spack_kit.record()
    if rec and not found:
        # Spack is there; the Python it was set up with is not (a fresh
        # clone's new .venv at the same path, without clingo).
        spack_kit.mend_python(rec, rec["record"], say=lambda line: click.echo(line, err=True))
        return
    if found and not (source and not rec):
        if rec and rec["spack"] == spack_kit.find_spack(s.spack_setting("spack_root")):
            spack_kit.mend_python(rec, rec["record"])    # compiles its lib once
        click.echo(f"spack setup: Spack {how}; nothing to do")
        return
    say = lambda line: click.echo(line, err=True)  # noqa: E731
    if source is None:
        # No kit: the pinned archives from the network, as a kit in the cache
        # (Spack then fetches IOR's and Darshan's sources itself).
        try:
            source = spack_kit.make_kit(spack_kit.cache_root() / "kit-downloaded", base_url,
                                        say=say).path
        except OSError as err:
            raise ConfigError(s.settings_file, f"no Spack, no kit and no network ({err}): give "
                              "an offline kit with --kit DIR, $HPC_HEALTH_SPACK_KIT or "
                              "spack.kit (docs/spack.md)", keypath="spack.kit") from None
    try:
        spack_kit.setup(source, say=say)
    except (RuntimeError, subprocess.CalledProcessError) as err:
        click.echo(f"hpc-health: error: spack setup from {source}: {err}", err=True)
        sys.exit(1)


@spack.command("kit")
@click.argument("dest", type=click.Path(file_okay=False))
@click.option("--from", "base_url", metavar="URL",
              help="Fetch the archives from URL/<name> (another kit, a site's own web "
                   "server) instead of their official projects; each is said to be official "
                   "(its checksum is the official one) or not.")
def spack_kit_cmd(dest, base_url):
    """Make an offline kit in DEST on a connected host: the pinned Spack,
    spack-packages, STREAM and OSU archives from their official projects,
    each checked, a source mirror for IOR and Darshan (Spack's own recipes,
    with a Spack found or bootstrapped here), SHA256SUMS.  Carry DEST to
    the air-gapped machine and give it as HPC_HEALTH_SPACK_KIT."""
    from hpc_health.spack import kit as spack_kit
    say = lambda line: click.echo(line, err=True)  # noqa: E731
    try:
        kit = spack_kit.make_kit(dest, base_url, say=say)
    except OSError as err:
        raise ConfigError(dest, f"{err}: no network? (--from URL names another source)") \
            from None
    rec = spack_kit.record() or spack_kit.setup(kit.path, say=say)
    spack_kit.make_kit(dest, base_url, spack=rec, say=say)
    click.echo(f"kit ready: {dest} (HPC_HEALTH_SPACK_KIT={dest} bash ci/health.sh)")
