"""A benchmark is its own files: what the core needs of it (parsers,
settings and their defaults, what the schema cannot say, pictures, what an
offline Spack kit holds of it) is declared beside its parser
(``hpc_health/parsers/registry.py``), and the site schema, ``hpc-health
parse``, the report and Spack's kit read the declarations.  No module in
site/, spack/, cli/, judge/ or run/ names a benchmark."""

import re
from pathlib import Path

import pytest
from sandbox import code_strings

from hpc_health import parsers
from hpc_health.parsers import registry
from hpc_health.site import schema
from hpc_health.spack import kit, kit_sources

PACKAGE = Path(__file__).resolve().parent.parent / "hpc_health"
#: The layers a new benchmark must not edit (Spack's kit reads the archives
#: each benchmark declares: issue 45).
CORE_LAYERS = ("site", "spack", "cli", "judge", "run")


def test_every_benchmark_declares_its_parsers_and_settings():
    assert set(registry.declared()) == {"darshan", "ior", "kernels", "mdtest", "osu", "stream"}
    assert parsers.names() == ["barrier", "darshan", "halo", "ior", "mdtest", "osu", "stream"]
    assert set(registry.settings()) == {"ior", "ior_hints", "kernels", "mdtest", "osu",
                                        "osu_algorithms", "startup", "stream"}
    assert parsers.get("osu") is registry.declared()["osu"].parsers["osu"]
    with pytest.raises(KeyError, match="unknown parser 'nope'; known: barrier, darshan"):
        parsers.get("nope")


def test_the_site_schema_is_assembled_from_the_declarations():
    partition = schema.SITE_SCHEMA["properties"]["partitions"]["additionalProperties"]
    sections = registry.settings()
    assert not set(sections) & set(schema.PARTITION_KEYS), "a section takes a partition key"
    assert partition["properties"] == {**schema.PARTITION_KEYS, **sections}
    for name, section in sections.items():
        # Every setting documented, every section optional with its defaults.
        assert section["default"] == {} and section["additionalProperties"] is False, name
        for key, sub in section["properties"].items():
            assert sub.get("description") or key.endswith("_spec"), f"{name}.{key}"
    filled = schema.with_defaults(partition, {"osu": {"samples": None}})
    assert filled["osu"]["samples"] == 3 and filled["stream"]["ntimes"] == 20


def test_what_the_schema_cannot_say_is_said_by_each_benchmark():
    problems = registry.check_settings({"osu": {"sizes": {"latency": [8, 24]}},
                                        "stream": {"spec": "stream ntimes=5"}})
    assert sorted(path for path, _ in problems) == [["osu", "sizes", "latency", 1],
                                                    ["stream", "spec"]]
    assert registry.check_settings({}) == []


def test_spacks_kit_reads_what_each_benchmark_declares_of_it():
    # Spack's own archives are spack/'s; a benchmark's are its parser's.
    assert [s.file for s in kit_sources.SPACK] == ["spack-1.2.0.dev0-9cf66332df.tar.gz",
                                                   "spack-packages-983d4a3b6c.tar.gz"]
    assert kit_sources.official() == kit_sources.SPACK + (registry.declared()["stream"].kit +
                                                          registry.declared()["osu"].kit)
    assert kit.develop_packages() == {"STREAM": "stream",
                                      "osu-micro-benchmarks": "osu-micro-benchmarks"}
    assert sorted(registry.mirrored()) == ["darshan-runtime@3.5.0", "darshan-util@3.5.0",
                                           "ior@3.3.0", "ior@4.0.0"]
    assert registry.built_out_of_source() == {"hpc-health-kernels"}


def test_a_section_or_parser_declared_twice_is_refused(monkeypatch):
    twice = {"a": registry.Benchmark(settings={"x": {}}), "b": registry.Benchmark(settings={"x": {}})}
    monkeypatch.setattr(registry, "declared", lambda: twice)
    with pytest.raises(ValueError, match=r"settings 'x' is declared by both parsers/a.py and "
                                         r"parsers/b.py"):
        registry.settings()


def test_no_core_layer_names_a_benchmark():
    # A benchmark named in site/, cli/, judge/ or run/ (its settings, its
    # parser, a picture of its own) is an edit there for the next one.
    names = set(registry.settings()) | set(registry.parsers())
    found = []
    for layer in CORE_LAYERS:
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            for line, text in code_strings(path):
                hit = names & set(re.findall(r"[a-z_]+", text.lower()))
                if hit:
                    found.append(f"{path.relative_to(PACKAGE)}:{line}: {sorted(hit)} in {text!r}")
    assert not found, "\n".join(found)


def test_the_finder_sees_a_benchmark_named_in_code(tmp_path):
    path = tmp_path / "m.py"
    path.write_text('"""About osu."""\nX = {"osu": 1}\n')
    assert code_strings(path) == [(2, "osu")]
