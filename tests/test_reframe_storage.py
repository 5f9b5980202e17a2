"""ReFrame's own results database: every site's ReFrame configuration turns
it on, in the site's `reframe_results_db` or the store, and every
`hpc-health run` is a stored session that ReFrame's own commands find by the
hpc-health run id, site and tags (its session extras)."""

import csv
import importlib.util
import io
import json
import re
import shutil
import subprocess

import pytest
import yaml
from sandbox import REPO, environ, hpc_health, make_root, store

from hpc_health.run import command
from hpc_health.site import reframe_glue, sites

SITES = sorted(p.name for p in (REPO / "site_configs").iterdir()
               if (p / "reframe_config.py").is_file())


def _site_with(tmp_path, **settings):
    root = make_root(tmp_path, references=False)
    path = root / "site_configs" / "local" / "site.yaml"
    doc = yaml.safe_load(path.read_text())
    doc.update(settings)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return sites.load(path.parent)


def test_results_db_defaults_to_the_store(tmp_path, monkeypatch):
    monkeypatch.setenv("HPC_HEALTH_STORE", str(tmp_path / "store"))
    site = _site_with(tmp_path)
    assert site.settings.get("reframe_results_db") is None
    assert reframe_glue.results_db(site) == tmp_path / "store" / "reframe-results.db"
    monkeypatch.delenv("HPC_HEALTH_STORE")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert reframe_glue.results_db(site) == tmp_path / "data" / "hpc-health" / "reframe-results.db"


def test_results_db_honours_the_site_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("HPC_HEALTH_STORE", str(tmp_path / "store"))
    site = _site_with(tmp_path, reframe_results_db="db/results.db")
    # Relative to the site folder, like every path in site.yaml.
    assert reframe_glue.results_db(site) == site.dir / "db" / "results.db"
    monkeypatch.setenv("SHARED", str(tmp_path / "shared"))
    site = _site_with(tmp_path / "b", reframe_results_db="$SHARED/rfm.db")
    assert reframe_glue.results_db(site) == tmp_path / "shared" / "rfm.db"
    assert reframe_glue.reframe_storage(site.dir) == [
        {"enable": True, "backend": "sqlite", "sqlite_db_file": str(tmp_path / "shared" / "rfm.db")}]


@pytest.mark.parametrize("name", SITES)
def test_every_reframe_config_stores_results_in_the_sites_db(name, tmp_path, monkeypatch):
    monkeypatch.setenv("HPC_HEALTH_STORE", str(tmp_path / "store"))
    path = REPO / "site_configs" / name / "reframe_config.py"
    spec = importlib.util.spec_from_file_location(f"cfg_{name.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    storage = module.site_configuration["storage"]
    assert storage == reframe_glue.reframe_storage(path.parent)
    assert storage[0]["enable"] and storage[0]["sqlite_db_file"] == str(
        tmp_path / "store" / "reframe-results.db")
    # Loading the configuration creates nothing; ReFrame creates the
    # database and its directory when it first opens it.
    assert not (tmp_path / "store").exists()


def _reframe(root, *args):
    """ReFrame itself, as a user runs it, on the sandbox's local site."""
    cmd = [command.reframe_executable(), "-C",
           str(root / "site_configs" / "local" / "reframe_config.py"), *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=environ(root),
                         cwd=root.parent)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("mpirun") or not shutil.which("cmake"),
                    reason="needs mpirun and cmake (bash ci/setup.sh installs them)")
def test_a_run_is_a_stored_session_with_its_run_id_and_tags(tmp_path):
    root = make_root(tmp_path, references=False)
    assert not store(root).exists()  # ReFrame creates the database's directory
    res = hpc_health(root, "run", "--site", "local", "--tag", "nightly",
                     "--tag", "before-upgrade", "--note", "test note, with a comma",
                     "-T", "barrier", "--", "-n", "BarrierLatency")
    assert res.returncode == 0, res.stdout + res.stderr
    (run_dir,) = (store(root) / "runs" / "local").iterdir()
    run_id = run_dir.name
    assert (store(root) / "reframe-results.db").is_file()
    stored = re.findall(r"Current session stored with UUID: (\S+)",
                        (run_dir / "reframe.out").read_text())
    assert len(stored) == 1, (run_dir / "reframe.out").read_text()
    uuid = stored[0]

    # The table a user sees: the session, with the extras as columns.
    pretty = _reframe(root, "--list-stored-sessions")
    for word in (uuid, run_id, "hpc_health_tags", "nightly;before-upgrade",
                 "test note; with a comma"):
        assert word in pretty, pretty
    (row,) = csv.DictReader(io.StringIO(_reframe(root, "--list-stored-sessions",
                                                 "--table-format=csv")))
    assert row["UUID"] == uuid
    assert row["hpc_health_site"] == "local"
    assert row["hpc_health_run"] == run_id
    assert row["hpc_health_tags"] == "nightly;before-upgrade"
    # ReFrame splits --session-extras at commas: the note keeps the rest.
    assert row["hpc_health_note"] == "test note; with a comma"

    (session,) = json.loads(_reframe(root, "--describe-stored-sessions", uuid))
    info = session["session_info"]
    assert info["hpc_health_run"] == run_id and info["hpc_health_site"] == "local"
    assert info["prefix_output"] == str(run_dir / "output")
    names = {tc["name"] for run in session["runs"] for tc in run["testcases"]}
    assert "BarrierLatency" in names
    # The same session found by its hpc-health run id instead of its UUID.
    (by_run,) = json.loads(_reframe(root, "--describe-stored-sessions",
                                    f'?hpc_health_run=="{run_id}"'))
    assert by_run["session_info"]["uuid"] == uuid

    # The comparison docs/verdicts.md shows, here a run against itself.
    rows = list(csv.DictReader(io.StringIO(_reframe(
        root, "--performance-compare",
        f'?hpc_health_run=="{run_id}"/?hpc_health_run=="{run_id}"/mean:/',
        "--table-format=csv"))))
    assert {r["pvar"] for r in rows} >= {"median_n2", "mpi_init"}
    assert all(float(r["pdiff (%)"]) == 0 for r in rows), rows
