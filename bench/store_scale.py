#!/usr/bin/env python3
"""A year of nightly runs: what `history`, `compare` and `report` cost on a
big store, with the store's index and without it.

Synthesises, from one real run directory (run.json, ReFrame's report.json,
verdicts.json and the checks' ``hpc-health-samples.json``), a throw-away
store of N nightly runs (default 365) of that report on two partitions
(every testcase copied from ``local:default`` to ``local:second``), each
figure and its samples varied per night (lognormal noise of 3 %, noisy
episodes, and a step on a tenth of the figures from the ``after-upgrade``
runs on), then times the commands as a user runs them -- a whole
``python -m hpc_health ...`` process, best and median of --repeat:

- the first read, which builds the index from the run directories (once);
- ``history`` of one figure (and ``--all``), and
  ``compare tag:before-upgrade tag:after-upgrade``, ``report`` of the
  latest run, with the index;
- the same with the index deleted before each (its rebuild cost);
- the code before the index (commit 10a4e53, checked out into a git
  worktree): its ``history``, ``compare local local`` and ``report`` on the
  same store: the cost the index replaces;
- each command once more in one process, twice (``cli.main``): the time of
  ``import hpc_health.cli.main``, the first call (with the modules it imports
  lazily, numpy and scipy among them) and the second (the query alone).

::

    python -m bench.store_scale                       # from the latest stored run
    python -m bench.store_scale --from-run DIR --nights 365 --json store_scale.json
    python -m bench.store_scale --store /tmp/year --keep --no-other
    python -m bench.store_scale --code 10a4e53 --code 885933d    # two other versions
    python -m bench.store_scale --from-run DIR --leave-out-tag tuning   # a --tuning run as nightly

Prints a Markdown table with the load average of this machine at each
measurement; ``--json FILE`` writes the timings.
"""

import argparse
import copy
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SITE = "local"
FIRST_NIGHT = datetime(2025, 11, 25, 2, 0, 0, tzinfo=timezone.utc)
SAMPLES_FILE = "hpc-health-samples.json"
#: The commit before the store's index: "today's cost".
OLD_COMMIT = "10a4e53"
#: The budget the issue sets for each command on a year of runs.
BUDGET_S = 1.0
#: ... and for the commands that test every figure (issue 27).
BUDGET_ALL_S = 2.0


def _budget(case):
    return BUDGET_ALL_S if "--all" in case else BUDGET_S


# --- the synthetic store -------------------------------------------------------

def latest_run(site=SITE):
    """The latest run directory of the default store ($HPC_HEALTH_STORE)."""
    from hpc_health.store import rundirs
    runs = rundirs.list_runs(site)
    if not runs:
        sys.exit(f"no stored run of site {site!r} in {rundirs.runs_dir(site)}: give --from-run DIR "
                 "(a run directory of `hpc-health run`)")
    return runs[-1][0]


def _samples_of(tc):
    """(path, samples) of a testcase's samples file, as
    hpc_health.model.results.case_samples looks for it."""
    for where in (tc.get("outputdir"), tc.get("stagedir")):
        if where:
            path = Path(where) / SAMPLES_FILE
            try:
                return path, json.loads(path.read_text())
            except (OSError, ValueError):
                continue
    return None, None


def _moved(path, src, dest, partition):
    """*path* (below the source run *src*) moved to the run *dest*, its
    partition component (output/<system>/<partition>/...) renamed."""
    if not path:
        return path
    try:
        rel = Path(path).relative_to(src)
    except ValueError:
        return path     # outside the run: left as it is
    parts = list(rel.parts)
    if len(parts) > 2 and parts[0] in ("output", "stage"):
        parts[2] = partition
    return str(Path(dest, *parts))


class Template:
    """The real run, read once: the report with every testcase also on the
    second partition, and what varies per night."""

    def __init__(self, src, second, leave_out=()):
        self.src = Path(src).resolve()
        self.second = second
        raw = (self.src / "report.json").read_text()
        self.indent = 2 if raw.startswith("{\n") else None
        self.report = json.loads(raw)
        self.meta = json.loads((self.src / "run.json").read_text())
        vpath = self.src / "verdicts.json"
        self.verdicts = json.loads(vpath.read_text()) if vpath.exists() else []
        if leave_out:
            # As a plain nightly run leaves out the tuning sweeps that a
            # run made with --tuning has.
            leave_out, dropped = set(leave_out), set()
            for run in self.report.get("runs", []):
                keep = []
                for tc in run.get("testcases", []):
                    if leave_out & set(tc.get("tags") or ()):
                        dropped.add(tc.get("display_name", "").split(" ~")[0])
                    else:
                        keep.append(tc)
                run["testcases"] = keep
            self.verdicts = [v for v in self.verdicts if v.get("check") not in dropped]
            self.meta["left_out_tags"] = sorted(leave_out)
        self.partitions = sorted({f"{tc.get('system')}:{tc.get('partition')}"
                                  for run in self.report.get("runs", [])
                                  for tc in run.get("testcases", [])})
        if len(self.partitions) != 1:
            sys.exit(f"{self.src}: the report has partitions {self.partitions}; the bench "
                     "copies a run of one partition to a second")
        self.system, self.first = self.partitions[0].split(":", 1)
        self.samples = {}       # (run index, case index, partition) -> (path, samples)
        for ri, run in enumerate(self.report.get("runs", [])):
            copies = []
            for ci, tc in enumerate(run.get("testcases", [])):
                path, samples = _samples_of(tc)
                if path is not None:
                    self.samples[(ri, ci)] = (path, samples)
                twin = copy.deepcopy(tc)
                twin["partition"] = second
                twin["perfvalues"] = {_renamed_key(k, second): v
                                      for k, v in (tc.get("perfvalues") or {}).items()}
                twin["dependencies_actual"] = [
                    [n, f"{self.system}:{second}" if p == self.partitions[0] else p, e]
                    for n, p, e in (tc.get("dependencies_actual") or [])]
                copies.append(twin)
            run["testcases"] = run.get("testcases", []) + copies
        self.cases_per_partition = len(self.report["runs"][0]["testcases"]) // 2 \
            if self.report.get("runs") else 0
        self.figures = sum(1 for run in self.report.get("runs", [])[-1:]
                           for tc in run["testcases"]
                           for v in (tc.get("perfvalues") or {}).values() if v and v[0] is not None)

    def night(self, dest, n, nights, rng, step, upgrade_at):
        """Write run *n* (0-based) into *dest*."""
        started = FIRST_NIGHT + timedelta(days=n)
        run_id = started.strftime("%Y%m%dT%H%M%SZ")
        d = Path(dest) / "runs" / SITE / run_id
        d.mkdir(parents=True)
        report = copy.deepcopy(self.report)
        # One noisy episode (a neighbour, a degraded link) on a few nights
        # per partition: most figures of that partition worse that night.
        episode = {p: (rng.uniform(0.05, 0.25) if rng.random() < 0.04 else 0.0)
                   for p in (self.first, self.second)}
        upgraded = n >= upgrade_at
        for ri, run in enumerate(report.get("runs", [])):
            half = len(run["testcases"]) // 2
            for ci, tc in enumerate(run["testcases"]):
                part = tc["partition"]
                factors = {}
                for key, vals in (tc.get("perfvalues") or {}).items():
                    var = key.split(":")[-1]
                    worse = rng.lognormvariate(0.0, 0.03)
                    if episode[part] and rng.random() < 0.7:
                        worse *= 1.0 + episode[part]
                    if upgraded and _stepped(tc, var):
                        worse *= 1.0 + step
                    better = ((tc.get("figure_better") or {}) if isinstance(
                        tc.get("figure_better"), dict) else {}).get(var)
                    factor = 1.0 / worse if better == "higher" else worse
                    factors[var] = factor
                    if vals and isinstance(vals[0], (int, float)):
                        vals[0] = vals[0] * factor
                for field in ("outputdir", "stagedir"):
                    if tc.get(field):
                        tc[field] = _moved(tc[field], self.src, d, part)
                found = self.samples.get((ri, ci if ci < half else ci - half))
                if found:
                    path, samples = found
                    new = Path(_moved(str(path), self.src, d, part))
                    new.parent.mkdir(parents=True, exist_ok=True)
                    new.write_text(json.dumps({
                        var: [x * factors.get(var, 1.0) * rng.lognormvariate(0.0, 0.01)
                              for x in vals] if isinstance(vals, list) else vals
                        for var, vals in samples.items()}))
        with open(d / "report.json", "w") as fp:
            json.dump(report, fp, indent=self.indent)
        verdicts = self.verdicts + [
            {**v, "partition": f"{self.system}:{self.second}"} for v in self.verdicts
            if v.get("partition") == self.partitions[0]]
        _write(d / "verdicts.json", verdicts)
        _write(d / "run.json", self.run_meta(run_id, started, n, nights, upgraded))
        return d

    def run_meta(self, run_id, started, n, nights, upgraded):
        meta = copy.deepcopy(self.meta)
        meta.pop("pid", None)
        took = _duration(self.meta) or timedelta(minutes=8)
        tags = ["nightly"]
        if n >= nights - 10:
            tags.append("after-upgrade" if upgraded else "before-upgrade")
        first, second = self.partitions[0], f"{self.system}:{self.second}"
        for key in ("hardware", "capabilities"):
            if isinstance(meta.get(key), dict) and first in meta[key]:
                meta[key][second] = meta[key][first]
        if upgraded:
            stack = meta.setdefault("stack", {}) or {}
            stack["kernel"] = f"{stack.get('kernel') or 'unknown'}+upgrade"
            meta["stack_hash"] = f"{meta.get('stack_hash') or ''}-upgraded"
        meta.update(run_id=run_id, started=_stamp(started), finished=_stamp(started + took),
                    tags=tags, note="synthetic (bench/store_scale.py)")
        return meta


def _renamed_key(key, partition):
    parts = key.split(":")
    if len(parts) == 3:
        parts[1] = partition
    return ":".join(parts)


#: Share of the figures that change at the upgrade (--step-share).
STEP_SHARE = 0.1


def _stepped(tc, var):
    """A share of the figures (the same every night) change at the upgrade."""
    name = (tc.get("display_name") or tc.get("name") or "").split(" /")[0]
    return zlib.crc32(f"{name}/{var}".encode()) % 1000 < STEP_SHARE * 1000


def _stamp(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _duration(meta):
    try:
        a, b = (datetime.strptime(meta[k], "%Y-%m-%dT%H:%M:%SZ") for k in ("started", "finished"))
    except (KeyError, TypeError, ValueError):
        return None
    return b - a


def _write(path, data):
    with open(path, "w") as fp:
        json.dump(data, fp, indent=1, sort_keys=True)


def synthesise(src, store, nights, seed, step, second="second", leave_out=()):
    tpl = Template(src, second, leave_out)
    rng = random.Random(seed)
    upgrade_at = nights - 5
    t0 = time.monotonic()
    for n in range(nights):
        tpl.night(store, n, nights, rng, step, upgrade_at)
        if (n + 1) % 50 == 0:
            print(f"  synthesised {n + 1}/{nights} runs", file=sys.stderr, flush=True)
    return tpl, time.monotonic() - t0


def pick_figures(tpl):
    """Two figures of the report to follow with `history`, each a check's
    display name (one figure, not every parameterisation) and variable: one
    with the step at the upgrade, one steady."""
    found = []
    for tc in tpl.report["runs"][-1]["testcases"]:
        if tc.get("partition") != tpl.first or tc.get("fixture"):
            continue
        for key, vals in (tc.get("perfvalues") or {}).items():
            if vals and vals[0] is not None:
                var = key.split(":")[-1]
                found.append(((tc.get("display_name") or tc["name"]).split(" /")[0], var,
                              _stepped(tc, var)))
    if not found:
        sys.exit("the report holds no performance figure")
    return {"stepped": next(((c, v) for c, v, s in found if s), None),
            "steady": next(((c, v) for c, v, s in found if not s), None)}


# --- timing ----------------------------------------------------------------------

#: Runs a command in one process twice (cli.main): the import time of the
#: CLI, the first call (with what it imports lazily) and the second.
_HARNESS = r"""
import contextlib, io, json, sys, time
t0 = time.perf_counter()
try:
    import hpc_health.cli.main as cli   # the CLI since the layered tree
except ImportError:
    import hpc_health.cli as cli        # older commits' code
t1 = time.perf_counter()
args = json.loads(sys.argv[1])
times, code, error = [], None, None
for _ in range(2):
    t = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            code = cli.cli.main(args=args, prog_name="hpc-health", standalone_mode=False)
        except SystemExit as exc:
            code = exc.code
        except Exception as exc:
            code, error = 1, f"{type(exc).__name__}: {exc}"
    times.append(time.perf_counter() - t)
print(json.dumps({"module": cli.__file__, "import_s": t1 - t0, "first_s": times[0],
                  "second_s": times[1], "exit": code, "error": error}))
"""


def _env(code_root, store):
    env = dict(os.environ)
    env.update(HPC_HEALTH_STORE=str(store), HPC_HEALTH_ROOT=str(code_root),
               PYTHONPATH=str(code_root) + (os.pathsep + env["PYTHONPATH"]
                                            if env.get("PYTHONPATH") else ""))
    env.pop("HPC_HEALTH_SITE", None)
    return env


def _load():
    return round(os.getloadavg()[0], 2)


def run_command(args, code_root, store, fresh_index=False):
    """(wall seconds, completed process) of `python -m hpc_health ARGS`."""
    if fresh_index:
        drop_index(store)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "hpc_health", *args], cwd=code_root,
                          env=_env(code_root, store), capture_output=True, text=True)
    wall = time.monotonic() - t0
    return wall, proc


def _said(stdout):
    """What a command concluded: its DEGRADED lines, else its last line."""
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    found = [ln for ln in lines if "DEGRADED since" in ln]
    return "; ".join(found) if found else (lines[-1] if lines else "")


def _crash(proc):
    """The error of a command that did not complete (a traceback, or an
    exit other than healthy or unhealthy), or None."""
    if "Traceback (most recent call last)" in proc.stderr or proc.returncode not in (0, 1):
        lines = proc.stderr.strip().splitlines()
        return f"exit {proc.returncode}: {lines[-1] if lines else ''}"
    return None


def drop_index(store):
    for f in Path(store).glob("index.sqlite*"):
        f.unlink()


def timed(name, code, args, code_root, store, repeat, fresh_index=False, index="kept"):
    loads, walls, proc = [], [], None
    for _ in range(repeat):
        loads.append(_load())
        wall, proc = run_command(args, code_root, store, fresh_index)
        walls.append(wall)
    crash = _crash(proc)
    if crash and code == "this":
        sys.exit(f"hpc-health {' '.join(args)} failed ({crash}):\n{proc.stderr[-3000:]}")
    row = {"case": name, "code": code, "index": index, "command": "hpc-health " + " ".join(args),
           "error": crash,
           "best_s": round(min(walls), 3), "median_s": round(statistics.median(walls), 3),
           "runs_s": [round(w, 3) for w in walls], "load": max(loads), "exit": proc.returncode,
           "said": _said(proc.stdout),
           "output_lines": len(proc.stdout.splitlines())}
    print(f"  {name} ({code}): best {row['best_s']} s, median {row['median_s']} s, "
          f"load {row['load']}" + (f"; FAILED: {crash}" if crash else ""), file=sys.stderr,
          flush=True)
    return row


def in_process(args, code_root, store):
    proc = subprocess.run([sys.executable, "-c", _HARNESS, json.dumps(args)], cwd=code_root,
                          env=_env(code_root, store), capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"in-process timing of {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if out["error"] and Path(code_root).resolve() == REPO:
        sys.exit(f"{' '.join(args)} failed in one process: {out['error']}")
    if not Path(out["module"]).resolve().is_relative_to(Path(code_root).resolve()):
        sys.exit(f"timing {code_root} imported hpc_health from {out['module']}")
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()}


def startup(code_root, store, repeat):
    walls = []
    for _ in range(repeat):
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-m", "hpc_health", "--version"], cwd=code_root,
                       env=_env(code_root, store), capture_output=True, check=True)
        walls.append(time.monotonic() - t0)
    return round(min(walls), 3)


def worktree(commit):
    """A git worktree of *commit* of this repository (removed afterwards)."""
    path = Path(tempfile.mkdtemp(prefix=f"store-scale-{commit}-")) / "tree"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(path),
                    commit], check=True)
    return path


def remove_worktree(path):
    subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(path)],
                   check=False)
    shutil.rmtree(path.parent, ignore_errors=True)


def _has_index(code_root):
    """Whether the code at *code_root* has the store's index (flat before
    the layered tree, under store/ since)."""
    pkg = Path(code_root) / "hpc_health"
    return (pkg / "index.py").exists() or (pkg / "store" / "index.py").exists()


def commands(figures, code_root):
    """{name: arguments} of the commands timed, as the code at *code_root*
    spells them: before the index, `compare` took two SITE[:PARTITION] and
    compared their latest runs."""
    out = {f"history ({kind} figure)": ["history", "--site", SITE, "--check", check,
                                        "--var", var]
           for kind, (check, var) in figures.items()}
    if not _has_index(code_root):
        out["compare local local"] = ["compare", SITE, SITE]
    else:
        out["compare before/after upgrade"] = ["compare", "--site", SITE, "tag:before-upgrade",
                                               "tag:after-upgrade"]
    out["report"] = ["report", "--site", SITE]
    out["history --all"] = ["history", "--site", SITE, "--all"]
    return out


#: The nightly run's look across nights, as `hpc-health run` makes it after
#: judging the night (the interpreter and numpy already loaded): best of two.
_NIGHTLY = r"""
import json, sys, time
import numpy
from hpc_health.judge import drift
from hpc_health.store import index, references
from hpc_health.site import sites
site = sites.load(sys.argv[1])
refs = references.load(site.reference_file) if site.reference_file.exists() else None
times = []
for _ in range(2):
    t = time.perf_counter()
    with index.open_index() as idx:
        runs = idx.listing(site.name).runs
        found, whole = drift.across_nights(idx, runs, refs, runs[-1].run_id)
    times.append(time.perf_counter() - t)
print(json.dumps({"best_s": min(times), "drifting": len(found),
                  "broad": whole.word if whole else None}))
"""


def nightly_drift(store):
    """Seconds of the nightly drift test over the store's latest run."""
    proc = subprocess.run([sys.executable, "-c", _NIGHTLY, SITE], capture_output=True,
                          text=True, env=_env(REPO, store), cwd=REPO)
    if proc.returncode:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr else "failed"}
    return json.loads(proc.stdout)


def measure(store, figures, repeat, others=()):
    """Timings of this checkout's commands, and of the same on the code of
    each (label, tree) in *others*."""
    rows, inproc = [], {}
    new = commands(figures, REPO)
    history = next(iter(new))
    print("timing the first read (builds the index)", file=sys.stderr)
    rows.append(timed(f"first read: builds the index, then {history}", "this", new[history],
                      REPO, store, 1, fresh_index=True, index="built"))
    print("timing with the index", file=sys.stderr)
    for name, args in new.items():
        rows.append(timed(name, "this", args, REPO, store, repeat))
    print("timing with the index deleted before each", file=sys.stderr)
    for name in (history, "compare before/after upgrade"):
        rows.append(timed(name + ", index deleted", "this", new[name], REPO, store, repeat,
                          fresh_index=True, index="rebuilt"))
    for name, args in new.items():
        inproc[f"{name} (this)"] = in_process(args, REPO, store)
    print("timing the nightly drift test", file=sys.stderr)
    inproc["nightly drift test, after the night is judged (this)"] = nightly_drift(store)
    for label, tree in others:
        cmds = commands(figures, tree)
        indexed = "kept" if _has_index(tree) else "none"
        print(f"timing the code of {label} ({tree})", file=sys.stderr)
        for name, args in cmds.items():
            rows.append(timed(name, label, args, tree, store, repeat, index=indexed))
        for name, args in cmds.items():
            inproc[f"{name} ({label})"] = in_process(args, tree, store)
    return rows, inproc


# --- output ----------------------------------------------------------------------

def table(result):
    lines = [f"store: {result['runs']} runs x {result['partitions']} partitions, "
             f"{result['figures_per_run']} figures per run ({result['figures_per_partition']} "
             f"per partition), {result['store_mib']} MiB, index {result['index_mib']} MiB; "
             + (f"synthesised from {result['from_run']} in {result['synthesis_s']} s"
                if result["synthesis_s"] is not None else "an existing store (--reuse)"),
             f"machine: {result['cpus']} CPUs; load average (1 min) at start "
             f"{result['load_start']}, at end {result['load_end']}",
             "`hpc-health --version` (interpreter and CLI start): " +
             ", ".join(f"{s} s ({code})" for code, s in result["startup_s"].items()), "",
             "| command | code | index | best s | median s | load | within budget (1 s; 2 s for --all) |",
             "|---|---|---|---:|---:|---:|---|"]
    commands = {}
    for r in result["timings"]:
        failed = f" **failed: {r['error']}**" if r.get("error") else ""
        commands.setdefault(r["command"], None)
        lines.append(f"| {r['case']}{failed} | {r['code']} | {r['index']} | {r['best_s']:.2f} "
                     f"| {r['median_s']:.2f} | {r['load']} | "
                     f"{'yes' if r['best_s'] <= _budget(r['case']) else 'no'} |")
    lines += ["", "In one process (`cli.main` called twice): import of hpc_health.cli.main, first "
              "call (with what it imports lazily), second call (the work alone):", "",
              "| command | import s | first call s | second call s |", "|---|---:|---:|---:|"]
    nightly = []
    for name, r in result["in_process"].items():
        if "import_s" not in r:
            nightly.append(f"{name}: " + (f"**failed: {r['error']}**" if r.get("error") else
                           f"{r['best_s']:.2f} s ({r['drifting']} DRIFTING, broad: "
                           f"{r['broad'] or 'none'})"))
            continue
        lines.append(f"| {name}{' **failed: ' + r['error'] + '**' if r.get('error') else ''} "
                     f"| {r['import_s']:.2f} | {r['first_s']:.2f} | {r['second_s']:.2f} |")
    lines += [""] + nightly if nightly else []
    said = {r["command"]: r["said"] for r in result["timings"] if r["code"] == "this"}
    lines += ["", "Commands (and what they concluded, this checkout):", ""]
    lines += [f"    {c}" + (f"\n        -> {said[c]}" if said.get(c) else "") for c in commands]
    return "\n".join(lines)


def _size_mib(path):
    total = 0
    for base, _, files in os.walk(path):
        for f in files:
            try:
                total += os.stat(os.path.join(base, f)).st_size
            except OSError:
                pass
    return round(total / 2**20, 1)


def main(argv=None):
    global STEP_SHARE
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--from-run", type=Path,
                   help="a real run directory (default: the latest run of site local in "
                        "$HPC_HEALTH_STORE, else ~/.local/share/hpc-health)")
    p.add_argument("--store", type=Path,
                   help="the synthetic store to make (default: a temporary directory, removed "
                        "afterwards unless --keep); must not exist or be empty")
    p.add_argument("--keep", action="store_true", help="keep the synthetic store")
    p.add_argument("--reuse", action="store_true",
                   help="time an existing --store made by an earlier --keep run")
    p.add_argument("--nights", type=int, default=365)
    p.add_argument("--repeat", type=int, default=3, help="repetitions of each timing")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--step", type=float, default=0.10,
                   help="worsening of the stepped figures from the upgrade on (fraction)")
    p.add_argument("--step-share", type=float, default=STEP_SHARE,
                   help="share of the figures that step at the upgrade (1: every figure)")
    p.add_argument("--leave-out-tag", action="append", default=[], metavar="TAG",
                   help="drop the source run's checks with this tag (tuning: a run made with "
                        "--tuning stands for plain nightly runs)")
    p.add_argument("--check", help="history of this check (display name) ...")
    p.add_argument("--var", help="... and variable (default: one of the report)")
    p.add_argument("--code", action="append", metavar="COMMIT",
                   help="also time the code of this commit, checked out into a git worktree "
                        f"(repeatable; default: {OLD_COMMIT}, the code before the index)")
    p.add_argument("--no-other", action="store_true", help="time this checkout only")
    p.add_argument("--json", type=Path, help="write the timings here")
    args = p.parse_args(argv)

    STEP_SHARE = args.step_share
    src = (args.from_run or latest_run()).resolve()
    temp = None
    if args.store:
        store = args.store.resolve()
        if store.exists() and any(store.iterdir()) and not args.reuse:
            sys.exit(f"{store} is not empty: give a new directory (or --reuse it)")
    else:
        temp = Path(tempfile.mkdtemp(prefix="store-scale-"))
        store = temp / "store"
    others = []
    load_start = _load()
    try:
        if args.reuse:
            tpl, took = Template(src, "second", args.leave_out_tag), None
        else:
            print(f"synthesising {args.nights} runs from {src} into {store}", file=sys.stderr)
            store.mkdir(parents=True, exist_ok=True)
            tpl, took = synthesise(src, store, args.nights, args.seed, args.step,
                                    leave_out=args.leave_out_tag)
        figures = {k: v for k, v in pick_figures(tpl).items() if v}
        if args.check and args.var:
            figures = {"chosen": (args.check, args.var)}
        for commit in ([] if args.no_other else args.code or [OLD_COMMIT]):
            others.append((commit, worktree(commit)))
        result = {
            "from_run": str(src), "store": str(store),
            "runs": len(list((store / "runs" / SITE).iterdir())), "partitions": 2,
            "figures_per_run": tpl.figures, "figures_per_partition": tpl.figures // 2,
            "testcases_per_partition": tpl.cases_per_partition,
            "store_mib": _size_mib(store), "synthesis_s": None if took is None else round(took, 1),
            "history_of": {k: {"check": c, "var": v} for k, (c, v) in figures.items()},
            "cpus": os.cpu_count(), "load_start": load_start,
            "startup_s": {"this": startup(REPO, store, args.repeat),
                          **{label: startup(tree, store, args.repeat) for label, tree in others}},
        }
        result["timings"], result["in_process"] = measure(store, figures, args.repeat, others)
        result["index_mib"] = round((store / "index.sqlite").stat().st_size / 2**20, 1) \
            if (store / "index.sqlite").exists() else None
        result["load_end"] = _load()
        result["when"] = _stamp(datetime.now(timezone.utc))
    finally:
        for _, tree in others:
            remove_worktree(tree)
        if temp and not args.keep:
            shutil.rmtree(temp, ignore_errors=True)
    print(table(result))
    if temp and args.keep:
        print(f"\nstore kept: {store}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    slow = [r for r in result["timings"] if r["code"] == "this" and r["index"] == "kept"
            and r["best_s"] > _budget(r["case"])]
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
