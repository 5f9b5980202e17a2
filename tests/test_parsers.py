"""Parsers against real benchmark outputs (tests/data/*/MANIFEST.md says how
each was made).  Expected figures are copied by hand from those files."""

import json
from pathlib import Path

import pytest

from hpc_health import parsers
from hpc_health.parsers import ParseError
from hpc_health.parsers.darshan import bytes_moved, mpiio_enabled, parse_darshan
from hpc_health.parsers.ior import parse_ior
from hpc_health.parsers.mdtest import parse_mdtest
from hpc_health.parsers.osu import parse_osu, require_complete, value_at
from hpc_health.parsers.stream import parse_stream

DATA = Path(__file__).parent / "data"


def read(name):
    return (DATA / name).read_text()


def as_json(parsed):
    # the CLI prints the result as strict JSON; inf/nan must not leak through
    return json.loads(json.dumps(parsed, allow_nan=False))


# Every output a parser must read, and the parser that reads it.
GOOD = {
    "stream": [
        "stream/stream_c_array40M_ntimes20_omp1.txt", "stream/stream_c_default.txt",
        "stream/stream_c_omp1.txt", "stream/stream_c_omp2.txt",
        "stream/stream_c_small_array1000_omp2.txt", "stream/stream_f_omp2_unlimited_stack.txt",
    ],
    "osu": [
        "osu/osu5.3_allreduce_np2_full_stats.txt", "osu/osu5.3_bw_np2.txt",
        "osu/osu5.3_latency_np2.txt", "osu/osu_allreduce_np2.txt",
        "osu/osu_allreduce_np2_full_stats.txt",
        "osu/osu_allreduce_np4_oversub_full_stats_x50_i500.txt", "osu/osu_alltoall_np2.txt",
        "osu/osu_barrier_np2.txt", "osu/osu_bcast_np2.txt", "osu/osu_bibw_np2.txt",
        "osu/osu_bw_np2.txt", "osu/osu_latency_np2.txt", "osu/osu_latency_np2_m0-4096.txt",
        "osu/osu_latency_np2_x100_i1000_m0-4096.txt", "osu/osu_mbw_mr_np2.txt",
        "osu/osu_iallreduce_np2_full_m8-1048576.txt", "osu/osu_iallreduce_np2_m8-65536.txt",
        "osu/osu_iallreduce_np2_full_validate_mpi_int_x2_i10.txt",
    ],
    "ior": [
        "ior/ior_mpiio_collective_np2.txt", "ior/ior_posix_fpp_np2.txt",
        "ior/ior_posix_fpp_np2_json_stdout.txt", "ior/ior_posix_shared_np2.json",
        "ior/ior_posix_shared_np2.txt", "darshan/ior_mpiio_collective_np2_under_darshan_mpi.txt",
        "darshan/ior_posix_shared_np2_under_darshan_mpi_DXT.txt",
        "darshan/ior_posix_shared_np2_under_darshan_nonmpi_build.txt",
    ],
    "mdtest": ["ior/mdtest_np2_n200.txt"],
    "darshan": [
        "darshan/darshan-parser_ior_mpiio_collective_np2.txt",
        "darshan/darshan-parser_ior_posix_shared_nonmpi_rank0.txt",
        "darshan/darshan-parser_total_ior_mpiio_collective_np2.txt",
        "darshan/darshan-parser_perf_ior_mpiio_collective_np2.txt",
        "darshan/darshan-parser_perf_ior_posix_shared_np2_dxt.txt",
        "darshan/darshan-parser_file_ior_mpiio_collective_np2.txt",
    ],
}
GOOD_CASES = [(tool, name) for tool, names in GOOD.items() for name in names]


@pytest.mark.parametrize("tool,name", GOOD_CASES)
def test_registry_parser_reads_real_output_as_strict_json(tool, name):
    parsed = parsers.get(tool)(read(name))
    assert as_json(parsed) == parsed


# ---------------------------------------------------------------- STREAM

@pytest.mark.parametrize(
    "name,copy,triad,triad_times,array_size,ntimes,threads,memory_mib",
    [
        ("stream_c_array40M_ntimes20_omp1.txt", 37894.3, 36184.1,
         (0.027493, 0.026531, 0.030573), 40000000, 20, 1, 305.2),
        ("stream_c_default.txt", 44644.0, 46949.0,
         (0.005465, 0.005112, 0.006012), 10000000, 10, 2, 76.3),
        ("stream_c_omp1.txt", 34744.4, 33806.9,
         (0.007386, 0.007099, 0.007706), 10000000, 10, 1, 76.3),
        ("stream_c_omp2.txt", 41110.6, 43103.2,
         (0.005759, 0.005568, 0.006002), 10000000, 10, 2, 76.3),
        ("stream_c_small_array1000_omp2.txt", 16777.2, 25165.8,
         (0.000002, 0.000001, 0.000003), 1000, 10, 2, 0.0),
    ],
)
def test_stream_c_figures(name, copy, triad, triad_times, array_size, ntimes, threads,
                          memory_mib):
    parsed = parse_stream(read(f"stream/{name}"))
    assert parsed["version"] == "5.10" and parsed["variant"] == "c"
    assert parsed["kernels"]["copy"]["best_rate_mbs"] == copy
    assert parsed["kernels"]["triad"]["best_rate_mbs"] == triad
    t = parsed["kernels"]["triad"]
    assert (t["avg_time_s"], t["min_time_s"], t["max_time_s"]) == triad_times
    assert parsed["array_size"] == array_size
    assert parsed["bytes_per_element"] == 8
    assert parsed["offset"] == 0
    assert parsed["ntimes"] == ntimes
    assert parsed["threads_requested"] == parsed["threads_counted"] == threads
    assert parsed["memory_per_array_mib"] == memory_mib
    assert parsed["validated"] is True
    assert parsed["validation_message"] == (
        "Solution Validates: avg error less than 1.000000e-13 on all three arrays")
    assert parsed["non_finite"] == []


def test_stream_fortran_output():
    parsed = parse_stream(read("stream/stream_f_omp2_unlimited_stack.txt"))
    assert parsed["variant"] == "fortran"
    assert parsed["version"] == "5.6"  # stream.f's own revision, not 5.10
    assert parsed["kernels"]["triad"] == {
        "best_rate_mbs": 60393.1, "avg_time_s": 0.008263,
        "min_time_s": 0.007948, "max_time_s": 0.008745}
    assert parsed["array_size"] == 20000000
    assert parsed["threads_counted"] == 2
    assert parsed["total_memory_mib"] == 457.0
    assert parsed["memory_per_array_mib"] is None
    assert parsed["validated"] is True


def test_stream_non_finite_rate_is_a_string_and_listed():
    # STREAM prints "inf" when a kernel beats the clock tick; made from a real file
    text = read("stream/stream_c_small_array1000_omp2.txt").replace(
        "Copy:           16777.2", "Copy:               inf")
    parsed = parse_stream(text)
    assert parsed["kernels"]["copy"]["best_rate_mbs"] == "inf"
    assert float(parsed["kernels"]["copy"]["best_rate_mbs"]) == float("inf")
    assert parsed["non_finite"] == ["copy.best_rate_mbs"]
    as_json(parsed)


def test_stream_failed_validation_is_false_not_an_error():
    text = read("stream/stream_c_omp2.txt").replace(
        "Solution Validates: avg error less than 1.000000e-13 on all three arrays",
        "Failed Validation on array a[], AvgRelAbsErr > epsilon (1.000000e-13)")
    parsed = parse_stream(text)
    assert parsed["validated"] is False
    assert parsed["validation_message"].startswith("Failed Validation on array a[]")


@pytest.mark.parametrize("kernel", ["Copy", "Scale", "Add", "Triad"])
def test_stream_missing_kernel_row(kernel):
    lines = read("stream/stream_c_omp2.txt").splitlines(keepends=True)
    text = "".join(line for line in lines if not line.startswith(kernel + ":"))
    with pytest.raises(ParseError, match=kernel):
        parse_stream(text)


def test_stream_without_validation_line_is_truncated():
    text = read("stream/stream_c_omp2.txt").replace(
        "Solution Validates: avg error less than 1.000000e-13 on all three arrays\n", "")
    with pytest.raises(ParseError, match="validation"):
        parse_stream(text)


def test_stream_segfault():
    with pytest.raises(ParseError, match="Segmentation fault"):
        parse_stream(read("stream/stream_f_omp2_segfault_8MiB_stack.txt"))


# ---------------------------------------------------------------- OSU

@pytest.mark.parametrize(
    "name,benchmark,version,kind,columns,first_size,max_size,probe",
    [
        ("osu_latency_np2.txt", "OSU MPI Latency Test", "7.4", "latency",
         ["size", "avg_latency_us"], 1, 4194304, (8192, "avg_latency_us", 2.22)),
        ("osu5.3_latency_np2.txt", "OSU MPI Latency Test", "5.3", "latency",
         ["size", "avg_latency_us"], 0, 4194304, (0, "avg_latency_us", 0.11)),
        ("osu_latency_np2_m0-4096.txt", "OSU MPI Latency Test", "7.4", "latency",
         ["size", "avg_latency_us"], 1, 4096, (4096, "avg_latency_us", 1.96)),
        ("osu_latency_np2_x100_i1000_m0-4096.txt", "OSU MPI Latency Test", "7.4", "latency",
         ["size", "avg_latency_us"], 1, 4096, (4096, "avg_latency_us", 1.93)),
        ("osu_bw_np2.txt", "OSU MPI Bandwidth Test", "7.4", "bandwidth",
         ["size", "bandwidth_mbs"], 1, 4194304, (4194304, "bandwidth_mbs", 14240.66)),
        ("osu5.3_bw_np2.txt", "OSU MPI Bandwidth Test", "5.3", "bandwidth",
         ["size", "bandwidth_mbs"], 1, 4194304, (4096, "bandwidth_mbs", 2416.46)),
        ("osu_bibw_np2.txt", "OSU MPI Bi-Directional Bandwidth Test", "7.4", "bibw",
         ["size", "bandwidth_mbs"], 1, 4194304, (1048576, "bandwidth_mbs", 27217.68)),
        ("osu_mbw_mr_np2.txt", "OSU MPI Multiple Bandwidth / Message Rate Test", "7.4",
         "mbw_mr", ["size", "bandwidth_mbs", "messages_per_s"], 1, 4194304,
         (1, "messages_per_s", 13869475.24)),
        ("osu_allreduce_np2.txt", "OSU MPI Allreduce Latency Test", "7.4", "collective",
         ["size", "avg_latency_us"], 1, 1048576, (1048576, "avg_latency_us", 113.91)),
        ("osu_allreduce_np2_full_stats.txt", "OSU MPI Allreduce Latency Test", "7.4",
         "collective",
         ["size", "avg_latency_us", "min_latency_us", "max_latency_us", "iterations"],
         1, 1048576, (8192, "max_latency_us", 4.09)),
        ("osu_allreduce_np4_oversub_full_stats_x50_i500.txt",
         "OSU MPI Allreduce Latency Test", "7.4", "collective",
         ["size", "avg_latency_us", "min_latency_us", "max_latency_us", "iterations"],
         1, 65536, (65536, "iterations", 500)),
        ("osu5.3_allreduce_np2_full_stats.txt", "OSU MPI Allreduce Latency Test", "5.3",
         "collective",
         ["size", "avg_latency_us", "min_latency_us", "max_latency_us", "iterations"],
         4, 1048576, (65536, "iterations", 100)),
        ("osu_alltoall_np2.txt", "OSU MPI All-to-All Personalized Exchange Latency Test",
         "7.4", "collective", ["size", "avg_latency_us"], 1, 1048576,
         (262144, "avg_latency_us", 33.30)),
        ("osu_bcast_np2.txt", "OSU MPI Broadcast Latency Test", "7.4", "collective",
         ["size", "avg_latency_us"], 1, 1048576, (16, "avg_latency_us", 0.15)),
        # Non-blocking: the time overall, the computation, the collective alone
        # (Pure Comm.) and the share of it hidden behind the computation.
        ("osu_iallreduce_np2_m8-65536.txt", "OSU MPI Non-blocking Allreduce Latency Test",
         "7.4", "collective", ["size", "overall_us", "compute_us", "pure_comm_us", "overlap_pct"],
         8, 65536, (16384, "overlap_pct", 3.82)),
        ("osu_iallreduce_np2_full_m8-1048576.txt",
         "OSU MPI Non-blocking Allreduce Latency Test", "7.4", "collective",
         ["size", "overall_us", "compute_us", "coll_init_us", "mpi_test_us", "mpi_wait_us",
          "pure_comm_us", "min_comm_us", "max_comm_us", "overlap_pct"],
         8, 1048576, (1048576, "pure_comm_us", 1816.35)),
        ("osu_iallreduce_np2_full_validate_mpi_int_x2_i10.txt",
         "OSU MPI Non-blocking Allreduce Latency Test", "7.4", "collective",
         ["size", "overall_us", "compute_us", "coll_init_us", "mpi_test_us", "mpi_wait_us",
          "pure_comm_us", "min_comm_us", "max_comm_us", "overlap_pct", "validation"],
         8, 1048576, (8, "max_comm_us", 0.52)),
    ],
)
def test_osu_tables(name, benchmark, version, kind, columns, first_size, max_size, probe):
    parsed = parse_osu(read(f"osu/{name}"))
    assert parsed["benchmark"] == benchmark
    assert parsed["version"] == version
    assert parsed["kind"] == kind
    assert parsed["columns"] == columns
    assert parsed["rows"][0]["size"] == first_size
    assert parsed["max_size"] == max_size
    size, column, expected = probe
    assert value_at(parsed, size, column) == expected
    assert require_complete(parsed, max_size) is parsed
    assert all(list(row) == columns for row in parsed["rows"])


def test_osu_header_details():
    v7 = parse_osu(read("osu/osu_latency_np2.txt"))
    assert v7["datatype"] == "MPI_CHAR" and v7["pairs"] is None
    assert len(v7["rows"]) == 23
    v5 = parse_osu(read("osu/osu5.3_latency_np2.txt"))
    assert v5["datatype"] is None and len(v5["rows"]) == 24
    mbw = parse_osu(read("osu/osu_mbw_mr_np2.txt"))
    assert (mbw["pairs"], mbw["window_size"]) == (1, 64)
    full = parse_osu(read("osu/osu_allreduce_np2_full_stats.txt"))
    assert full["rows"][0] == {"size": 1, "avg_latency_us": 0.22, "min_latency_us": 0.21,
                               "max_latency_us": 0.24, "iterations": 1000}
    assert isinstance(full["rows"][0]["iterations"], int)


def test_osu_barrier_has_no_size():
    parsed = parse_osu(read("osu/osu_barrier_np2.txt"))
    assert parsed["kind"] == "barrier"
    assert parsed["columns"] == ["avg_latency_us"]
    assert parsed["rows"] == [{"avg_latency_us": 0.14}]
    assert parsed["max_size"] is None
    with pytest.raises(ParseError, match="no message sizes"):
        require_complete(parsed, 8)


def test_osu_value_at_unknown_size_or_column():
    parsed = parse_osu(read("osu/osu_latency_np2_m0-4096.txt"))
    with pytest.raises(ParseError, match="no row for size 0"):
        value_at(parsed, 0, "avg_latency_us")  # 7.4 silently starts at 1 byte
    with pytest.raises(ParseError, match="no column"):
        value_at(parsed, 1, "bandwidth_mbs")


def test_osu_require_complete_catches_short_table():
    parsed = parse_osu(read("osu/osu_latency_np2_m0-4096.txt"))
    with pytest.raises(ParseError, match="stops at 4096 bytes"):
        require_complete(parsed, 4194304)


@pytest.mark.parametrize(
    "name,match",
    [
        ("osu_latency_np1_FAIL.txt", "This test requires exactly two processes"),
        ("osu5.3_latency_np1_FAIL.txt", "This test requires exactly two processes"),
        ("osu_latency_np2_f_invalid_option_FAIL.txt", r"Invalid option \[-f\]"),
        ("osu_latency_np2_m8192-16_min_gt_max_empty.txt", "no result rows"),
        ("osu_latency_version.txt", "no OSU result table"),
        ("osu_latency_help.txt", "no OSU result table"),
        ("osu_hello_np2.txt", "no OSU result table"),
        ("osu_init_np2.txt", "no OSU result table"),
        # -c on MPI_CHAR: OSU 7.4's expected sum overflows a char from 16 B.
        ("osu_iallreduce_np2_full_validate_mpi_char_FAIL.txt", "OSU run was aborted"),
    ],
)
def test_osu_failures(name, match):
    with pytest.raises(ParseError, match=match):
        parse_osu(read(f"osu/{name}"))


@pytest.mark.parametrize("name", [n for n in GOOD["osu"] if "barrier" not in n])
def test_osu_half_file_never_passes_as_complete(name):
    # Cut mid-line, parse_osu refuses; cut on a line boundary, the table is a
    # plausible shorter one and require_complete is what refuses it.
    text = read(name)
    full = parse_osu(text)
    half = text[: len(text) // 2]
    with pytest.raises(ParseError):
        require_complete(parse_osu(half), full["max_size"])
    on_line = half[: half.rfind("\n") + 1]
    with pytest.raises(ParseError):
        require_complete(parse_osu(on_line), full["max_size"])


def test_osu_row_cut_inside_a_number():
    text = read("osu/osu_latency_np2.txt")
    cut = text[: text.index("328.88") + 5]  # "328.8"
    with pytest.raises(ParseError, match="middle of a line"):
        parse_osu(cut)


# ---------------------------------------------------------------- IOR

@pytest.mark.parametrize(
    "name,fmt,api,fpp,collective,write,read_,write_open,read_close",
    [
        ("ior/ior_posix_shared_np2.txt", "text", "POSIX", False, False,
         (4860.80, 0.02633), (38752.05, 0.00330), 0.000141, 0.000010),
        ("ior/ior_posix_fpp_np2.txt", "text", "POSIX", True, False,
         (7769.25, 0.01648), (36116.44, 0.00354), 0.000240, 0.000140),
        ("ior/ior_mpiio_collective_np2.txt", "text", "MPIIO", False, True,
         (3034.54, 0.04218), (30564.81, 0.00419), 0.001865, 0.000212),
        ("ior/ior_posix_fpp_np2_json_stdout.txt", "json", "POSIX", True, False,
         (9179.0065, 0.0139), (33040.2432, 0.0039), 0.0003, 0.0),
        ("ior/ior_posix_shared_np2.json", "json", "POSIX", False, False,
         (5312.2926, 0.0241), (37882.5086, 0.0034), 0.0001, 0.0001),
    ],
)
def test_ior_figures(name, fmt, api, fpp, collective, write, read_, write_open, read_close):
    parsed = parse_ior(read(name))
    assert parsed["format"] == fmt
    assert parsed["version"] == "4.1.0+dev"
    assert parsed["parameters"] == {
        "api": api, "blockSize": 16777216, "transferSize": 1048576, "segmentCount": 4,
        "numTasks": 2, "tasksPerNode": 2, "repetitions": 1, "nodes": 1,
        "filePerProc": fpp, "collective": collective,
        "testFileName": parsed["parameters"]["testFileName"],
    }
    assert parsed["aggregate_bytes"] == 134217728  # "aggregate filesize : 128 MiB"
    ops = parsed["operations"]
    assert set(ops) == {"write", "read"}
    for op, (bw, mean_time) in (("write", write), ("read", read_)):
        assert ops[op]["bw_max_mib"] == ops[op]["bw_min_mib"] == ops[op]["bw_mean_mib"] == bw
        assert ops[op]["bw_stddev_mib"] == 0.0
        assert ops[op]["mean_time_s"] == mean_time
        assert ops[op]["aggregate_mib"] == 128.0
        assert ops[op]["iterations"] == 1
    assert ops["write"]["open_time_s"] == write_open
    assert ops["read"]["close_time_s"] == read_close


def test_ior_text_iteration_figures():
    parsed = parse_ior(read("ior/ior_mpiio_collective_np2.txt"))
    write = parsed["operations"]["write"]
    assert write["iops"] == 5542.0  # results table; the summary OPs differ
    assert write["ops_max"] == 3034.54
    assert (write["latency_s"], write["wrrd_time_s"], write["close_time_s"],
            write["total_time_s"]) == (0.000361, 0.023097, 0.024623, 0.042181)
    assert parsed["parameters"]["testFileName"] == "/tmp/iorlab/mpiio/testfile"
    assert parsed["command_line"].endswith("-o /tmp/iorlab/mpiio/testfile")


def test_ior_json_after_launcher_noise():
    text = ("[vm:1234] mca_base_component_repository_open: unable to open mca_foo\n"
            + read("ior/ior_posix_shared_np2.json"))
    assert parse_ior(text)["operations"]["read"]["bw_mean_mib"] == 37882.5086


@pytest.mark.parametrize(
    "name,match",
    [
        ("ior_bad_option_FAIL.txt", r"ERROR: Unrecognized I/O API"),
        ("ior_posix_nonwritable_dir_as_nobody_FAIL.txt", r"Permission denied"),
        ("ior_posix_shared_np2_json_summaryFile.stdout.txt",
         r"/tmp/iorlab/json/ior_posix_shared_np2\.json"),
    ],
)
def test_ior_failures(name, match):
    with pytest.raises(ParseError, match=match):
        parse_ior(read(f"ior/{name}"))


def test_ior_text_without_finished_line():
    text = read("ior/ior_posix_shared_np2.txt")
    text = text[: text.index("Finished")]
    with pytest.raises(ParseError, match="Finished"):
        parse_ior(text)


# ---------------------------------------------------------------- mdtest

def test_mdtest_figures():
    parsed = parse_mdtest(read("ior/mdtest_np2_n200.txt"))
    assert (parsed["tasks"], parsed["nodes"], parsed["items"], parsed["iterations"]) == (
        2, 1, 400, 1)
    assert parsed["version"] == "4.1.0+dev"
    assert list(parsed["rates"]) == [
        "directory_creation", "directory_stat", "directory_rename", "directory_removal",
        "file_creation", "file_stat", "file_read", "file_removal",
        "tree_creation", "tree_removal"]
    assert parsed["rates"]["file_creation"] == {
        "max": 13246.809, "min": 13246.809, "mean": 13246.809, "stddev": 0.0}
    assert parsed["rates"]["directory_stat"]["mean"] == 1136667.751
    assert parsed["rates"]["tree_removal"]["max"] == 1024.5
    assert "times" not in parsed


def test_mdtest_without_summary():
    text = read("ior/mdtest_np2_n200.txt")
    text = text[: text.index("SUMMARY rate")] + "-- finished at 11/22/2026 02:57:37 --\n"
    with pytest.raises(ParseError, match="SUMMARY rate"):
        parse_mdtest(text)


# ---------------------------------------------------------------- Darshan

BASE_MPIIO = "darshan/darshan-parser_ior_mpiio_collective_np2.txt"
TOTAL_MPIIO = "darshan/darshan-parser_total_ior_mpiio_collective_np2.txt"
PERF_MPIIO = "darshan/darshan-parser_perf_ior_mpiio_collective_np2.txt"
FILE_MPIIO = "darshan/darshan-parser_file_ior_mpiio_collective_np2.txt"
BASE_NONMPI = "darshan/darshan-parser_ior_posix_shared_nonmpi_rank0.txt"
PERF_DXT = "darshan/darshan-parser_perf_ior_posix_shared_np2_dxt.txt"


@pytest.mark.parametrize(
    "name,view", [(BASE_MPIIO, "base"), (TOTAL_MPIIO, "total"),
                  (PERF_MPIIO, "perf"), (FILE_MPIIO, "file")])
def test_darshan_header_and_view(name, view):
    parsed = parse_darshan(read(name))
    assert parsed["views"] == [view]
    header = parsed["header"]
    assert header["log_version"] == "3.41"
    assert header["lib_version"] == "3.5.0"
    assert header["nprocs"] == 2
    assert header["jobid"] == 28251
    assert header["run_time_s"] == 0.1064
    assert (header["start_time"], header["end_time"]) == (1795316037, 1795316038)
    assert header["exe"].startswith("/opt/hpc/envs/bench/view/bin/ior -a MPIIO -c")
    assert parsed["modules"] == ["POSIX", "MPI-IO", "STDIO", "HEATMAP"]
    assert parsed["mpiio"] is True and mpiio_enabled(parsed)


def test_darshan_base_sums_records():
    parsed = parse_darshan(read(BASE_MPIIO))
    posix, mpiio, stdio = (parsed["base"][m] for m in ("POSIX", "MPI-IO", "STDIO"))
    assert set(parsed["base"]) == {"POSIX", "MPI-IO", "STDIO"}
    assert posix["records"] == 7
    # the 128 MiB test file (rank -1) plus 120 + 80 bytes of Open MPI .sm files
    assert (posix["bytes_read"], posix["bytes_written"]) == (134217728, 134217928)
    assert (mpiio["bytes_read"], mpiio["bytes_written"]) == (134217728, 134217728)
    assert (stdio["bytes_read"], stdio["bytes_written"]) == (0, 2264)
    assert mpiio["meta_time_s"] == 0.085619
    assert (mpiio["fastest_rank"], mpiio["fastest_rank_time_s"]) == (1, 0.066192)
    assert (mpiio["slowest_rank"], mpiio["slowest_rank_time_s"]) == (0, 0.072341)
    assert mpiio["slowest_rank_bytes"] == 134217728
    # the heaviest shared POSIX file is the IOR test file, not the 80-byte .sm file
    assert [f["file"] for f in posix["shared_files"]] == [
        "/tmp/darshanlab/data/testfile",
        "/tmp/ompi.vm.0/pid.28247/1/testfile_cid-4-28251.sm"]
    assert (posix["slowest_rank"], posix["slowest_rank_time_s"]) == (0, 0.06662)
    assert stdio["shared_files"] == [] and stdio["slowest_rank"] is None
    assert bytes_moved(parsed, "MPI-IO") == {
        "read": 134217728, "written": 134217728, "total": 268435456}


def test_darshan_views_of_one_log_agree():
    base = parse_darshan(read(BASE_MPIIO))
    total = parse_darshan(read(TOTAL_MPIIO))
    perf = parse_darshan(read(PERF_MPIIO))
    files = parse_darshan(read(FILE_MPIIO))
    for module in ("POSIX", "MPI-IO", "STDIO"):
        b, t = base["base"][module], total["total"][module]
        assert (b["bytes_read"], b["bytes_written"]) == (t["bytes_read"], t["bytes_written"])
        for key in ("read_time_s", "write_time_s", "meta_time_s"):
            # darshan sums unrounded values; base rows are printed to 1e-6 each
            assert b[key] == pytest.approx(t[key], abs=1e-6 * b["records"])
        moved = bytes_moved(base, module)["total"]
        assert moved == perf["perf"][module]["total_bytes"]
        assert moved == files["file"][module]["total"]["bytes"]
        assert bytes_moved(perf, module)["total"] == moved


def test_darshan_total_keeps_darshans_accumulated_rank_fields():
    total = parse_darshan(read(TOTAL_MPIIO))["total"]
    # several shared POSIX files: darshan's accumulator prints -1 ("unknown")
    assert total["POSIX"]["fastest_rank"] is None
    assert total["POSIX"]["counters"]["POSIX_FASTEST_RANK"] == -1
    assert total["POSIX"]["counters"]["POSIX_OPENS"] == 30
    assert total["MPI-IO"]["slowest_rank_time_s"] == 0.072341
    assert total["STDIO"]["slowest_rank_bytes"] == 2264


def test_darshan_perf_figures():
    perf = parse_darshan(read(PERF_MPIIO))["perf"]
    assert perf["POSIX"] == {
        "total_bytes": 268435656, "slowest_rank_io_time": 0.002147,
        "slowest_rank_meta_only_time": 0.002089, "slowest_rank_rw_only_time": 0.000058,
        "slowest_rank": 0, "time_by_slowest": 0.066924,
        "agg_time_by_slowest": 0.069071, "agg_perf_by_slowest": 3706.356593}
    assert perf["MPI-IO"]["agg_perf_by_slowest"] == 3538.808789
    dxt = parse_darshan(read(PERF_DXT))
    assert dxt["modules"] == ["POSIX", "STDIO", "DXT_POSIX", "HEATMAP"]
    assert dxt["mpiio"] is False  # IOR -a POSIX: no MPI-IO records although MPI build
    assert dxt["perf"]["POSIX"]["total_bytes"] == 268435456
    assert set(dxt["perf"]) == {"POSIX", "STDIO"}


def test_darshan_file_counts():
    files = parse_darshan(read(FILE_MPIIO))["file"]
    assert files["POSIX"]["shared"] == {"files": 2, "bytes": 268435536,
                                        "max_byte_offset": 134217727}
    assert files["MPI-IO"]["total"] == {"files": 1, "bytes": 268435456,
                                        "max_byte_offset": None}  # darshan printed -1


def test_darshan_nonmpi_log_is_one_process():
    parsed = parse_darshan(read(BASE_NONMPI))
    assert parsed["header"]["nprocs"] == 1
    assert parsed["mpiio"] is False and not mpiio_enabled(parsed)
    assert parsed["modules"] == ["POSIX", "STDIO", "HEATMAP"]
    posix = parsed["base"]["POSIX"]
    assert posix["records"] == 8
    assert (posix["bytes_read"], posix["bytes_written"]) == (67108864, 67108864)
    assert posix["shared_files"] == []
    with pytest.raises(ParseError, match="no MPI-IO data"):
        bytes_moved(parsed, "MPI-IO")


@pytest.mark.parametrize(
    "ior_name,darshan_name,module,share",
    [
        ("darshan/ior_mpiio_collective_np2_under_darshan_mpi.txt", BASE_MPIIO, "MPI-IO", 1),
        # per-process logs of the non-MPI build: rank 0 saw its half only
        ("darshan/ior_posix_shared_np2_under_darshan_nonmpi_build.txt", BASE_NONMPI,
         "POSIX", 2),
    ],
)
def test_ior_bytes_match_what_darshan_saw(ior_name, darshan_name, module, share):
    ior = parse_ior(read(ior_name))
    moved = bytes_moved(parse_darshan(read(darshan_name)), module)
    assert moved["written"] * share == ior["aggregate_bytes"]
    assert moved["read"] * share == ior["aggregate_bytes"]


def test_ior_bytes_match_darshan_perf():
    ior = parse_ior(read("darshan/ior_posix_shared_np2_under_darshan_mpi_DXT.txt"))
    perf = parse_darshan(read(PERF_DXT))
    assert bytes_moved(perf, "POSIX")["total"] == 2 * ior["aggregate_bytes"]


@pytest.mark.parametrize(
    "name,match",
    [
        ("darshan-parser_nonexistent_log_FAIL.txt",
         "darshan_log_open failed to open darshan log file"),
        ("darshan-parser_version.txt", "not darshan-parser output"),
        ("darshan-dxt-parser_ior_posix_shared_np2_dxt.txt", "darshan-dxt-parser"),
        ("pydarshan_cli_info_ior_mpiio_collective_np2.txt", "not darshan-parser output"),
    ],
)
def test_darshan_failures(name, match):
    with pytest.raises(ParseError, match=match):
        parse_darshan(read(f"darshan/{name}"))


def test_darshan_incomplete_module_is_refused():
    text = read(PERF_MPIIO).replace(
        "# performance\n",
        "# *WARNING*: The POSIX module contains incomplete data!\n# performance\n", 1)
    with pytest.raises(ParseError, match="incomplete"):
        parse_darshan(text)


def test_darshan_record_cut_short():
    lines = read(BASE_MPIIO).splitlines(keepends=True)
    last_posix = max(i for i, line in enumerate(lines) if line.startswith("POSIX\t"))
    del lines[last_posix]  # the final record of POSIX loses a counter
    with pytest.raises(ParseError, match="unequal counter sets"):
        parse_darshan("".join(lines))


# ---------------------------------------------------------------- truncation

SELF_CHECKING = [case for case in GOOD_CASES if case[0] != "osu"]  # OSU: see above


@pytest.mark.parametrize("tool,name", SELF_CHECKING)
def test_half_a_file_is_an_error(tool, name):
    text = read(name)
    with pytest.raises(ParseError):
        parsers.get(tool)(text[: len(text) // 2])


def _cuts(text, count=60):
    """Offsets to cut at: line ends and mid-line points, spread over the text."""
    ends = [i + 1 for i, char in enumerate(text) if char == "\n"][:-1]
    step = max(1, len(ends) // count)
    picked = ends[::step]
    return sorted(set(picked + [max(0, end - 3) for end in picked]))


@pytest.mark.parametrize("tool,name", SELF_CHECKING)
def test_any_prefix_is_an_error_or_the_full_result(tool, name):
    # "never a partial figure": output cut anywhere either fails or still holds
    # everything (a cut in the trailer after the last figure)
    parse = parsers.get(tool)
    text = read(name)
    full = parse(text)
    for cut in _cuts(text):
        try:
            got = parse(text[:cut])
        except ParseError:
            continue
        assert got == full, f"{name} cut at {cut} gave a different result"


def test_darshan_all_views_in_one_output():
    # --all prints, per module, the records, the totals, the file counts and
    # the perf block; no fixture holds it, so it is assembled from the four
    # real outputs of the same log, in that order
    stars = "# *******************************************************\n"
    separator = "\n" + stars + "# "

    def sections(name):
        head, *rest = read(name).split(separator)
        return head, {part.split(" module data")[0]: part for part in rest}

    head, base = sections(BASE_MPIIO)
    others = [sections(name)[1] for name in (TOTAL_MPIIO, FILE_MPIIO, PERF_MPIIO)]
    text = head
    for module, part in base.items():
        # each other view's section without its "<MODULE> module data" title
        bodies = [view[module].split(stars, 1)[1] for view in others if module in view]
        text += separator + part.rstrip("\n") + "\n" + "".join(bodies)
    parsed = parse_darshan(text if text.endswith("\n") else text + "\n")
    assert parsed["views"] == ["base", "total", "perf", "file"]
    for name, view in ((BASE_MPIIO, "base"), (TOTAL_MPIIO, "total"),
                       (PERF_MPIIO, "perf"), (FILE_MPIIO, "file")):
        assert parsed[view] == parse_darshan(read(name))[view]

