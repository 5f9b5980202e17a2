"""Real builds and runs of our MPI kernels (kernels/), and their parsers.

Everything runs under Open MPI's mpirun with 2 to 6 ranks on whatever cores
the machine has, so iteration counts and sizes are kept small.
"""

import json
import subprocess

import pytest

from bench import local_mpi as mpi_env
from hpc_health.parsers import ParseError
from hpc_health.parsers.kernels import parse_barrier, parse_halo

pytestmark = pytest.mark.slow

STRATEGIES = ["BSBR", "SERE", "ISBR", "ISIR", "IRIS"]
# 1 and 1000 are not multiples of 8 (the pattern's tail path); 70000 is far
# above Open MPI's eager limit, so the blocking strategies really block.
SIZES = [1, 8, 1000, 70000]
DEFAULT_SWEEP = [8, 32, 128, 512, 2048, 8192, 32768, 131072, 524288, 1048576]
# What MPI_Dims_create makes of (ranks, dims).
GRIDS = {
    (2, 1): [2], (2, 2): [2, 1], (2, 3): [2, 1, 1],
    (3, 1): [3], (3, 2): [3, 1], (3, 3): [3, 1, 1],
    (4, 1): [4], (4, 2): [2, 2], (4, 3): [2, 2, 1],
}
# A hang (deadlock) must fail the test, not the whole CI job.
TIMEOUT = 120


@pytest.fixture(scope="module")
def bindir(tmp_path_factory):
    missing = mpi_env.missing_tools()
    if missing:
        pytest.skip(f"needs {', '.join(missing)} on PATH to build and run the MPI kernels")
    return mpi_env.build_kernels(tmp_path_factory.mktemp("kernels"))


def mpirun(bindir, nranks, program, *args):
    cmd = ["mpirun", "-np", str(nranks), str(bindir / program), *map(str, args)]
    return subprocess.run(cmd, env=mpi_env.mpi_env(), capture_output=True, text=True, timeout=TIMEOUT)


def singleton(bindir, program, *args):
    # Without mpirun (an MPI singleton): mpirun adds about a second to every
    # job that exits non-zero, and option errors need no second rank.
    cmd = [str(bindir / program), *map(str, args)]
    return subprocess.run(cmd, env=mpi_env.mpi_env(), capture_output=True, text=True, timeout=TIMEOUT)


def ok(proc):
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def halo_output(bindir):
    return ok(mpirun(bindir, 2, "halo", "--sizes", "8,4096", "--warmup", 1, "--iters", 3, "--json")).stdout


@pytest.fixture(scope="module")
def barrier_outputs(bindir):
    return {n: ok(mpirun(bindir, n, "barrier", "--warmup", 5, "--iters", 50, "--json")).stdout
            for n in (2, 3, 4)}


def test_build_is_warning_free(bindir):
    log = (bindir.parent.parent / "build.log").read_text()
    # Compiler diagnostics only ("file:line:col: warning: ..."), not CMake's
    # own "CMake Warning" notes, which depend on the CMake version.
    assert "warning:" not in log, log
    assert (bindir / "halo").is_file() and (bindir / "barrier").is_file()


# ---- halo -------------------------------------------------------------------

def check_halo(out, nranks, dims, strategies, sizes):
    assert out["verification"] == "passed" and out["errors"] == 0
    assert out["ranks"] == nranks and out["dims"] == dims
    assert sorted(out["results"]) == sorted(strategies)
    for strategy in strategies:
        assert sorted(out["results"][strategy]) == sorted(sizes), strategy
        for size, t in out["results"][strategy].items():
            assert 0 <= t["min"] <= t["mean"] <= t["max"], (strategy, size, t)
            assert t["max"] > 0, (strategy, size, t)


@pytest.mark.parametrize("nranks", [2, 3, 4])
@pytest.mark.parametrize("dims", [1, 2, 3])
def test_halo_all_strategies_verify(bindir, nranks, dims):
    proc = ok(mpirun(bindir, nranks, "halo", "--dims", dims, "--strategy", "all",
                     "--sizes", ",".join(map(str, SIZES)), "--warmup", 1, "--iters", 3, "--json"))
    out = parse_halo(proc.stdout)
    assert out["grid"] == GRIDS[nranks, dims]
    check_halo(out, nranks, dims, STRATEGIES, SIZES)
    assert "FAILED" not in proc.stderr


@pytest.mark.parametrize("nranks,dims,grid", [(5, 1, [5]), (6, 2, [3, 2])])
def test_halo_odd_extent_does_not_deadlock(bindir, nranks, dims, grid):
    # BSBR's third phase only exists on odd rings of 3 or more; 3 ranks cover
    # the smallest, these the general case (and an odd x even grid).
    proc = ok(mpirun(bindir, nranks, "halo", "--dims", dims, "--strategy", "BSBR,SERE",
                     "--sizes", "8,200000", "--warmup", 1, "--iters", 2, "--json"))
    out = parse_halo(proc.stdout)
    assert out["grid"] == grid
    check_halo(out, nranks, dims, ["BSBR", "SERE"], [8, 200000])


def test_halo_default_sweep(bindir):
    proc = ok(mpirun(bindir, 2, "halo", "--strategy", "SERE", "--warmup", 0, "--iters", 1, "--json"))
    doc = json.loads(proc.stdout)
    assert [r["size_bytes"] for r in doc["results"]] == DEFAULT_SWEEP
    assert doc["periodic"] is True and doc["warmup"] == 0 and doc["iters"] == 1
    assert parse_halo(proc.stdout)["verification"] == "passed"


def test_halo_table(bindir):
    proc = ok(mpirun(bindir, 2, "halo", "--sizes", "8,64", "--warmup", 0, "--iters", 2))
    lines = proc.stdout.splitlines()
    header = [line for line in lines if line.startswith("#")]
    rows = [line.split() for line in lines if line.strip() and not line.startswith("#")]
    assert header and any("passed" in line for line in header)
    assert [(r[0], int(r[1])) for r in rows] == [(s, z) for s in STRATEGIES for z in (8, 64)]
    for r in rows:
        assert len(r) == 5 and all(float(x) >= 0 for x in r[2:])


@pytest.mark.parametrize("nranks,dims,arg,rank", [(2, 1, "--corrupt-one-byte", 0),
                                                   (3, 2, "--corrupt-one-byte=2", 2)])
def test_halo_corruption_is_caught(bindir, nranks, dims, arg, rank):
    proc = mpirun(bindir, nranks, "halo", "--dims", dims, "--strategy", "ISIR", "--sizes", "64",
                  "--warmup", 1, "--iters", 2, "--json", arg)
    assert proc.returncode == 1, proc.stderr
    assert f"verification FAILED: rank {rank}, direction -x" in proc.stderr
    assert "size 64 bytes" in proc.stderr and "strategy ISIR" in proc.stderr
    out = parse_halo(proc.stdout)
    assert out["verification"] == "failed" and out["errors"] == 1


@pytest.mark.parametrize("args", [
    ["--bogus"], ["--dims", "0"], ["--dims", "4"], ["--dims"], ["--strategy", "FOO"],
    ["--sizes", "0"], ["--sizes", "-8"], ["--sizes", "abc"], ["--sizes", "8,,16"],
    ["--iters", "x"], ["--warmup", "-1"], ["stray"], ["--json=1"], ["-x"],
    ["--corrupt-one-byte", "1"], ["--corrupt-one-byte=9"],
])
def test_halo_bad_options(bindir, args):
    proc = singleton(bindir, "halo", *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("halo: ") and "usage: halo" in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("args,message", [
    (["--dim"], "halo: --dims needs a value"),
    (["--json=1"], "halo: --json takes no value, got '--json=1'"),
    (["--s", "8"], "halo: unknown or ambiguous option '--s'"),   # --sizes, --samples, --strategy
    (["--iters", "2", "stray"], "halo: unexpected argument 'stray'"),
])
def test_halo_option_messages(bindir, args, message):
    proc = singleton(bindir, "halo", *args)
    assert proc.returncode == 2 and proc.stderr.splitlines()[0] == message, proc.stderr


def test_halo_abbreviated_options(bindir):
    doc = json.loads(ok(singleton(bindir, "halo", "--siz", "8", "--strat=SERE", "--it", "2",
                                  "--warm", "0", "--js")).stdout)
    assert doc["iters"] == 2 and doc["warmup"] == 0
    assert [(r["strategy"], r["size_bytes"]) for r in doc["results"]] == [("SERE", 8)]


@pytest.mark.parametrize("program,args", [("halo", ["--dims", "4"]), ("barrier", ["--iters", "0"])])
def test_bad_options_under_mpirun(bindir, program, args):
    proc = mpirun(bindir, 3, program, *args)
    # mpirun reports the first non-zero status; every rank exits 2 (they
    # all parse the same argv), and only rank 0 prints the usage.
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count(f"usage: {program}") == 1
    assert proc.stdout == ""


@pytest.mark.parametrize("program", ["halo", "barrier"])
def test_help(bindir, program):
    proc = ok(mpirun(bindir, 2, program, "--help"))
    assert proc.stdout.count(f"usage: {program}") == 1


# ---- barrier ----------------------------------------------------------------

@pytest.mark.parametrize("nranks,sizes", [(2, [1, 2]), (3, [1, 2, 3]), (4, [1, 2, 4])])
def test_barrier_sizes(barrier_outputs, nranks, sizes):
    doc = json.loads(barrier_outputs[nranks])
    assert doc["program"] == "barrier" and doc["iters"] == 50 and doc["warmup"] == 5
    out = parse_barrier(barrier_outputs[nranks])
    assert out["ranks"] == nranks
    assert 0 < out["mpi_init_s"] < 60
    assert list(out["results"]) == sizes
    for size, t in out["results"].items():
        assert 0 <= t["min"] <= t["median"] <= t["p90"] <= t["max"], (size, t)


def test_barrier_table(bindir):
    proc = ok(mpirun(bindir, 3, "barrier", "--warmup", 0, "--iters", 10))
    lines = proc.stdout.splitlines()
    assert any(line.startswith("# MPI_Init:") for line in lines)
    rows = [line.split() for line in lines if line.strip() and not line.startswith("#")]
    assert [int(r[0]) for r in rows] == [1, 2, 3]


@pytest.mark.parametrize("args", [["--bogus"], ["--iters", "0"], ["--warmup", "x"], ["--iters"]])
def test_barrier_bad_options(bindir, args):
    proc = singleton(bindir, "barrier", *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("barrier: ") and "usage: barrier" in proc.stderr
    assert proc.stdout == ""


# ---- parsers on real output -----------------------------------------------

NOISE_BEFORE = "hpc-health: kernels built with cmake\nhpc-health: nodes {node1}\n"
NOISE_AFTER = "Warning: something from the launcher {\n"


def test_parse_halo_ignores_launcher_noise(halo_output):
    clean = parse_halo(halo_output)
    assert parse_halo(NOISE_BEFORE + halo_output + NOISE_AFTER) == clean
    assert clean["grid"] == [2] and clean["errors"] == 0
    assert set(clean["results"]) == set(STRATEGIES)
    assert all(set(v) == {8, 4096} for v in clean["results"].values())
    assert set(clean["results"]["SERE"][8]) == {"min", "mean", "max", "samples"}
    assert clean["results"]["SERE"][8]["samples"] == [clean["results"]["SERE"][8]["max"]]


def test_halo_samples_are_one_per_repetition(bindir):
    out = parse_halo(ok(mpirun(bindir, 3, "halo", "--strategy", "ISIR", "--sizes", "8,1000",
                               "--warmup", 1, "--iters", 5, "--samples", 4, "--json")).stdout)
    for size in (8, 1000):
        r = out["results"]["ISIR"][size]
        assert len(r["samples"]) == 4 and all(x > 0 for x in r["samples"])
        # A sample is the max over ranks of one repetition; the summary max is
        # over ranks of each rank's mean of all repetitions, so it can never
        # exceed the mean of the samples (max of means <= mean of maxes).
        assert r["max"] <= sum(r["samples"]) / 4 + 1e-3


def test_parse_barrier_ignores_launcher_noise(barrier_outputs):
    text = barrier_outputs[4]
    clean = parse_barrier(text)
    assert parse_barrier(NOISE_BEFORE + text + NOISE_AFTER) == clean
    assert set(clean) == {"ranks", "mpi_init_s", "first_barrier_s", "results"}
    # The first barrier after MPI_Init (kernels 1.1): one wait, however short.
    assert 0 <= clean["first_barrier_s"] < 60
    assert set(clean["results"][4]) == {"min", "median", "p90", "max", "samples"}
    for stats in clean["results"].values():
        # Five consecutive batches of 50 calls: each batch median lies
        # within the range of all calls.
        assert len(stats["samples"]) == 5
        assert all(stats["min"] <= b <= stats["max"] for b in stats["samples"])


@pytest.mark.parametrize("cut", [0.3, 0.6, 0.95])
def test_truncated_output_is_an_error(halo_output, barrier_outputs, cut):
    for parse, text in ((parse_halo, halo_output), (parse_barrier, barrier_outputs[3])):
        with pytest.raises(ParseError, match="truncated"):
            parse(NOISE_BEFORE + text[:int(len(text.rstrip()) * cut)])


def test_missing_fields_are_named(halo_output, barrier_outputs):
    doc = json.loads(halo_output)
    del doc["errors"]
    with pytest.raises(ParseError, match="'errors'"):
        parse_halo(json.dumps(doc))
    doc = json.loads(halo_output)
    del doc["results"][1]["time_us"]["max"]
    with pytest.raises(ParseError, match=r"results\[1\].*'max'"):
        parse_halo(json.dumps(doc))
    doc = json.loads(barrier_outputs[2])
    del doc["mpi_init_s"]
    with pytest.raises(ParseError, match="'mpi_init_s'"):
        parse_barrier(json.dumps(doc))


def test_wrong_program_and_empty_text(halo_output, barrier_outputs):
    with pytest.raises(ParseError, match="barrier"):
        parse_halo(barrier_outputs[2])
    with pytest.raises(ParseError, match="halo"):
        parse_barrier(halo_output)
    with pytest.raises(ParseError):
        parse_halo("")


# ---- the checks' launches: one job output, one sample per launch -------------

def _job_output(tmp_path, launches):
    """A job's stdout as the check's script writes it: the kernels' echo
    lines, then each launch after its marker."""
    from hpc_health.checklib.launches import MARK
    text = "hpc-health: kernels built with cmake\nhpc-health: nodes vm\n"
    text += "".join(f"{MARK} {i}\n{out}" for i, out in enumerate(launches, 1))
    (tmp_path / "rfm_job.out").write_text(text)


def _kernel_run(tmp_path, program, parser, samples):
    """The parts of a KernelRun its launch splitting reads, on a real stage."""
    from hpc_health.checklib.kernels import KernelRun
    from hpc_health.checklib.launches import RepeatedLaunches

    class Stage:
        stagedir, stdout = str(tmp_path), "rfm_job.out"
        launch_outputs = RepeatedLaunches.launch_outputs
        outputs = KernelRun._launches.func

    Stage.samples, Stage.program, Stage.parser = samples, program, staticmethod(parser)
    return Stage()


def test_kernel_samples_are_one_per_launch(bindir, tmp_path):
    outs = [ok(mpirun(bindir, 2, "barrier", "--warmup", 5, "--iters", 50, "--json")).stdout
            for _ in range(3)]
    _job_output(tmp_path, outs)
    run = _kernel_run(tmp_path, "barrier", parse_barrier, 3)
    samples = [out["results"][2]["median"] for out in run.outputs()]
    assert samples == [parse_barrier(o)["results"][2]["median"] for o in outs]


def test_a_missing_or_broken_launch_fails_sanity_and_names_it(bindir, tmp_path):
    from reframe.core.exceptions import SanityError
    out = ok(mpirun(bindir, 2, "halo", "--sizes", "8", "--warmup", 1, "--iters", 3,
                    "--json")).stdout
    _job_output(tmp_path, [out, out])
    with pytest.raises(SanityError, match="2 of 3 launches started"):
        _kernel_run(tmp_path, "halo", parse_halo, 3).outputs()
    # The second launch died half-way through its JSON.
    _job_output(tmp_path, [out, out[: len(out) // 2], out])
    with pytest.raises(SanityError, match="halo output, launch 2: "):
        _kernel_run(tmp_path, "halo", parse_halo, 3).outputs()
