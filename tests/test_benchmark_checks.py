"""The STREAM, OSU and IOR/mdtest checks without running them: sizes derived
from the processor topology, option lists, sanity rules on recorded outputs,
Darshan's proof of MPI support, skip reasons and the site settings schema.

Recorded outputs are those of tests/data (see each MANIFEST.md)."""

import importlib
import importlib.util
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from reframe.core.exceptions import SanityError

from hpc_health.checklib import darshan, launches
from hpc_health.checklib import ior as ior_lib
from hpc_health.checklib import osu as osu_lib
from hpc_health.checklib import stream as stream_lib
from hpc_health.checklib.check import Insane
from hpc_health.errors import ConfigError
from hpc_health.judge import verdicts
from hpc_health.model import results
from hpc_health.parsers.darshan import parse_darshan
from hpc_health.parsers.ior import parse_ior
from hpc_health.parsers.mdtest import parse_mdtest
from hpc_health.parsers.osu import parse_osu
from hpc_health.parsers.stream import parse_stream
from hpc_health.site import reframe_glue, sites
from hpc_health.site import schema as schema_mod

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"

MiB = 1 << 20


def read(name):
    return (DATA / name).read_text()


def load_config(site):
    path = REPO / "site_configs" / site / "reframe_config.py"
    spec = importlib.util.spec_from_file_location(f"rfm_config_{site.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.site_configuration


def partitions(site):
    return {p["name"]: p for p in load_config(site)["systems"][0]["partitions"]}


# ----------------------------------------------------------------- STREAM

# ReFrame's detection on the fixture machine: 2 vCPUs, one 32 MiB L3.
LAB_VM = {
    "num_cpus": 2, "num_cpus_per_core": 1, "num_sockets": 1,
    "topology": {"caches": [
        {"type": "L2", "size": 512 * 1024, "num_cpus": 1, "cpusets": ["0x1", "0x2"]},
        {"type": "L1", "size": 32 * 1024, "num_cpus": 1, "cpusets": ["0x1", "0x2"]},
        {"type": "L3", "size": 32 * MiB, "num_cpus": 2, "cpusets": ["0x3"]},
    ]},
}


def test_last_level_cache_sums_every_instance():
    assert stream_lib.last_level_cache_bytes(LAB_VM) == 32 * MiB
    two_l3 = {"num_sockets": 2, "topology": {"caches": [
        {"type": "L3", "size": 32 * MiB, "cpusets": ["0xff", "0xff00"]},
        {"type": "L2", "size": MiB, "cpusets": ["0x1"] * 16}]}}
    assert stream_lib.last_level_cache_bytes(two_l3) == 64 * MiB
    # Without cpusets, one instance per socket.
    per_socket = {"num_sockets": 2, "topology": {"caches": [{"type": "L3", "size": 40 * MiB}]}}
    assert stream_lib.last_level_cache_bytes(per_socket) == 80 * MiB


def test_stream_array_is_four_times_the_last_level_cache():
    size = stream_lib.stream_array_size(LAB_VM)
    assert size * 8 >= 4 * 32 * MiB
    assert size == 17_000_000  # 16.78M rounded up to whole millions
    # A small cache still gets STREAM's own 10M elements.
    small = {"topology": {"caches": [{"type": "L2", "size": MiB, "cpusets": ["0x1"]}]}}
    assert stream_lib.stream_array_size(small) == stream_lib.STREAM_MIN_ARRAY


def test_stream_array_size_unknown_without_topology():
    assert stream_lib.stream_array_size({"num_cpus": 8}) is None
    assert stream_lib.stream_array_size({}) is None


@pytest.mark.parametrize("site,partition,llc_mib,elements", [
    ("example-slurm", "cpu", 512, 269_000_000),   # 2 sockets x 8 CCX x 32 MiB
    ("example-slurm", "gpu", 256, 135_000_000),
    ("example-cray", "cpu", 768, 403_000_000),    # 2 sockets x 12 CCD x 32 MiB
])
def test_example_sites_size_stream_from_their_declared_processors(site, partition, llc_mib,
                                                                   elements):
    proc = partitions(site)[partition]["processor"]
    assert stream_lib.last_level_cache_bytes(proc) == llc_mib * MiB
    assert stream_lib.stream_array_size(proc) == elements


def test_stream_spec_carries_sizes_and_code_model():
    assert stream_lib.stream_spec("stream +openmp", 17_000_000, 20) == \
        "stream +openmp stream_array_size=17000000 ntimes=20"
    # 3 arrays of 8-byte elements beyond 2 GiB: static data needs -mcmodel=medium.
    assert 'cflags="-mcmodel=medium"' in stream_lib.stream_spec("stream +openmp", 100_000_000, 20)
    assert "mcmodel" not in stream_lib.stream_spec("stream +openmp", 89_000_000, 20)


def test_thread_series_ends_with_all_cores():
    assert stream_lib.thread_series(1) == [1]
    assert stream_lib.thread_series(2) == [1, 2]
    assert stream_lib.thread_series(12) == [1, 2, 4, 8, 12]
    assert stream_lib.thread_series(128) == [1, 2, 4, 8, 16, 32, 64, 128]


def test_stream_sanity_accepts_a_good_run_and_names_what_is_wrong():
    out = parse_stream(read("stream/stream_c_omp2.txt"))
    stream_lib.check_stream_run(out, 2, out["array_size"])
    with pytest.raises(Insane, match="counted 2 threads, 4 were requested"):
        stream_lib.check_stream_run(out, 4, out["array_size"])
    with pytest.raises(Insane, match="the build asked for 17000000"):
        stream_lib.check_stream_run(out, 2, 17_000_000)


def test_stream_sanity_refuses_the_fortran_binary():
    out = parse_stream(read("stream/stream_f_omp2_unlimited_stack.txt"))
    with pytest.raises(Insane, match="not the C STREAM binary"):
        stream_lib.check_stream_run(out, 2, out["array_size"])


# ----------------------------------------------------------------- OSU

def test_osu_pt2pt_options_never_use_full_stats():
    opts = osu_lib.osu_options("osu_latency", [8, 4096])
    assert opts == ["-m", "8:4096", "-c"]
    assert "-f" not in osu_lib.osu_options("osu_bw", [65536, 4194304], iterations=100, warmup=10)
    assert osu_lib.osu_options("osu_bw", [65536], validate=False, iterations=100, warmup=10) == \
        ["-m", "65536:65536", "-x", "10", "-i", "100"]


def test_osu_collective_options():
    assert osu_lib.osu_options("osu_allreduce", [8, 1048576]) == \
        ["-m", "8:1048576", "-f", "-c", "-T", "mpi_int"]
    assert osu_lib.osu_options("osu_bcast", [8, 1048576]) == ["-m", "8:1048576", "-f", "-c"]
    # Barrier has no sizes and no validation (OSU 7.4 rejects -c for it).
    assert osu_lib.osu_options("osu_barrier", [8]) == ["-f"]
    # The non-blocking allreduce: a collective, a sum validated on MPI_INT
    # (tests/data/osu: MPI_CHAR fails from 16 B), gated at allreduce's sizes.
    assert osu_lib.osu_options("osu_iallreduce", [8, 1048576]) == \
        ["-m", "8:1048576", "-f", "-c", "-T", "mpi_int"]
    assert osu_lib.osu_options("osu_iallreduce", [8, 1048576], validate=False) == \
        ["-m", "8:1048576", "-f"]
    assert osu_lib.osu_binary("/p", "osu_iallreduce") == \
        "/p/libexec/osu-micro-benchmarks/mpi/collective/osu_iallreduce"
    assert [osu_lib.size_set(b) for b in ("osu_iallreduce", "osu_allreduce", "osu_bw")] == \
        ["allreduce", "allreduce", "bw"]


def test_osu_device_buffers_and_pairs():
    assert osu_lib.osu_options("osu_bw", [8], device="cuda")[:4] == ["-d", "cuda", "D", "D"]
    assert osu_lib.osu_options("osu_allreduce", [8], device="cuda")[:3] == ["-d", "cuda", "-m"]
    assert osu_lib.osu_options("osu_mbw_mr", [8, 65536], pairs=4)[-2:] == ["-p", "4"]


def test_osu_sizes_come_from_the_schema_defaults_unless_the_site_sets_them():
    schema = schema_mod.SITE_SCHEMA["properties"]["partitions"]["additionalProperties"]
    fill = lambda part: schema_mod.with_defaults(schema, part)["osu"]["sizes"]  # noqa: E731
    assert fill({})["latency"] == [8, 4096]
    assert fill({"osu": {"sizes": {"latency": [1, 4096]}}})["latency"] == [1, 4096]
    assert fill({"osu": {"sizes": {"bw": [1024]}}})["latency"] == [8, 4096]
    # null means the default, everywhere
    assert fill({"osu": {"sizes": {"latency": None}}})["latency"] == [8, 4096]
    assert schema_mod.with_defaults(schema, {"kernels": {"samples": None}})["kernels"]["samples"] == 5


def test_osu_binary_layouts(tmp_path):
    assert osu_lib.osu_binary("/p", "osu_bw") == \
        "/p/libexec/osu-micro-benchmarks/mpi/pt2pt/osu_bw"
    assert osu_lib.osu_binary("/p", "osu_allreduce") == \
        "/p/libexec/osu-micro-benchmarks/mpi/collective/osu_allreduce"
    # A release that nests its binaries one level deeper is found on disk.
    nested = tmp_path / "libexec" / "osu-micro-benchmarks" / "mpi" / "pt2pt" / "standard"
    nested.mkdir(parents=True)
    (nested / "osu_latency").write_text("")
    assert osu_lib.osu_binary(str(tmp_path), "osu_latency") == str(nested / "osu_latency")


def test_osu_sanity_on_recorded_tables():
    out = parse_osu(read("osu/osu_latency_np2.txt"))
    osu_lib.check_osu_table(out, "osu_latency", [8, 4096], validate=False)
    # The table was not run with -c: asking for validation must fail.
    with pytest.raises(Insane, match="no Validation column"):
        osu_lib.check_osu_table(out, "osu_latency", [8, 4096], validate=True)
    cut = parse_osu(read("osu/osu_latency_np2_m0-4096.txt"))
    with pytest.raises(Insane, match="stops at 4096 bytes, expected up to 4194304"):
        osu_lib.check_osu_table(cut, "osu_latency", [8, 4194304], validate=False)
    # OSU 5.x headers read the same way.
    old = parse_osu(read("osu/osu5.3_latency_np2.txt"))
    osu_lib.check_osu_table(old, "osu_latency", [8, 4096], validate=False)
    barrier = parse_osu(read("osu/osu_barrier_np2.txt"))
    osu_lib.check_osu_table(barrier, "osu_barrier", [8], validate=True)


def test_osu_iallreduce_sanity_and_figures_on_its_recorded_tables():
    timed = parse_osu(read("osu/osu_iallreduce_np2_full_m8-1048576.txt"))
    osu_lib.check_osu_table(timed, "osu_iallreduce", [8, 1048576], validate=False)
    checked = parse_osu(read("osu/osu_iallreduce_np2_full_validate_mpi_int_x2_i10.txt"))
    osu_lib.check_osu_table(checked, "osu_iallreduce", [8, 1048576], validate=True)
    with pytest.raises(Insane, match="no Validation column"):
        osu_lib.check_osu_table(timed, "osu_iallreduce", [8, 1048576], validate=True)
    figures = {f.name: f for f in _load_check("osu").OsuCollective.figures
               if f.where == {"benchmark": "osu_iallreduce"}}
    assert sorted(figures) == ["latency_max_{}", "latency_{}", "overlap_{}"]
    assert figures["latency_{}"].read(timed, 1048576) == 1816.35      # Pure Comm.(us)
    assert figures["latency_max_{}"].read(timed, 1048576) == 2177.22  # Max Comm.(us)
    # Open MPI 4.1 without a progress thread, 2 ranks on 2 loaded cores: the
    # collective progresses inside MPI_Wait only, nothing is overlapped.
    assert figures["overlap_{}"].read(timed, 8) == 0.0
    assert figures["overlap_{}"].better == "higher"


VALIDATED_ALLREDUCE = """
# OSU MPI Allreduce Latency Test v7.4
# Datatype: MPI_CHAR.
# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations        Validation
8                       0.63              0.58              0.68        1000              Pass
16                      0.72              0.71              0.74        1000              Fail
"""


def test_osu_sanity_fails_on_a_failed_validation():
    # Recorded here with OSU 7.4 (MPI_CHAR sums, which is why allreduce runs
    # on MPI_INT); the run's own abort lines are left out.
    out = parse_osu(VALIDATED_ALLREDUCE)
    with pytest.raises(Insane, match=r"validation failed at sizes \[16\]"):
        osu_lib.check_osu_table(out, "osu_allreduce", [8, 16], validate=True)


# ----------------------------------------------------------------- IOR, mdtest

def test_ior_options_per_mode():
    common = ["-b", "16m", "-t", "1m", "-s", "4", "-i", "1", "-w", "-r", "-e", "-C", "-g",
              "-o", "F", "-O", "summaryFormat=JSON", "-O", "summaryFile=S"]
    assert ior_lib.ior_options("posix_fpp", "16m", "1m", 4, 1, "F", "S") == ["-a", "POSIX", "-F"] + common
    assert ior_lib.ior_options("posix_shared", "16m", "1m", 4, 1, "F", "S") == ["-a", "POSIX"] + common
    assert ior_lib.ior_options("mpiio_collective", "16m", "1m", 4, 1, "F", "S") == \
        ["-a", "MPIIO", "-c"] + common
    # O_DIRECT is IOR's POSIX backend option: MPI-IO is left to the MPI library.
    assert ior_lib.ior_options("posix_fpp", "16m", "1m", 4, 1, "F", "S", direct_io=True) == \
        ["-a", "POSIX", "--posix.odirect", "-F"] + common
    assert ior_lib.ior_options("mpiio_collective", "16m", "1m", 4, 1, "F", "S", direct_io=True) == \
        ["-a", "MPIIO", "-c"] + common


def test_mdtest_options():
    assert ior_lib.mdtest_options(1000, 1, "D") == ["-n", "1000", "-i", "1", "-d", "D"]
    assert ior_lib.mdtest_options(10, 2, "D", write_bytes=4096, tasks_per_node=8, nodes=2) == \
        ["-n", "10", "-i", "2", "-d", "D", "-w", "4096", "-N", "8"]


def test_ior_sanity_checks_the_pattern_and_the_ranks():
    out = parse_ior(read("ior/ior_posix_shared_np2.json"))
    assert ior_lib.check_ior_summary(out, "posix_shared", 2) == 2 * 4 * 16 * MiB
    with pytest.raises(Insane, match="not posix_fpp"):
        ior_lib.check_ior_summary(out, "posix_fpp", 2)
    with pytest.raises(Insane, match="IOR ran 2 tasks, 4 were asked for"):
        ior_lib.check_ior_summary(out, "posix_shared", 4)


# mdtest 3.3.0 (the `ior` Spack builds by default offline) prints a colon
# after each operation; recorded in the Spack lab of this project.
MDTEST_330 = """-- started at 11/22/2026 04:55:07 --

mdtest-3.3.0 was launched with 2 total task(s) on 1 node(s)
Command line used: mdtest '-n' '100' '-i' '1' '-d' '/tmp/t/tree' '-w' '1000'
Path: /tmp/t
FS: 252.0 GiB   Used FS: 5.2%   Inodes: 16.0 Mi   Used Inodes: 2.7%

Nodemap: 11
2 tasks, 200 files/directories

SUMMARY rate: (of 1 iterations)
   Operation                      Max            Min           Mean        Std Dev
   ---------                      ---            ---           ----        -------
   Directory creation        :       6983.315       6159.242       6571.279        412.036
   Directory stat            :     537035.297      25674.910     281355.103     255680.193
   Directory removal         :        295.835        289.020        292.428          3.407
   File creation             :       6246.528       6016.936       6131.732        114.796
   File stat                 :     770790.137      29740.533     400265.335     370524.802
   File read                 :     359202.499      12677.815     185940.157     173262.342
   File removal              :     149911.552      10282.588      80097.070      69814.482
   Tree creation             :      13739.095      13739.095      13739.095          0.000
   Tree removal              :         83.214         83.214         83.214          0.000
-- finished at 11/22/2026 04:55:08 --
"""


@pytest.mark.parametrize("text,items", [(MDTEST_330, 100), (None, 200)])
def test_mdtest_sanity(text, items):
    out = parse_mdtest(text or read("ior/mdtest_np2_n200.txt"))
    phases = _load_check("ior").MDTEST_PHASES
    ior_lib.check_mdtest(out, 2, items, phases)
    with pytest.raises(Insane, match="items"):
        ior_lib.check_mdtest(out, 2, items + 1, phases)


# ----------------------------------------------------------------- Darshan

def test_darshan_wraps_only_the_application():
    exe, opts = darshan.wrap("/p/ior", ["-a", "POSIX"], "/rt", "/stage/app.darshan")
    assert exe == "env"
    assert opts == ["LD_PRELOAD=/rt/lib/libdarshan.so", "DARSHAN_LOGFILE=/stage/app.darshan",
                    "/p/ior", "-a", "POSIX"]
    # A dry run's placeholder prefix stays a command substitution.
    exe, opts = darshan.wrap('"$(spack location -i ior)/bin/ior"', [],
                             "$(spack location -i darshan-runtime)", "/s/app.darshan")
    assert opts[0] == 'LD_PRELOAD="$(spack location -i darshan-runtime)/lib/libdarshan.so"'


def test_darshan_log_of_a_non_mpi_runtime_is_refused():
    nonmpi = parse_darshan(read("darshan/darshan-parser_ior_posix_shared_nonmpi_rank0.txt"))
    with pytest.raises(ValueError, match="counts 1 process.*not built with MPI"):
        darshan.check_ranks(nonmpi, 2)
    mpi = parse_darshan(read("darshan/darshan-parser_ior_mpiio_collective_np2.txt"))
    darshan.check_ranks(mpi, 2)


def test_darshan_missing_log_says_why(tmp_path):
    with pytest.raises(ValueError, match="no Darshan log.*built without MPI"):
        darshan.load(str(tmp_path), str(tmp_path / "app.darshan"))


def test_darshan_bytes_match_what_ior_moved():
    parsed = parse_darshan(read("darshan/darshan-parser_ior_mpiio_collective_np2.txt"))
    asked = 2 * 4 * 16 * MiB
    darshan.check_bytes(parsed, "MPI-IO", asked, asked)
    # Open MPI wrote 200 B to its shared-memory file: POSIX needs the allowance.
    darshan.check_bytes(parsed, "POSIX", asked, asked, allowance=65536)
    with pytest.raises(ValueError, match="saw 134217928 B written in POSIX"):
        darshan.check_bytes(parsed, "POSIX", asked, asked)
    with pytest.raises(ValueError, match="asked to move 268435456 B"):
        darshan.check_bytes(parsed, "MPI-IO", 2 * asked, 2 * asked)


def test_darshan_figures():
    parsed = parse_darshan(read("darshan/darshan-parser_ior_mpiio_collective_np2.txt"))
    fig = darshan.figures(parsed, "MPI-IO")
    assert fig["bytes"] == 2 * 4 * 16 * MiB * 2
    assert fig["meta_time"] is not None
    lines = darshan.summary_lines(parsed, ["POSIX", "MPI-IO"])
    assert lines[0].startswith("Darshan 3.5.0 log: 2 processes")
    assert any(line.startswith("MPI-IO: written 134217728 B") for line in lines)


# ----------------------------------------------------------------- Spack layer

def test_spec_names():
    spackenv = _load_lib("spackenv")
    assert spackenv.spec_name("ior%gcc@4 +x") == "ior"
    assert spackenv.spec_name("osu-micro-benchmarks@7.4 +cuda cuda_arch=80") == \
        "osu-micro-benchmarks"
    assert spackenv.spec_name("stream +openmp stream_array_size=3 %cce") == "stream"


def test_composed_environment_searches_our_repo_before_builtin(tmp_path):
    spackenv = _load_lib("spackenv")
    site_dir = REPO / "site_configs" / "local"
    composed = spackenv.compose(site_dir / "spack.yaml", site_dir, ["ior"], {},
                                builtin_repo="/srv/spack-packages/repos/spack_repo/builtin")
    repos = composed["spack"]["repos"]
    assert list(repos) == ["hpc_health", "builtin"]
    assert repos["hpc_health"] == str(REPO / "spack_repo" / "hpc_health")
    # Written as composed: sorting the keys would put builtin first, and
    # Spack would take its darshan-runtime, which drops MPI on Debian.
    env_dir = tmp_path / "env"
    args = ["ensure", "--spack", "/nonexistent/spack", "--env-dir", str(env_dir),
            "--site-env", str(site_dir / "spack.yaml"), "--site-dir", str(site_dir),
            "--out", str(tmp_path), "--spec", "ior",
            "--builtin-repo", "/srv/spack-packages/repos/spack_repo/builtin"]
    assert spackenv.main(args) == 1  # no Spack here; the file is written first
    written = yaml.safe_load((env_dir / "spack.yaml").read_text())
    assert list(written["spack"]["repos"]) == ["hpc_health", "builtin"]


class _FakeBuild:
    stdout, stderr = "rfm_build.out", "rfm_build.err"

    def __init__(self, stagedir):
        self.stagedir = str(stagedir)


def test_spack_failure_excerpt_reaches_the_fixture(tmp_path):
    builds = _load_lib("spack_build")
    (tmp_path / "rfm_build.out").write_text("hpc-health: spackenv failed with exit 1\n")
    (tmp_path / "rfm_build.err").write_text(
        "==> Warning: x\nhpc-health: spack -e /e concretize -f failed (exit 1):\n"
        "    ==> Error: No version for 'osu-micro-benchmarks' satisfies '@0.0'\n")
    why = builds.spack_failure(_FakeBuild(tmp_path))
    assert why.startswith("hpc-health: spack -e /e concretize -f failed")
    assert "No version for 'osu-micro-benchmarks'" in why
    (tmp_path / "rfm_build.out").write_text("hpc-health: Spack environment /e: ...\n")
    assert builds.spack_failure(_FakeBuild(tmp_path)) is None


def test_skip_reason_of_a_dependency_reaches_its_dependents():
    fixture = {"unique_name": "OsuBuild_1", "system": "s", "partition": "p", "environ": "e",
               "display_name": "OsuBuild ~s:p+e", "fixture": True, "result": "skip",
               "fail_reason": None, "skip_reason": "Spack not found: ..."}
    dependent = {"unique_name": "OsuCollective_2", "system": "s", "partition": "p",
                 "environ": "e", "display_name": "OsuCollective %benchmark=osu_bcast",
                 "result": "skip", "fail_reason": None,
                 "dependencies_actual": [["OsuBuild_1", "s:p", "e"]]}
    failed = dict(fixture, unique_name="IorBuild_3", display_name="IorBuild ~s:p+e",
                  result="fail", fail_phase="sanity",
                  fail_reason="hpc-health: spack install failed: ==> Error: x")
    # ReFrame 4.10 gives a case whose dependency failed the result fail_deps.
    ior = dict(dependent, unique_name="IorBandwidth_4", display_name="IorBandwidth",
               result="fail_deps", dependencies_actual=[["IorBuild_3", "s:p", "e"]])
    report = {"runs": [{"testcases": [fixture, dependent, failed, ior]}]}
    got = {m.test: m for m in results.measurements(report)}
    assert got["OsuBuild"].fail_reason == "Spack not found: ..."
    assert got["OsuCollective"].fail_reason == "OsuBuild skipped: Spack not found: ..."
    assert got["IorBandwidth"].fail_reason.startswith("IorBuild failed: sanity: hpc-health:")
    assert got["IorBuild"].result == "fail"
    verdict = verdicts.judge_all([got["IorBandwidth"]])[0]
    assert verdict.verdict == verdicts.FAIL
    assert "IorBuild failed: sanity: hpc-health: spack install failed" in verdict.reason


# ----------------------------------------------------------------- settings

def _site_copy(tmp_path, name="local"):
    dst = tmp_path / name
    shutil.copytree(REPO / "site_configs" / name, dst)
    return dst


def _edit(site_dir, change):
    path = site_dir / "site.yaml"
    doc = yaml.safe_load(path.read_text())
    part = doc["partitions"]["default"]
    for section in ("osu", "stream", "ior"):
        part.setdefault(section, {})
    part["osu"].setdefault("sizes", {})
    change(doc)
    path.write_text(yaml.safe_dump(doc))


@pytest.mark.parametrize("site", ["local", "example-slurm", "example-cray"])
def test_sites_validate(site):
    s = sites.load(REPO / "site_configs" / site)
    assert s.partitions


@pytest.mark.parametrize("change,message", [
    (lambda d: d["partitions"]["default"]["osu"]["sizes"].update(latency=[8, 1000]),
     "1000 is not a power of two"),
    (lambda d: d["partitions"]["default"]["stream"].update(spec="stream stream_array_size=9"),
     "sets stream_array_size"),
    (lambda d: d["partitions"]["default"]["osu"].update(sizez={}), "unknown key"),
    (lambda d: d["partitions"]["default"]["ior"].update(block_size="16 MB"), "does not match"),
    (lambda d: d["partitions"]["default"].update(hardware="probe"), "is not valid"),
    (lambda d: d["spack"].update(develop={"stream": "/src/STREAM"}), "does not match"),
])
def test_bad_benchmark_settings_are_refused_with_their_key(tmp_path, change, message):
    site_dir = _site_copy(tmp_path)
    _edit(site_dir, change)
    with pytest.raises(ConfigError, match=message):
        sites.load(site_dir)


@pytest.fixture
def no_spack(tmp_path, monkeypatch):
    """This machine's Spack (on PATH, $SPACK_ROOT, bootstrapped) out of sight."""
    monkeypatch.setenv("HPC_HEALTH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SPACK_ROOT", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    return tmp_path / "cache"


def test_develop_setting_reaches_the_partition_extras(tmp_path, no_spack):
    site_dir = _site_copy(tmp_path)
    _edit(site_dir, lambda d: d["spack"].update(develop={"stream": "src/STREAM@5.10"}))
    extras = reframe_glue.partition_extras(site_dir, "default")["hpc_health"]
    assert extras["spack"]["develop"] == {"stream": "src/STREAM@5.10"}
    assert extras["stream"]["ntimes"] == 20


def test_a_bootstrapped_spack_brings_the_kit_defaults_and_the_site_wins(tmp_path, no_spack):
    import json as _json
    home = no_spack / "spack" / "k"
    (home / "bin").mkdir(parents=True)
    spack = home / "bin" / "spack"
    # Stand-ins: a spack, and a Python for which `import clingo` succeeds.
    python = home / "bin" / "python"
    for exe in (spack, python):
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    (home / "bootstrap.json").write_text(_json.dumps({
        "spack": str(spack), "spack_python": str(python), "builtin_repo": "/kit/builtin",
        "source_mirror": "/kit/mirror", "develop": {"stream": "/kit/STREAM@5.10",
                                                    "osu-micro-benchmarks": "/kit/osu@7.4"}}))
    site_dir = _site_copy(tmp_path)
    _edit(site_dir, lambda d: d["spack"].update(develop={"stream": "src/STREAM@5.10"}))
    spack_cfg = reframe_glue.partition_extras(site_dir, "default")["hpc_health"]["spack"]
    assert spack_cfg["builtin_repo"] == "/kit/builtin"
    assert spack_cfg["source_mirror"] == "/kit/mirror"
    assert spack_cfg["develop"] == {"stream": "src/STREAM@5.10",
                                    "osu-micro-benchmarks": "/kit/osu@7.4"}


def test_a_bootstrapped_spack_whose_python_lost_clingo_is_not_used_and_says_why(no_spack):
    """A fresh clone at the same path makes the virtualenv anew without
    clingo: every concretize would fail "bootstrapping is disabled"."""
    import json as _json

    from hpc_health.checklib import spack_build as builds
    from hpc_health.site import sites
    from hpc_health.spack import kit as spack_kit
    home = no_spack / "spack" / "k"
    (home / "bin").mkdir(parents=True)
    spack, python = home / "bin" / "spack", home / "bin" / "python"
    spack.write_text("#!/bin/sh\n")
    python.write_text("#!/bin/sh\nexit 1\n")      # `import clingo` fails
    for exe in (spack, python):
        exe.chmod(0o755)
    (home / "bootstrap.json").write_text(_json.dumps({"spack": str(spack),
                                                      "spack_python": str(python)}))
    assert spack_kit.find_spack() is None
    why = f"Python {python} is gone or has no clingo"
    assert why in builds.spack_missing_reason()
    found, how, fix = spack_kit.status(sites.load("local"))
    assert not found and why in how and fix.startswith("hpc-health spack setup --kit")


# ----------------------------------------------------------------- helpers

def _load_check(name):
    modname = f"hpc_health_check_{name}"
    if modname not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            modname, REPO / "reframe_checks" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        # ReFrame looks a check class's file up through sys.modules.
        sys.modules[modname] = module
        spec.loader.exec_module(module)
    return sys.modules[modname]


def _load_lib(name):
    module = "spack.environment" if name == "spackenv" else f"checklib.{name}"
    return importlib.import_module(f"hpc_health.{module}")


# ---- several runs in one job: marker lines split the output ----------------

def test_repeated_runs_split_at_their_markers_and_parse_alone():
    import re

    from hpc_health.checklib.launches import MARK, sections
    from hpc_health.parsers import ParseError
    from hpc_health.parsers.osu import parse_osu, value_at
    one = read("osu/osu_latency_np2_m0-4096.txt")
    job = "".join(f"{MARK} {i}\n{one}" for i in (1, 2, 3))
    runs = sections("prologue noise\n" + job, re.compile(rf"^{MARK} (\d+)$", re.MULTILINE))
    assert [m.group(1) for m, _ in runs] == ["1", "2", "3"]
    tables = [parse_osu(body) for _, body in runs]
    assert len({value_at(t, 4096, "avg_latency_us") for t in tables}) == 1

    stream = read("stream/stream_c_omp2.txt")
    marker = re.compile(r"^hpc-health: STREAM with (\d+) threads, sample (\d+)$", re.MULTILINE)
    cut = stream[: len(stream) // 2]   # the second execution was killed half-way
    runs = sections(f"hpc-health: STREAM with 2 threads, sample 1\n{stream}"
                    f"hpc-health: STREAM with 2 threads, sample 2\n{cut}", marker)
    assert parse_stream(runs[0][1])["validated"]
    with pytest.raises(ParseError):
        parse_stream(runs[1][1])


def test_a_spack_failure_says_its_first_error_on_the_line_the_table_shows():
    spackenv = _load_lib("spackenv")
    text = (DATA / "spack" /
            "spack_install_stream_FAIL_head_spack-packages_compiler-wrapper_fetch.txt").read_text()
    excerpt = spackenv._excerpt("install --fail-fast", text, 1)
    first = excerpt.splitlines()[0]
    assert first.startswith("spack install --fail-fast failed (exit 1): ==> Error: FetchError: "
                            "All fetchers failed for spack-stage-compiler-wrapper")
    # The verdict's reason is that first line.
    from hpc_health.model.results import Measurement
    m = Measurement(test="OsuBuild", check="OsuBuild", system="s", partition="p", environ="e",
                    variable=None, result="fail", fail_phase="sanity",
                    fail_reason=f"hpc-health: {excerpt}")
    (v,) = verdicts.judge_all([m])
    assert "FetchError: All fetchers failed" in v.reason


def test_spacks_error_line_is_named_not_the_errors_its_warning_quotes():
    spackenv = _load_lib("spackenv")
    text = (DATA / "spack" / "spack_spec_zlib_FAIL_python_without_clingo.txt").read_text()
    first = spackenv._excerpt("spec zlib", text, 3).splitlines()[0]
    assert first == ("spack spec zlib failed (exit 3): ==> Error: bootstrapping is currently "
                     'disabled. Use "spack bootstrap enable" to enable it')


def test_a_develop_tree_is_copied_per_environment_and_refreshed_when_it_changes(tmp_path):
    from hpc_health.spack import sources as spackenv
    src = tmp_path / "STREAM"
    src.mkdir()
    (src / "stream.c").write_text("int main(){}\n")
    env = tmp_path / "env"
    copy = spackenv.own_copy("stream", str(src), "5.10", str(env))
    assert copy == str(env / "src" / "stream-5.10")
    (Path(copy) / "stream_c.exe").write_text("built in the copy")
    assert spackenv.own_copy("stream", str(src), "5.10", str(env)) == copy
    assert (Path(copy) / "stream_c.exe").exists()        # unchanged: reused
    assert sorted(p.name for p in src.iterdir()) == ["stream.c"]  # the original untouched
    (src / "stream.c").write_text("int main(){return 0;}\n")
    spackenv.own_copy("stream", str(src), "5.10", str(env))
    assert not (Path(copy) / "stream_c.exe").exists()    # changed: copied anew


class _FakeOsuJob:
    stdout = "rfm_job.out"
    benchmark = "osu_allreduce"

    def __init__(self, stagedir, text, sizes=(8, 16)):
        self.stagedir, self.sizes = str(stagedir), list(sizes)
        (stagedir / self.stdout).write_text(text)


def test_the_validation_launch_is_checked_apart_from_the_timed_ones(tmp_path):
    """One launch with -c before the timed launches: its table must reach
    every size with each row Pass; the timed launches carry no Validation
    column and are not asked for one."""
    timed = f"{launches.MARK} 1\n" + read("osu/osu_allreduce_np2.txt")
    passed = VALIDATED_ALLREDUCE.replace("Fail", "Pass")
    check = osu_lib.OsuBase.check_validation
    check(_FakeOsuJob(tmp_path, f"{osu_lib.VALIDATION_MARK}\n{passed}{timed}"))
    with pytest.raises(SanityError, match=r"validation launch \(-c\): .*failed at sizes \[16\]"):
        check(_FakeOsuJob(tmp_path, f"{osu_lib.VALIDATION_MARK}\n{VALIDATED_ALLREDUCE}{timed}"))
    with pytest.raises(SanityError, match="did not start"):
        check(_FakeOsuJob(tmp_path, timed))
    # Cut short after its header: no size reached.
    with pytest.raises(SanityError, match="validation launch"):
        check(_FakeOsuJob(tmp_path, f"{osu_lib.VALIDATION_MARK}\n# OSU MPI Allreduce\n"))


# ------------------------------------------------- ReFrame's deprecation cost

def _read_deprecated_field(field, holder):
    return field.__get__(holder, type(holder))     # the user frame of the warning


def test_the_cheaper_deprecation_warning_points_where_reframes_own_does(monkeypatch):
    """Read through ReFrame's deprecated-field descriptor, ReFrame's original
    function and the check library's replacement name the same file and line."""
    import warnings

    from reframe.core import fields
    from reframe.core import warnings as rfm_warnings

    from hpc_health.checklib import reframe_patch

    # Importing the check library put the replacement in place.
    assert fields.user_deprecation_warning is reframe_patch.user_deprecation_warning

    class Holder:
        pass

    field = fields.DeprecatedField(fields.Field(), "'old' is deprecated; use 'new'")
    field.__set_name__(Holder, "old")
    holder = Holder()
    holder.__dict__["old"] = 42
    where = {}
    for name, fn in (("reframe", reframe_patch._ORIGINAL),
                     ("ours", reframe_patch.user_deprecation_warning)):
        monkeypatch.setattr(fields, "user_deprecation_warning", fn)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert _read_deprecated_field(field, holder) == 42
        assert [w.category for w in caught] == [rfm_warnings.ReframeDeprecationWarning]
        where[name] = (caught[0].filename, caught[0].lineno)
    assert where["ours"] == where["reframe"]
    assert where["ours"][0] == __file__
    # A warning scheduled for a later ReFrame is not given yet.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reframe_patch.user_deprecation_warning("later", from_version="99.0.0")
    assert caught == []
