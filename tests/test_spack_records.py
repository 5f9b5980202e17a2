"""What the build fixtures kept, read back for a run's provenance
(hpc_health/spack/records.py; the cold Spack test reads real ones)."""

import json

from hpc_health.spack import records


def test_a_builds_record_and_its_locks_root_specs_are_read_back(tmp_path):
    out = tmp_path / "output" / "default" / "gnu-mpi" / "StreamBuild"
    out.mkdir(parents=True)
    (out / "spack-build.json").write_text(json.dumps(
        {"env_dir": "/envs/stream", "hashes": {"stream": "abc"},
         "prefixes": {"stream": "/opt/stream"}}))
    (out / "spack.lock").write_text(json.dumps({
        "roots": [{"hash": "abc", "spec": "stream"}],
        "concrete_specs": {
            "abc": {"name": "stream", "version": "5.10",
                    "parameters": {"openmp": True, "cflags": ["-O3"], "patches": ["x"],
                                   "stream_array_size": "3"},
                    "dependencies": [{"name": "gcc", "hash": "g",
                                      "parameters": {"virtuals": ["c"]}}]},
            "g": {"name": "gcc", "version": "12.2.0"}}}))
    (tmp_path / "output" / "broken").mkdir()
    (tmp_path / "output" / "broken" / "spack-build.json").write_text("{")
    found = records.collect(tmp_path)
    assert list(found) == ["output/default/gnu-mpi/StreamBuild"]
    rec = found["output/default/gnu-mpi/StreamBuild"]
    assert rec["hashes"] == {"stream": "abc"} and rec["env_dir"] == "/envs/stream"
    assert rec["specs"] == {"stream": {"version": "5.10", "hash": "abc", "compiler": "gcc@12.2.0",
                                       "variants": "+openmp stream_array_size=3 cflags=-O3"}}


def test_a_missing_or_damaged_lock_has_no_root_specs(tmp_path):
    assert records.concrete_specs(tmp_path / "spack.lock") == {}
    (tmp_path / "spack.lock").write_text("[]")
    assert records.concrete_specs(tmp_path / "spack.lock") == {}
