"""Many short nights on one store, with faults drawn at random.

    python -m bench.soak [--nights 100] [--seed 1] [--out bench/soak/results.json]

Each night is one ``hpc-health run --site local`` of the barrier check (a
few seconds) in a throw-away checkout root, with its store on a small tmpfs
of its own (so that it can be filled and made read-only without touching
anything else; needs root, as the nightly service does).  A fault is drawn
for the night and struck at a random moment of it: SIGTERM, SIGINT or
SIGHUP to the run, kill -9 of the run or of ReFrame, the store's file system
filled and freed, the store made read-only and back, the index locked or
deleted, an import, or a report/compare/history/push at the same time.

After every night the bench checks what the issue asks of a nightly
service: every run that completed is readable with its verdicts, every run
that did not is named as such (damaged or incomplete, with its reason), the
index equals one rebuilt from the run directories, no process of the suite
is left, and nothing outside the store and the scratch directory changed.
The results file keeps every night; ``--table`` prints bench/soak/README.md's
table from it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

from bench.fault_injection.hpc_health_run import throwaway_root

SITE = "local"
FAULTS = ("none", "sigterm", "sigint", "sighup", "kill9_run", "kill9_reframe", "store_full",
          "store_readonly", "index_locked", "index_deleted", "import", "concurrent")
#: The night's check: our barrier kernel, CMake-built, a few seconds.
CHECK = ["--", "-n", "BarrierLatency", "-S", "BarrierLatency.iters=300",
         "-S", "BarrierLatency.warmup=20"]
STORE_MIB = 320


def _env(root, store, cache):
    env = dict(os.environ, HPC_HEALTH_ROOT=str(root), HPC_HEALTH_STORE=str(store))
    # Our kernels only, built with CMake (a cache without Spack, no kit, no
    # spack on PATH): the soak is about the store and the stop, not builds.
    env["HPC_HEALTH_CACHE"] = str(cache)
    env.pop("SPACK_ROOT", None)
    env.pop("HPC_HEALTH_SPACK_KIT", None)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not os.path.exists(os.path.join(p, "spack")))
    return env


class Night:
    def __init__(self, soak, number, fault):
        self.soak, self.number, self.fault = soak, number, fault
        self.notes = []

    def hh(self, *args, **kw):
        return subprocess.run([sys.executable, "-m", "hpc_health", *args],
                              env=self.soak.env, capture_output=True, text=True,
                              timeout=kw.get("timeout", 600))


class Soak:
    def __init__(self, work: Path, seed: int, log=print):
        self.work, self.rng, self.log = work, random.Random(seed), log
        self.root = throwaway_root(work)
        self.store = work / "store"
        self.store.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={STORE_MIB}m", "tmpfs",
                        str(self.store)], check=True)
        self.scratch = work / "scratch"
        site = self.root / "site_configs" / SITE / "site.yaml"
        doc = yaml.safe_load(site.read_text())
        doc["partitions"]["default"].update(scratch=str(self.scratch),
                                            kernels={"samples": 2})
        site.write_text(yaml.safe_dump(doc, sort_keys=False))
        self.env = _env(self.root, self.store, work / "cache")
        self.outside = self._outside_snapshot()
        self.donor_export()

    def close(self):
        subprocess.run(["umount", "-l", str(self.store)], check=False)

    # -- what must not change ------------------------------------------------
    def _outside_snapshot(self):
        """Files of the checkout root (links into the repository not
        followed) and of the work folder, the store, scratch and the
        cache excepted, with their mtimes."""
        snap = {}
        keep_out = {str(self.store), str(self.scratch), str(self.work / "cache")}
        for base in (self.root, self.work):
            for top, dirs, files in os.walk(base):
                dirs[:] = [d for d in dirs if os.path.join(top, d) not in keep_out
                           and not d.startswith("tmp")]
                for name in dirs + files:
                    path = os.path.join(top, name)
                    with contextlib.suppress(OSError):
                        snap[path] = os.lstat(path).st_mtime_ns
        return snap

    # -- one night ----------------------------------------------------------
    def night(self, number):
        fault = self.rng.choice(FAULTS)
        n = Night(self, number, fault)
        before = set(self.run_ids())
        logs_before = set(Path("/tmp").glob("rfm-*.log"))
        if fault == "store_readonly" and self.rng.random() < 0.5:
            # Read-only before the run starts: a tmpfs cannot be remounted
            # read-only while the run holds files open for writing (EBUSY).
            self.readonly(n)
        proc = subprocess.Popen([sys.executable, "-m", "hpc_health", "run", "--site", SITE,
                                 "--tag", f"soak{number}", *CHECK], env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=False)
        # A night lasts 7-10 s here: the strike falls in the set-up, the
        # build, ReFrame's checks or the judgement.
        delay = self.rng.uniform(0.3, 6.5)
        strike = threading.Timer(delay, self.strike, (n, proc))
        strike.start()
        try:
            out, err = proc.communicate(timeout=600)
            ended = time.monotonic()
        finally:
            if strike.is_alive() and not getattr(n, "struck", False):
                n.notes.append("the run ended before the fault was struck")
            strike.cancel()
            strike.join()
        self.undo(n)
        code = proc.returncode
        new = sorted(set(self.run_ids()) - before - self.donor_ids)
        record = {"night": number, "fault": fault, "struck_at_s": round(delay, 1),
                  "exit_code": code, "runs": new, "notes": n.notes,
                  "stderr_tail": err.strip().splitlines()[-2:]}
        if getattr(n, "sent", None):
            # From the signal to the run's exit: the stop Slurm's KillWait allows.
            record["stop_s"] = round(ended - n.sent, 2)
        record.update(self.verify(new, code, fault))
        # hpc-health's own traceback, not ReFrame's output it quotes.
        if "Traceback (most recent call last)" in err.split("ReFrame's last lines:")[0]:
            record["problems"].append("a traceback: " + " | ".join(err.strip().splitlines()[-6:]))
        if record["problems"]:
            record["stderr"] = err[-6000:]
        # ReFrame left its debug log in /tmp (it names our root inside)?
        strays = [p for p in set(Path("/tmp").glob("rfm-*.log")) - logs_before
                  if str(self.root) in p.read_text(errors="replace")]
        if strays and fault == "kill9_run":
            # Nothing runs after SIGKILL to move ReFrame's start-up log.
            record["notes"].append(f"kill -9 left ReFrame's start-up log {strays[0]}")
            for p in strays:
                p.unlink()
        elif strays:
            record["problems"].append(f"ReFrame's log left outside the store: {strays[0]}")
            record["outside_changed"] += len(strays)
        return record

    def readonly(self, n):
        """The store read-only from now on: a read-only bind mount over it
        (a tmpfs with files open for writing cannot be remounted read-only;
        the bind is what new opens see, as after an ext4 error remount)."""
        store = str(self.store)
        res = subprocess.run(["mount", "--bind", store, store], capture_output=True, text=True)
        if res.returncode == 0:
            res = subprocess.run(["mount", "-o", "remount,bind,ro", store],
                                 capture_output=True, text=True)
            n.readonly = True
        if res.returncode == 0:
            n.notes.append("store read-only")
        else:
            n.notes.append(f"read-only mount refused: {res.stderr.strip()[-80:]}")

    def run_ids(self):
        d = self.store / "runs" / SITE
        return sorted(p.name for p in d.iterdir()) if d.is_dir() else []

    def reframe_pids(self, proc):
        out = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    def strike(self, n, proc):
        n.struck = True
        try:
            self._strike(n, proc)
        except Exception as err:    # the bench's own failure, said in the night's record
            n.notes.append(f"the fault could not be struck: {type(err).__name__}: {err}")

    def _strike(self, n, proc):
        fault, rng = n.fault, self.rng
        if proc.poll() is not None:
            n.notes.append("the run had ended before the fault")
            return
        if fault in ("sigterm", "sigint", "sighup"):
            proc.send_signal({"sigterm": signal.SIGTERM, "sigint": signal.SIGINT,
                              "sighup": signal.SIGHUP}[fault])
            n.sent = time.monotonic()
        elif fault == "kill9_run":
            proc.kill()
        elif fault == "kill9_reframe":
            for pid in self.reframe_pids(proc):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        elif fault == "store_full":
            free = shutil.disk_usage(self.store).free
            n.filler = self.store / ".soak-filler"
            with contextlib.suppress(OSError), open(n.filler, "wb") as fp:
                fp.write(b"\0" * free)     # ENOSPC at the end is the point
        elif fault == "store_readonly" and not getattr(n, "readonly", False):
            self.readonly(n)
        elif fault == "index_locked":
            n.locker = subprocess.Popen([sys.executable, "-c", (
                "import sqlite3, sys, time\n"
                f"db = sqlite3.connect({str(self.store / 'index.sqlite')!r}, timeout=1)\n"
                "db.execute('BEGIN EXCLUSIVE'); print('locked', flush=True)\n"
                f"time.sleep({rng.uniform(5, 20):.1f})\n")],
                stdout=subprocess.PIPE, text=True)
        elif fault == "index_deleted":
            for p in self.store.glob("index.sqlite*"):
                with contextlib.suppress(OSError):
                    p.unlink()
        elif fault == "import":
            self.import_one(n)
        elif fault == "concurrent":
            cmd = rng.choice([["report", "--site", SITE], ["history", "--site", SITE, "--all"],
                              ["compare", "--site", SITE, "last:3", "last:1"],
                              ["push", "http://127.0.0.1:9/", "--site", SITE]])
            res = n.hh(*cmd)
            n.notes.append(f"{' '.join(cmd[:1])} exit {res.returncode}")

    def donor_export(self):
        """One run in a store of its own, exported once: what the import
        nights import into the soak's store while a run is going on."""
        if getattr(self, "_donor", None) is None:
            donor = self.work / "donor-store"
            env = dict(self.env, HPC_HEALTH_STORE=str(donor))
            subprocess.run([sys.executable, "-m", "hpc_health", "run", "--site", SITE, *CHECK],
                           env=env, capture_output=True, text=True, timeout=600)
            #: Runs that arrive by import, not by a night's run.
            self.donor_ids = {p.name for p in (donor / "runs" / SITE).iterdir()}
            self._donor = self.work / "donor.json.gz"
            res = subprocess.run([sys.executable, "-m", "hpc_health", "export", "--site", SITE,
                                  "last:1", "-o", str(self._donor)], env=env,
                                 capture_output=True, text=True, timeout=300)
            if res.returncode != 0:
                raise RuntimeError(f"bench.soak: the donor export failed: {res.stderr}")
            shutil.rmtree(donor)
            self.outside = self._outside_snapshot()
        return self._donor

    def import_one(self, n):
        res = n.hh("import", str(self._donor))
        n.notes.append(f"import exit {res.returncode}: {res.stdout.strip()[-120:]}")

    def undo(self, n):
        if getattr(n, "filler", None):
            with contextlib.suppress(OSError):
                n.filler.unlink()
        if getattr(n, "readonly", False):
            subprocess.run(["umount", str(self.store)], check=False)   # the bind on top
        if getattr(n, "locker", None):
            n.locker.kill()
            n.locker.wait()

    # -- the checks after a night ------------------------------------------
    def verify(self, new, code, fault):
        problems, lost = [], 0
        if len(new) > 1:
            problems.append(f"{len(new)} run directories for one run")
        listing = self.hh_json_listing()
        for run_id in new:
            meta_path = self.store / "runs" / SITE / run_id / "run.json"
            try:
                meta = json.loads(meta_path.read_text())
            except (OSError, ValueError) as err:
                meta = None
                named = listing.get(run_id, ("?", ""))
                if named[0] not in ("damaged", "incomplete"):
                    problems.append(f"{run_id}: run.json unreadable ({err}) and not named "
                                    f"damaged")
                continue
            state, reason = listing.get(run_id, (None, None))
            finished = "exit_code" in meta and meta["exit_code"] in (0, 1, 3)
            if finished and not meta.get("interrupted"):
                if state != "ok":
                    lost += 1
                    problems.append(f"{run_id}: completed (exit {meta['exit_code']}) but "
                                    f"the index says {state}: {reason}")
                elif not (self.store / "runs" / SITE / run_id / "verdicts.json").exists():
                    lost += 1
                    problems.append(f"{run_id}: completed without verdicts.json")
            elif state == "ok" and not meta.get("interrupted") and "exit_code" not in meta:
                problems.append(f"{run_id}: never finished but the index calls it ok")
        if code is not None and code < 0 and not new:
            pass    # died of the signal before a run directory existed: nothing to lose
        elif code is not None and code not in (0, 1, 2, 3, 129, 130, 137, 143, -9):
            problems.append(f"exit code {code}")
        mismatch = self.index_mismatch()
        if mismatch:
            problems.append(mismatch)
        orphans = self.orphans()
        if orphans:
            problems.append(f"left running: {orphans}")
            for pid in orphans:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid.split()[0]), signal.SIGKILL)
        changed = self.outside_changes()
        if changed:
            problems.append(f"changed outside the store: {changed[:3]}")
        return {"lost": lost, "orphans": len(orphans), "index_mismatch": bool(mismatch),
                "outside_changed": len(changed), "problems": problems}

    def hh_json_listing(self):
        """{run_id: (state, reason)} from the store's index, refreshed as any
        command would."""
        out = subprocess.run([sys.executable, "-c", (
            "import json\nfrom hpc_health.store import index\n"
            "with index.open_index(lambda s: None) as idx:\n"
            "    idx.refresh()\n"
            "    rows = idx.db.execute('SELECT run_id, state, reason FROM runs').fetchall()\n"
            "print(json.dumps({r: [s, why] for r, s, why in rows}))\n")],
            env=self.env, capture_output=True, text=True, timeout=300)
        if out.returncode != 0:
            return {}
        return {k: tuple(v) for k, v in json.loads(out.stdout).items()}

    def index_rows(self, store):
        db = sqlite3.connect(store / "index.sqlite")
        try:
            runs = sorted(db.execute("SELECT site, run_id, state, exit_code FROM runs"))
            figs = sorted(db.execute("SELECT run_id, check_name, variable, value, verdict "
                                     "FROM figures"), key=repr)
            return runs, figs
        finally:
            db.close()

    def index_mismatch(self):
        """The store's index (refreshed by :meth:`hh_json_listing` just
        before, as any command refreshes it) against one built from scratch
        from a copy of the run directories."""
        with tempfile.TemporaryDirectory(dir=self.work) as tmp:
            copy = Path(tmp) / "store"
            shutil.copytree(self.store / "runs", copy / "runs", symlinks=True)
            subprocess.run([sys.executable, "-c", (
                "from hpc_health.store import index\n"
                "with index.open_index(lambda s: None) as idx: idx.refresh()\n")],
                env=dict(self.env, HPC_HEALTH_STORE=str(copy)), check=True, timeout=300)
            live, rebuilt = self.index_rows(self.store), self.index_rows(copy)
        if live != rebuilt:
            return (f"index differs from a rebuild: {len(live[0])} runs/{len(live[1])} "
                    f"figures against {len(rebuilt[0])}/{len(rebuilt[1])}")
        return ""

    def orphans(self, grace=15.0):
        """Processes of the suite still there *grace* seconds after the
        night: ReFrame gets SIGTERM when its parent dies (even by kill -9)
        and takes a few seconds to stop its jobs; what outlives that is left."""
        deadline = time.monotonic() + grace
        while True:
            out = subprocess.run(["pgrep", "-af", str(self.root)], capture_output=True,
                                 text=True)
            left = [ln for ln in out.stdout.splitlines() if "pgrep" not in ln]
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.5)

    def outside_changes(self):
        now = self._outside_snapshot()
        return sorted(k for k in set(now) | set(self.outside)
                      if now.get(k) != self.outside.get(k))


def table(results):
    from collections import Counter
    faults = Counter(r["fault"] for r in results["nights"])
    lines = ["| nights | " + " | ".join(FAULTS) + " | runs lost | orphans | index mismatches "
             "| changed outside |",
             "|---" * (len(FAULTS) + 5) + "|",
             f"| {len(results['nights'])} | " + " | ".join(str(faults[f]) for f in FAULTS) +
             f" | {sum(r['lost'] for r in results['nights'])} | "
             f"{sum(r['orphans'] for r in results['nights'])} | "
             f"{sum(r['index_mismatch'] for r in results['nights'])} | "
             f"{sum(1 for r in results['nights'] if r['outside_changed'])} |"]
    stops = sorted(r["stop_s"] for r in results["nights"] if "stop_s" in r)
    if stops:
        lines.append(f"\nStop after SIGTERM/SIGINT/SIGHUP ({len(stops)} nights): median "
                     f"{stops[len(stops) // 2]:.1f} s, longest {stops[-1]:.1f} s.")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.soak")
    ap.add_argument("--nights", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results.json")
    ap.add_argument("--table", action="store_true", help="print the table of --out and stop")
    args = ap.parse_args(argv)
    if args.table:
        print(table(json.loads(args.out.read_text())))
        return 0
    if os.geteuid() != 0:
        print("bench.soak: needs root (its store is a tmpfs it fills and remounts read-only)",
              file=sys.stderr)
        return 2
    # A stopped soak still unmounts its store and removes its work folder.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = Path(tempfile.mkdtemp(prefix="hpc-health-soak."))
    soak = Soak(work, args.seed)
    results = {"seed": args.seed, "nights": [], "started": time.strftime("%FT%TZ", time.gmtime())}
    try:
        for i in range(1, args.nights + 1):
            t0 = time.monotonic()
            record = soak.night(i)
            record["seconds"] = round(time.monotonic() - t0, 1)
            results["nights"].append(record)
            print(f"night {i:3d}: {record['fault']:15s} exit {record['exit_code']!s:4s} "
                  f"{record['seconds']:5.1f} s"
                  + (f"  PROBLEMS: {record['problems']}" if record["problems"] else ""),
                  flush=True)
            args.out.write_text(json.dumps(results, indent=1) + "\n")
    finally:
        soak.close()
        shutil.rmtree(work, ignore_errors=True)
    print(table(results))
    bad = sum(len(r["problems"]) for r in results["nights"])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
