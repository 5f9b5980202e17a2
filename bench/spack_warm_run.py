#!/usr/bin/env python3
"""Cold and warm `hpc-health run`: what the Spack layer costs.

Runs the suite of a site twice and reads, from each run's ReFrame JSON
report and the build fixtures' ``spack-build.json`` / ``spack-commands.log``
(kept in the run's output folder):

- Spack environments concretized and ``spack install`` invocations, and the
  packages Spack really built (its ``==> Installing`` lines), per run: the
  cold run must build each spec once, the warm run nothing;
- the Spack overhead per partition (the build fixtures' time: the
  ``hpc_health.spack.environment ensure`` wall time, and ReFrame's time for
  the fixture);
- the suite's wall time against the sum of the benchmarks' own run times.

    bench/spack_warm_run.py --site local
    bench/spack_warm_run.py --root /tmp/sandbox --site local -- -n Osu -n Stream

``--root`` runs against a copy of the project (as tests/sandbox.py makes
one: site_configs/, reference/, linked checks); the results store goes
beside it.  Pass ``--cold`` to delete the site's Spack environments
(``spack.env_dir``, never the install tree) first, so the first run
concretizes.  Prints a table, and with ``--json FILE`` writes the figures.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

_INSTALLING = re.compile(r"^==> Installing (\S+)", re.MULTILINE)
_RESULTS_IN = re.compile(r"^hpc-health: site \S+, run (\S+) \(results in (.+)\)$", re.MULTILINE)


def run_suite(site, root, store, extra):
    env = dict(os.environ)
    if root:
        env["HPC_HEALTH_ROOT"] = str(root)
    if store:
        env["HPC_HEALTH_STORE"] = str(store)
    cmd = [sys.executable, "-m", "hpc_health", "run", "--site", site]
    if extra:
        cmd += ["--", *extra]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.monotonic() - t0
    found = _RESULTS_IN.search(proc.stdout)
    if not found:
        sys.exit(f"hpc-health run wrote no run folder (exit {proc.returncode}):\n"
                 f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return Path(found.group(2)), wall, proc


def figures(run_dir, wall):
    report = json.loads((run_dir / "report.json").read_text())
    cases = [tc for run in report["runs"] for tc in run["testcases"]]
    fixtures, benchmarks = [], []
    for tc in cases:
        (fixtures if tc.get("fixture") else benchmarks).append(tc)
    builds = []
    for tc in fixtures:
        outdir = Path(tc.get("outputdir") or "")
        record_path = outdir / "spack-build.json"
        if not record_path.is_file():
            continue  # not a Spack fixture, or it failed or was skipped
        record = json.loads(record_path.read_text())
        log = outdir / "spack-commands.log"
        installed = _INSTALLING.findall(log.read_text()) if log.is_file() else []
        builds.append({
            "fixture": tc["display_name"].split(" ~")[0],
            "partition": f"{tc['system']}:{tc['partition']}",
            "environ": tc["environ"],
            "specs": record["specs"],
            "concretized": record["concretized"],
            "install_ran": record["installed"],
            "packages_built": installed,
            "spackenv_s": record["seconds"],
            # Setup and build; a fixture's total time also covers the wait
            # for its dependents before ReFrame cleans it up.
            "fixture_s": sum(tc.get(k) or 0.0 for k in ("time_setup", "time_compile",
                                                        "time_sanity")),
        })
    per_partition = {}
    for b in builds:
        p = per_partition.setdefault(b["partition"], {"spackenv_s": 0.0, "fixture_s": 0.0})
        p["spackenv_s"] += b["spackenv_s"]
        p["fixture_s"] += b["fixture_s"] or 0.0
    ran = [tc for tc in benchmarks if tc.get("time_run") is not None]
    return {
        "run_dir": str(run_dir),
        "wall_s": round(wall, 1),
        "reframe_s": report.get("session_info", {}).get("time_elapsed"),
        "results": _count(tc["result"] for tc in cases),
        "concretizations": sum(b["concretized"] for b in builds),
        "install_runs": sum(b["install_ran"] for b in builds),
        "packages_built": sorted(p for b in builds for p in b["packages_built"]),
        "builds": builds,
        "spack_overhead_per_partition": {k: {n: round(v, 1) for n, v in p.items()}
                                         for k, p in per_partition.items()},
        "benchmark_run_s": round(sum(tc["time_run"] for tc in ran), 1),
        "benchmarks_run": len(ran),
    }


def _count(values):
    out = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def drop_environments(site, root):
    """Delete the site's persistent Spack environments (never the install
    tree), so the next run concretizes from scratch."""
    if root:
        os.environ["HPC_HEALTH_ROOT"] = str(root)
    from hpc_health.site import sites
    env_dir = sites.load(site).spack_setting("env_dir")
    if env_dir and os.path.isdir(env_dir):
        shutil.rmtree(env_dir)
    return env_dir


def show(name, f):
    print(f"\n== {name} run: {f['run_dir']}")
    print(f"   suite wall time {f['wall_s']} s (ReFrame session {f['reframe_s']} s); "
          f"{f['benchmarks_run']} benchmark jobs ran {f['benchmark_run_s']} s in total")
    print(f"   results: {f['results']}")
    print(f"   Spack: {f['concretizations']} concretization(s), {f['install_runs']} "
          f"install run(s), {len(f['packages_built'])} package(s) built")
    for b in f["builds"]:
        print(f"     {b['fixture']:<13} {b['partition']}+{b['environ']}: "
              f"concretize {'ran' if b['concretized'] else 'skipped'}, install "
              f"{'ran' if b['install_ran'] else 'skipped'}, built "
              f"{', '.join(b['packages_built']) or 'nothing'}; spackenv {b['spackenv_s']} s, "
              f"fixture {b['fixture_s'] and round(b['fixture_s'], 1)} s")
    for part, p in f["spack_overhead_per_partition"].items():
        print(f"   Spack overhead on {part}: {p['spackenv_s']} s in spackenv, "
              f"{p['fixture_s']} s of build fixtures")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--site", default="local")
    p.add_argument("--root", type=Path, help="a project copy to run in (HPC_HEALTH_ROOT)")
    p.add_argument("--store", type=Path, help="results store (default: beside --root)")
    p.add_argument("--cold", action="store_true",
                   help="delete the site's Spack environments before the first run")
    p.add_argument("--json", type=Path, help="write the figures here")
    p.add_argument("reframe_args", nargs="*", help="after --: passed to ReFrame")
    args = p.parse_args(argv)
    store = args.store or (args.root.parent / "store" if args.root else None)
    if args.cold:
        print(f"dropped Spack environments in {drop_environments(args.site, args.root)}")
    out = {}
    for name in ("first", "second"):
        run_dir, wall, _ = run_suite(args.site, args.root, store, args.reframe_args)
        out[name] = figures(run_dir, wall)
        show(name, out[name])
    second = out["second"]
    warm = second["concretizations"] == 0 and second["install_runs"] == 0
    built = out["first"]["packages_built"]
    once = len(built) == len(set(built))
    print(f"\nwarm run: {'0 concretizations, 0 installs' if warm else 'NOT WARM'}; "
          f"first run built {len(built)} package(s){'' if once else ', some twice'}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0 if warm and once else 1


if __name__ == "__main__":
    sys.exit(main())
