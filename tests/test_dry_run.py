"""`reframe --dry-run` of every check against every site configuration.

A dry run generates the build and job scripts without running them, also
where Spack, Slurm or Lmod are absent (as in CI): the build scripts must
carry the Spack environment commands with the specs the site settings ask
for, and the job scripts the site's launcher and the benchmark executables,
with placeholders ``$(spack -e ENV location -i NAME)`` for the install
prefixes a real build would record.
"""

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from hpc_health import paths
from hpc_health.checklib import osu as osu_lib
from hpc_health.checklib import stream as stream_lib
from hpc_health.run import command
from hpc_health.site import reframe_glue, sites
from hpc_health.spack.environment import spec_name

REPO = Path(__file__).resolve().parent.parent

# Dry runs generate every script without running one: part of the fast stage.
pytestmark = pytest.mark.dryrun


def _candidate_sites():
    names = ["local", "example-slurm", "example-cray"]
    # The two-node Slurm test site, when its settings exist and validate.
    extra = REPO / "site_configs" / "local-slurm" / "site.yaml"
    if extra.is_file():
        try:
            sites.load("local-slurm")
            names.append("local-slurm")
        except Exception:  # an unfinished site is not ours to test
            pass
    return names


SITES = _candidate_sites()


def _start_dry_run(name, out):
    site = sites.load(name)
    cmd = [command.reframe_executable(), "-C", str(site.reframe_config), "--system", name]
    for check in command.check_files():
        cmd += ["-c", check]
    cmd += ["--dry-run", "--prefix", str(out), "--report-file", str(out / "report.json")]
    # Site configs name Lmod modules; no module command is needed to write
    # `module load` lines, and CI machines have no Lmod.
    env = dict(os.environ, RFM_RESOLVE_MODULE_CONFLICTS="0")
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=out)


@pytest.fixture(scope="module")
def _dry_runs(tmp_path_factory):
    """Every site's dry run, started at once: each is one ReFrame process
    that keeps a core busy, so together they take the time of the longest."""
    started = {}
    for name in SITES:
        out = tmp_path_factory.mktemp(f"dry-{name}")
        started[name] = (out, _start_dry_run(name, out))
    yield started
    for _, proc in started.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module", params=SITES)
def dry_run(request, _dry_runs):
    name = request.param
    out, proc = _dry_runs[name]
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, output[-8000:]
    site = sites.load(name)
    cases = {}
    for tc in json.loads((out / "report.json").read_text())["runs"][0]["testcases"]:
        cases[(tc["display_name"].split(" ~")[0], tc["partition"], tc["environ"])] = tc
    return name, site, load_config(site.reframe_config), cases


def load_config(path):
    import importlib.util
    spec = importlib.util.spec_from_file_location(f"cfg_{path.parent.name.replace('-', '_')}",
                                                  path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.site_configuration


def combos(config):
    environs = {e["name"]: e for e in config["environments"]}
    for part in config["systems"][0]["partitions"]:
        for env in part["environs"]:
            yield part, environs[env]


def script(tc, kind):
    return (Path(tc["stagedir"]) / f"rfm_{kind}.sh").read_text()


def launch_line(text, marker):
    lines = [line for line in text.splitlines() if marker in line]
    assert lines, f"no line with {marker!r} in:\n{text}"
    return lines[-1]


def ensure_args(build_script):
    line = launch_line(build_script, "hpc_health.spack.environment ensure")
    assert line.endswith('|| echo "hpc-health: spackenv failed with exit $?"')
    args = shlex.split(line.split(" || ")[0])
    specs = [args[i + 1] for i, a in enumerate(args) if a == "--spec"]
    develop = [args[i + 1] for i, a in enumerate(args) if a == "--develop"]
    opts = {a: args[i + 1] for i, a in enumerate(args) if a.startswith("--") and
            a not in ("--spec", "--develop")}
    return specs, develop, opts


def settings(site, part):
    return site.partitions[part["name"]] or {}


def toolchain(env):
    tc = (env.get("extras") or {}).get("spack_toolchain")
    return f" {tc}" if tc else ""


def expected_launcher(part, ntasks):
    return {"srun": "srun ", "mpirun": f"mpirun -np {ntasks} "}[part["launcher"]]


def ranks_per_node(site, part):
    return settings(site, part).get("ranks_per_node") or part["processor"]["num_cpus"] // \
        part["processor"].get("num_cpus_per_core", 1)


def nodes(site, part):
    return settings(site, part).get("nodes") or 1


# ----------------------------------------------------------------- builds

def test_build_scripts_ensure_the_spack_environments(dry_run):
    name, site, config, cases = dry_run
    for part, env in combos(config):
        key = part["name"], env["name"]
        cfg = settings(site, part)
        # What the checks see: the site's Spack settings, and where a Spack
        # bootstrapped from a kit is the one used, the kit's for those unset.
        spack = reframe_glue.partition_extras(site.dir, part["name"])["hpc_health"]["spack"]
        develop = spack["develop"]
        # The site's settings with the schema's defaults filled in.
        stream_cfg, ior_cfg = cfg["stream"], cfg["ior"]
        size = stream_cfg.get("array_size") or stream_lib.stream_array_size(part["processor"])
        expected = {
            "StreamBuild": [stream_lib.stream_spec(stream_cfg["spec"], size, stream_cfg["ntimes"])],
            "OsuBuild": [cfg["osu"]["spec"]],
            "IorBuild": [ior_cfg["spec"], ior_cfg["darshan_runtime_spec"],
                         ior_cfg["darshan_util_spec"]],
        }
        for fixture, specs in expected.items():
            tc = cases[(fixture, *key)]
            got, dev, opts = ensure_args(script(tc, "build"))
            assert got == [s + toolchain(env) for s in specs], (name, key, fixture)
            assert re.search(r"(^|/)spack$", opts["--spack"])
            env_dir = f"{part['name']}-{env['name']}/{fixture[:-5].lower()}"
            assert opts["--env-dir"].endswith(env_dir)
            assert opts["--site-env"] == str(site.spack_env)
            names = {spec_name(s) for s in specs}
            assert dev == [f"{n}={w}" for n, w in develop.items() if n in names]
            for setting in ("install_tree", "builtin_repo", "source_mirror",
                            "bootstrap_mirror"):
                value = spack[setting]
                flag = f"--{setting.replace('_', '-')}"
                assert opts.get(flag) == value, (flag, opts)
        # Our kernels go through the same Spack layer in a dry run.
        got, dev, _ = ensure_args(script(cases[("KernelsBuild", *key)], "build"))
        assert got == ["hpc-health-kernels@=1.1"]
        assert dev == [f"hpc-health-kernels={REPO / 'kernels'}@1.1"]


# ----------------------------------------------------------------- jobs

def test_every_benchmark_job_has_a_time_limit(dry_run):
    """A launcher that hangs (Open MPI 4.1's mpirun can outlive killed ranks)
    fails its check at the limit; without one the local scheduler waits for
    ever and the night never ends."""
    _, _, _, cases = dry_run
    jobs = {key[0]: tc["time_limit"] for key, tc in cases.items() if not tc["fixture"]}
    assert jobs
    assert not [name for name, limit in jobs.items() if not limit], jobs


def placeholder(part, env, fixture, package):
    return f"$(spack -e {site_env_dir(part, env, fixture)} location -i {package})"


_ENV_DIRS = {}


def site_env_dir(part, env, fixture):
    return _ENV_DIRS[(part["name"], env["name"], fixture)]


def remember_env_dirs(site, config, cases):
    for part, env in combos(config):
        for fixture in ("stream", "osu", "ior"):
            tc = cases[(fixture.capitalize() + "Build" if fixture != "osu" else "OsuBuild",
                        part["name"], env["name"])]
            _, _, opts = ensure_args(script(tc, "build"))
            _ENV_DIRS[(part["name"], env["name"], fixture)] = opts["--env-dir"]


def test_stream_jobs_run_the_c_binary_on_every_core(dry_run):
    name, site, config, cases = dry_run
    remember_env_dirs(site, config, cases)
    for part, env in combos(config):
        cores = part["processor"]["num_cpus"] // part["processor"].get("num_cpus_per_core", 1)
        threads = (settings(site, part).get("stream") or {}).get("threads") or cores
        stream_cfg = settings(site, part).get("stream") or {}
        samples = stream_cfg.get("samples") or 5
        text = script(cases[("StreamBandwidth", part["name"], env["name"])], "job")
        binary = f'"{placeholder(part, env, "stream", "stream")}/bin/stream_c.exe"'
        # No parallel launcher: the OpenMP process runs in the job script
        # itself, once per sample.
        assert f"for s in $(seq {samples}); do for t in {threads}; do" in text, text
        assert f"OMP_NUM_THREADS=$t {binary}; done; done" in text
        assert "export OMP_PROC_BIND=spread" in text and "export OMP_PLACES=cores" in text
        series = script(cases[("StreamTriadScaling", part["name"], env["name"])], "job")
        counts = stream_cfg.get("thread_counts") or stream_lib.thread_series(threads)
        assert f"for s in $(seq {samples}); do for t in {' '.join(map(str, counts))}; do" \
            in series
        assert f"OMP_NUM_THREADS=$t {binary}" in series
        if part["scheduler"] == "slurm":
            assert f"#SBATCH --cpus-per-task={threads}" in text


def test_osu_jobs(dry_run):
    name, site, config, cases = dry_run
    remember_env_dirs(site, config, cases)
    for part, env in combos(config):
        osu_cfg = settings(site, part).get("osu") or {}
        prefix = placeholder(part, env, "osu", "osu-micro-benchmarks")
        device = osu_cfg.get("device")
        for bench in ("osu_latency", "osu_bw", "osu_bibw"):
            sizes = sorted(osu_cfg["sizes"][bench.replace("osu_", "")])
            tc = cases[(f"OsuPointToPoint %benchmark={bench} %placement=intra_node",
                        part["name"], env["name"])]
            line = launch_line(script(tc, "job"), bench)
            exe = f'"{prefix}/libexec/osu-micro-benchmarks/mpi/pt2pt/{bench}"'
            assert line.startswith(expected_launcher(part, 2) + exe), line
            assert f"-m {min(sizes)}:{max(sizes)}" in line and " -f" not in line
            # The timed launches never validate; one launch before them does.
            assert " -c" not in line
            text = script(tc, "job").splitlines()
            marks = [i for i, ln in enumerate(text) if osu_lib.VALIDATION_MARK in ln]
            if osu_cfg.get("validate", True) is not False:
                check = text[marks[0] + 1]
                assert check.startswith(expected_launcher(part, 2) + exe), check
                assert check.endswith(f" -c -x 2 -i {osu_cfg.get('validation_iterations', 10)}")
            else:
                assert not marks
            assert ("-d cuda D D" in line) == (device == "cuda")
            inter = cases[(f"OsuPointToPoint %benchmark={bench} %placement=inter_node",
                           part["name"], env["name"])]
            if nodes(site, part) >= 2:
                text = script(inter, "job")
                assert "#SBATCH --ntasks-per-node=1" in text
                assert f"{expected_launcher(part, 2)}hostname > rank-hosts.txt" in text
            else:
                assert inter["result"] == "skip"
                assert "needs 2 nodes" in inter["skip_reason"]
        for bench in osu_lib.COLLECTIVES:
            tc = cases[(f"OsuCollective %benchmark={bench}", part["name"], env["name"])]
            ntasks = nodes(site, part) * ranks_per_node(site, part)
            line = launch_line(script(tc, "job"), bench)
            exe = f'"{prefix}/libexec/osu-micro-benchmarks/mpi/collective/{bench}"'
            assert line.startswith(expected_launcher(part, ntasks) + exe), line
            assert " -f" in line
            if part["scheduler"] == "slurm":
                assert f"#SBATCH --ntasks={ntasks}" in script(tc, "job")
        put = cases[("OsuPutLatency %placement=intra_node", part["name"], env["name"])]
        line = launch_line(script(put, "job"), "osu_put_latency")
        exe = f'"{prefix}/libexec/osu-micro-benchmarks/mpi/one-sided/osu_put_latency"'
        sizes = osu_cfg["sizes"]["latency"]
        assert line.startswith(expected_launcher(part, 2) + exe), line
        # OSU 7.4's one-sided tests refuse -c.
        assert f"-m {min(sizes)}:{max(sizes)}" in line and " -c" not in line
        mr = cases[("OsuMessageRate %placement=intra_node", part["name"], env["name"])]
        line = launch_line(script(mr, "job"), "osu_mbw_mr")
        pairs = osu_cfg.get("pairs") or max(1, ranks_per_node(site, part) // 2)
        assert line.startswith(expected_launcher(part, 2 * pairs)) and f"-p {pairs}" in line
        if device:
            gpus = sum(d.get("num_devices", 1) for d in part.get("devices", []))
            assert f"--gres=gpu:{gpus}" in script(tc, "job")


@pytest.mark.parametrize("mode,api", [("posix_fpp", "-a POSIX -F"),
                                      ("posix_shared", "-a POSIX -b"),
                                      ("mpiio_collective", "-a MPIIO -c")])
def test_ior_jobs_run_under_darshan_in_their_own_directory(dry_run, mode, api):
    name, site, config, cases = dry_run
    remember_env_dirs(site, config, cases)
    for part, env in combos(config):
        scratch = str(paths.expand(settings(site, part)["scratch"], site.dir))
        tc = cases[(f"IorBandwidth %mode={mode}", part["name"], env["name"])]
        text = script(tc, "job")
        assert f"mktemp -d {scratch}/hpc-health-ior.XXXXXX" in text
        assert "trap 'rm -rf -- \"$HPC_HEALTH_IO_DIR\"' EXIT" in text
        line = launch_line(text, "/bin/ior")
        runtime = placeholder(part, env, "ior", "darshan-runtime")
        ior = placeholder(part, env, "ior", "ior")
        assert line.startswith(expected_launcher(part, tc["num_tasks"]) +
                               f'env LD_PRELOAD="{runtime}/lib/libdarshan.so" '
                               f'DARSHAN_LOGFILE={tc["stagedir"]}/app.darshan "{ior}/bin/ior"')
        assert api in line
        assert '-o "$HPC_HEALTH_IO_DIR/testfile"' in line
        assert f"summaryFile={tc['stagedir']}/ior-summary.json" in line
        util = placeholder(part, env, "ior", "darshan-util")
        assert f'"{util}/bin/darshan-parser" --base --total --perf' in text
        assert text.rstrip().endswith("exit $rc")
        md = script(cases[("MdtestRates", part["name"], env["name"])], "job")
        assert f"mktemp -d {scratch}/hpc-health-mdtest.XXXXXX" in md
        assert f'"{ior}/bin/mdtest" -n' in launch_line(md, "/bin/mdtest")
        # Each of mdtest's samples is a launch of one iteration (mdtest prints
        # no per-iteration rates), each leaving its own Darshan log.
        launches = [line for line in md.splitlines() if "/bin/mdtest" in line]
        samples = settings(site, part)["mdtest"]["samples"]
        assert len(launches) == samples and all(" -i 1 " in line for line in launches)
        assert md.count("hpc-health: launch") == samples
