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
import http.server
import json
import os
import random
import shutil
import signal
import socketserver
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

from bench import startup_signal
from bench.fault_injection.hpc_health_run import throwaway_root

SITE = "local"
FAULTS = ("none", "sigterm", "sigint", "sighup", "kill9_run", "kill9_reframe", "store_full",
          "store_readonly", "index_locked", "index_deleted", "import", "concurrent",
          "spack_lock", "push_302", "push_trickle", "future_run", "latin1", "sigint_early")
#: The night's check: our barrier kernel, CMake-built, a few seconds.
CHECK = ["--", "-n", "BarrierLatency", "-S", "BarrierLatency.iters=300",
         "-S", "BarrierLatency.warmup=20"]
STORE_MIB = 320
#: The spec sets of the local site, whose Spack environments a spack_lock
#: night holds (``SPACK_ENVS/default-gnu-mpi/<spec set>``).
SPEC_SETS = ("hpc-health-kernels", "stream", "osu", "ior")
#: Faults set up before the night starts, with nothing struck during it.
BEFORE_THE_NIGHT = ("spack_lock", "future_run", "latin1")
#: A locale whose encoding is not UTF-8 (glibc reads it as en_US.iso88591).
LATIN1 = "en_US.ISO-8859-1"
#: The push nights' deadline for one request (``push --timeout``).
PUSH_TIMEOUT = 3
TRACEBACK = "Traceback (most recent call last)"


def own_traceback(text):
    """The traceback in *text* that is hpc-health's own (not ReFrame's output
    it quotes); '' when none.  Python's own start-up (its site module, the
    search of ``-m``) is told apart: a SIGINT there prints a
    KeyboardInterrupt before any line of the suite runs (docs/faults.md
    row 77), returned as ``"python start-up: ..."``."""
    text = text.split("ReFrame's last lines:")[0]
    if TRACEBACK not in text:
        return ""
    tail = text[text.index(TRACEBACK):].strip().splitlines()
    said = " | ".join(tail[-6:])
    if tail[-1].strip() == "KeyboardInterrupt" and \
            startup_signal.classify(text) == "python's start-up":
        return "python start-up: " + said
    return said


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
        #: Tracebacks of the commands run beside the night, failed checks.
        self.tracebacks, self.failed = [], []
        #: KeyboardInterrupts printed by Python's own start-up (faults.md 77).
        self.startup_interrupts = []
        self.env = soak.env

    def hh(self, *args, **kw):
        """One hpc-health command beside the night; a traceback of it is the
        night's (``self.tracebacks``)."""
        res = subprocess.run([sys.executable, "-m", "hpc_health", *args],
                             env=kw.get("env", self.env), capture_output=True, text=True,
                             timeout=kw.get("timeout", 600))
        for stream in (res.stderr, res.stdout):
            self.traceback(args[0], stream)
        return res

    def traceback(self, what, text):
        tb = own_traceback(text)
        if tb.startswith("python start-up: "):
            self.startup_interrupts.append(f"{what}: {tb}")
        elif tb:
            self.tracebacks.append(f"{what}: {tb}")

    def check(self, ok, what):
        """One check of the night's fault; a failed one is a problem."""
        if not ok:
            self.failed.append(what)


class Soak:
    def __init__(self, work: Path, seed: int, log=print, faults=FAULTS):
        self.work, self.rng, self.log = work, random.Random(seed), log
        self.faults = faults
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
        # The Spack environments of this root in the work folder (not the
        # user's ~/.local/share), so that a spack_lock night can hold them.
        self.spack_envs = work / "spack-envs"
        doc["spack"]["env_dir"] = str(self.spack_envs)
        site.write_text(yaml.safe_dump(doc, sort_keys=False))
        self.env_locks = []
        for name in SPEC_SETS:
            lock = self.spack_envs / "default-gnu-mpi" / name / ".spack-env" / "transaction_lock"
            lock.parent.mkdir(parents=True)
            lock.touch()
            self.env_locks.append(lock)
        #: Run ids placed in the store by future_run nights.
        self.placed_ids = set()
        self.servers = {"push_302": dashboard_302(), "push_trickle": dashboard_trickle()}
        self.env = _env(self.root, self.store, work / "cache")
        self.outside = self._outside_snapshot()
        self.donor_export()

    def close(self):
        for server, _ in self.servers.values():
            server.shutdown()
            server.server_close()
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
        fault = self.rng.choice(self.faults)
        n = Night(self, number, fault)
        before = set(self.run_ids())
        logs_before = set(Path("/tmp").glob("rfm-*.log"))
        if fault == "store_readonly" and self.rng.random() < 0.5:
            # Read-only before the run starts: a tmpfs cannot be remounted
            # read-only while the run holds files open for writing (EBUSY).
            self.readonly(n)
        elif fault == "spack_lock":
            self.hold_spack_envs(n)
        elif fault == "future_run":
            self.place_future_run(n)
        elif fault == "latin1":
            n.env = dict(self.env, LC_ALL=LATIN1, LANG=LATIN1)
            n.env.pop("PYTHONIOENCODING", None)
            n.env.pop("PYTHONUTF8", None)
        if fault.startswith("push_"):
            # Half the nights while the run goes on, half after it.
            n.after = self.rng.random() < 0.5
        proc = subprocess.Popen([sys.executable, "-m", "hpc_health", "run", "--site", SITE,
                                 "--tag", f"soak{number}", *CHECK], env=n.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=False)
        began = time.monotonic()
        # The strike falls in the set-up, the build, ReFrame's checks or the
        # judgement: within 85 % of the run's length on the recent nights
        # (3-8 s here, with the load; a fixed 6.5 s missed 42 runs of 100).
        delay = self.rng.uniform(0.3, self.strike_within())
        if fault == "sigint_early":
            delay = self.rng.uniform(0.0, 0.3)      # Python still importing the command
        elif fault.startswith("push_"):
            delay = self.rng.uniform(0.3, 2.0)      # while the run goes on
        strike = threading.Timer(delay, self.strike, (n, proc))
        strike.start()
        try:
            out, err = proc.communicate(timeout=600)
            ended = time.monotonic()
        finally:
            if strike.is_alive() and not getattr(n, "struck", False) \
                    and fault not in BEFORE_THE_NIGHT:
                n.notes.append("the run ended before the fault was struck")
            strike.cancel()
            strike.join()
        if code_completed(proc.returncode):
            self.lengths.append(ended - began)
        if n.fault.startswith("push_") and not getattr(n, "struck", False):
            n.after = True      # the run ended first: the push after it
        if getattr(n, "after", False):
            self.push(n)
        self.undo(n)
        code = proc.returncode
        new = sorted(set(self.run_ids()) - before - self.donor_ids - self.placed_ids)
        record = {"night": number, "fault": fault, "struck_at_s": round(delay, 1),
                  "run_s": round(ended - began, 1),
                  "exit_code": code, "runs": new, "notes": n.notes,
                  "stderr_tail": err.strip().splitlines()[-2:]}
        if getattr(n, "sent", None):
            # From the signal to the run's exit: the stop Slurm's KillWait allows.
            record["stop_s"] = round(ended - n.sent, 2)
        record.update(self.verify(new, code, fault))
        # hpc-health's own tracebacks (not ReFrame's output it quotes): the
        # run's, and those of the commands beside it (push, report, runs...).
        for stream in (err, out):
            n.traceback("run", stream)
        self.check_fault(n, new, code, out, err)
        record["tracebacks"] = len(n.tracebacks)
        if n.startup_interrupts:
            # Not the suite's: Python's site module or -m's search, before
            # the command's first line (docs/faults.md row 77); counted apart.
            record["python_startup_interrupts"] = n.startup_interrupts
        record["problems"] += [f"a traceback: {tb}" for tb in n.tracebacks]
        record["checks_failed"] = len(n.failed)
        record["problems"] += n.failed
        if record["problems"] or n.startup_interrupts:
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

    def strike_within(self):
        """85 % of the median length of the last ten runs that completed
        (the donor's first), at least 1 s."""
        recent = sorted(self.lengths[-10:])
        return max(1.0, 0.85 * recent[len(recent) // 2])

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
        if fault.startswith("push_"):
            if not n.after:
                self.push(n)
            return
        if proc.poll() is not None:
            n.notes.append("the run had ended before the fault")
            return
        if fault in ("sigterm", "sigint", "sighup", "sigint_early"):
            proc.send_signal({"sigterm": signal.SIGTERM, "sigint": signal.SIGINT,
                              "sighup": signal.SIGHUP, "sigint_early": signal.SIGINT}[fault])
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
            t0 = time.monotonic()
            subprocess.run([sys.executable, "-m", "hpc_health", "run", "--site", SITE, *CHECK],
                           env=env, capture_output=True, text=True, timeout=600)
            #: How long the runs that completed took (seconds).
            self.lengths = [time.monotonic() - t0]
            #: Runs that arrive by import, not by a night's run.
            self.donor_ids = {p.name for p in (donor / "runs" / SITE).iterdir()}
            #: The run future_run nights place in the store, re-dated.
            self._donor_run = self.work / "donor-run"
            shutil.copytree(donor / "runs" / SITE / sorted(self.donor_ids)[-1],
                            self._donor_run, symlinks=True)
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
        if getattr(n, "spack_holder", None):
            n.spack_holder.kill()
            n.spack_holder.wait()

    # -- the faults of issue 44 -------------------------------------------
    def hold_spack_envs(self, n):
        """Another process holds every Spack environment of the site with
        Spack's kind of lock (POSIX ``fcntl``, exclusive) for the whole night,
        as a concurrent or stopped ``spack -e ENV concretize`` does."""
        n.spack_holder = subprocess.Popen([sys.executable, "-c", (
            "import fcntl, sys, time\n"
            "fps = [open(p, 'r+') for p in sys.argv[1:]]\n"
            "for fp in fps: fcntl.lockf(fp, fcntl.LOCK_EX)\n"
            "print('held', flush=True); time.sleep(3600)\n"),
            *map(str, self.env_locks)], stdout=subprocess.PIPE, text=True)
        n.spack_holder.stdout.readline()
        n.notes.append(f"Spack environments held by pid {n.spack_holder.pid}")

    def place_future_run(self, n):
        """A run directory dated in the future put in the store (the donor's
        run, renamed and re-dated: a clock that was wrong, or an import from
        a machine whose clock was)."""
        stamp = f"2099{(n.number - 1) // 28 % 12 + 1:02d}{(n.number - 1) % 28 + 1:02d}T020000Z"
        dest = self.store / "runs" / SITE / stamp
        if dest.exists():
            return
        shutil.copytree(self._donor_run, dest, symlinks=True)
        meta_path = dest / "run.json"
        meta = json.loads(meta_path.read_text())
        iso = f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}T02:00:00Z"
        for key in ("started", "finished"):
            if key in meta:
                meta[key] = iso
        if "run_id" in meta:
            meta["run_id"] = stamp
        meta_path.write_text(json.dumps(meta, indent=1) + "\n")
        self.placed_ids.add(stamp)
        n.future = stamp
        n.notes.append(f"run {stamp} placed in the store")

    def push(self, n):
        """``hpc-health push`` to a dashboard that answers 302 to the POST,
        or trickles its answer a byte a second: nothing may be recorded as
        delivered, and the push ends within its deadline with one line."""
        _, url = self.servers[n.fault]
        acked = self.acknowledged()
        t0 = time.monotonic()
        res = n.hh("push", url, "--site", SITE, "--timeout", str(PUSH_TIMEOUT), "--retries", "0",
                   timeout=120)
        took = time.monotonic() - t0
        n.notes.append(f"push {'after' if n.after else 'during'} the night: exit "
                       f"{res.returncode} in {took:.1f} s: {res.stderr.strip()[-160:]}")
        n.check(self.acknowledged() == acked, "push: runs recorded as delivered to a "
                f"dashboard that took none: {sorted(self.acknowledged() - acked)[:3]}")
        said = [ln for ln in res.stderr.splitlines() if not ln.startswith("hpc-health: index:")]
        if res.returncode == 0:
            # Nothing queued (every run of the store so far refused or none): fine
            # only when it sent nothing.
            n.check(" 0 run(s) of " in res.stdout, f"push exit 0: {res.stdout.strip()[-160:]}")
        else:
            want = ("answered 302 Found to the POST" if n.fault == "push_302" else
                    f"did not answer within {PUSH_TIMEOUT} s")
            n.check(res.returncode == 1 and len(said) == 1 and want in said[0],
                    f"push exit {res.returncode}, not one line saying {want!r}: {said[-3:]}")
        # The deadline of its one request, Python's start and the store's index.
        n.check(took < PUSH_TIMEOUT + 25, f"push took {took:.1f} s (--timeout {PUSH_TIMEOUT})")

    def acknowledged(self):
        """Every run any push recorded as delivered, by URL (its file)."""
        got = set()
        for p in (self.store / "push").glob("*.json"):
            with contextlib.suppress(OSError, ValueError):
                doc = json.loads(p.read_text())
                got |= {(p.name, run) for run in doc.get("acknowledged", [])}
        return got

    def check_fault(self, n, new, code, out, err):
        """What the night's fault asks beyond the checks of every night."""
        fault = n.fault
        text = out + err
        completed = code in (0, 1, 3)
        if fault == "spack_lock":
            # The barrier night needs no Spack: the held environments must
            # neither stop nor fail it; any line about the lock names its holder.
            n.check(completed and len(new) == 1, f"exit {code} with Spack's environments held")
            for line in text.splitlines():
                if "transaction_lock" in line:
                    n.check(f"pid {n.spack_holder.pid}" in line,
                            f"the Spack lock said without its holder: {line[:200]}")
        elif fault == "latin1":
            n.check("UnicodeEncodeError" not in text and "UnicodeDecodeError" not in text,
                    f"a Unicode error under {LATIN1}: {err.strip()[-200:]}")
            n.check(completed and len(new) == 1, f"exit {code} under {LATIN1}")
            for run_id in new:
                meta = self.run_meta(run_id)
                n.check(meta.get("exit_code") == code and meta.get("finished"),
                        f"{run_id}: run.json without its exit code or end under {LATIN1}")
            for cmd in (["runs", "--site", SITE], ["report", "--site", SITE]):
                res = n.hh(*cmd)
                n.check(res.returncode in (0, 1) and "UnicodeEncodeError" not in res.stderr,
                        f"{cmd[0]} under {LATIN1}: exit {res.returncode} "
                        f"{res.stderr.strip()[-160:]}")
        elif fault == "sigint_early":
            # 130 (stopped, while importing or as in row 23), or the run
            # finished; Python's start-up may die of it (-2) or fail its
            # site module (1) with no run directory.
            early = not new and (code == -2 or (code == 1 and n.startup_interrupts))
            n.check(code in (0, 1, 3, 130) or early, f"SIGINT early: exit {code}")
        if self.placed_ids:
            # Every night from the first future run on: never the latest.
            self.check_future(n, new, code)

    def check_future(self, n, new, code):
        res = n.hh("runs", "--site", SITE)
        for stamp in sorted(self.placed_ids):
            line = next((ln for ln in res.stdout.splitlines()
                         if ln.startswith(f"{SITE}:{stamp} ")), "")
            n.check("DATED IN THE FUTURE" in line,
                    f"runs: {stamp} not named as dated in the future: {line[:160]!r}")
        res = n.hh("report", "--site", SITE)
        first = (res.stdout.splitlines() or [""])[0]
        n.check(not any(stamp in first for stamp in self.placed_ids),
                f"report took the future run as the latest: {first[:160]!r}")
        if new and code in (0, 1, 3) and n.fault == "future_run":
            n.check(first.startswith(f"run {new[0]} "),
                    f"report's latest is not tonight's run {new[0]}: {first[:160]!r}")

    def run_meta(self, run_id):
        try:
            return json.loads((self.store / "runs" / SITE / run_id / "run.json").read_text())
        except (OSError, ValueError):
            return {}

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


def code_completed(code):
    return code in (0, 1, 3)


def _serve(handler):
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/hpc-health"


def dashboard_302():
    """A dashboard that moved: 302 to the POST, 200 to the GET it leads to."""
    class Moved(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(302)
            self.send_header("Location", "/login")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Moved)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/hpc-health"


def dashboard_trickle():
    """A dashboard that answers 200 a byte a second (each byte well inside a
    socket timeout, the whole far past the push's deadline)."""
    class Trickle(socketserver.BaseRequestHandler):
        def handle(self):
            with contextlib.suppress(OSError):
                self.request.recv(65536)
                for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n":
                    self.request.sendall(bytes([byte]))
                    time.sleep(1)
    return _serve(Trickle)


def table(results):
    from collections import Counter
    nights = results["nights"]
    faults = Counter(r["fault"] for r in nights)
    shown = [f for f in FAULTS if faults[f]] + sorted(set(faults) - set(FAULTS))
    lines = ["| nights | " + " | ".join(shown) + " | runs lost | orphans | index mismatches "
             "| changed outside | tracebacks | checks failed |",
             "|---" * (len(shown) + 7) + "|",
             f"| {len(nights)} | " + " | ".join(str(faults[f]) for f in shown) +
             f" | {sum(r['lost'] for r in nights)} | "
             f"{sum(r['orphans'] for r in nights)} | "
             f"{sum(r['index_mismatch'] for r in nights)} | "
             f"{sum(1 for r in nights if r['outside_changed'])} | "
             f"{sum(r.get('tracebacks', 0) for r in nights)} | "
             f"{sum(r.get('checks_failed', 0) for r in nights)} |"]
    startup = [r["night"] for r in nights if r.get("python_startup_interrupts")]
    if startup:
        lines.append(f"\nPython's own start-up printed a KeyboardInterrupt (before the "
                     f"suite's first line, docs/faults.md row 77) on {len(startup)} night(s): "
                     f"{startup}.")
    missed = [r["night"] for r in nights
              if any("ended before the fault" in note for note in r["notes"])]
    if missed:
        lines.append(f"\nThe run had ended before the fault was struck on {len(missed)} "
                     f"night(s): {missed}.")
    stops = sorted(r["stop_s"] for r in nights if "stop_s" in r)
    if stops:
        lines.append(f"\nStop after SIGTERM/SIGINT/SIGHUP ({len(stops)} nights): median "
                     f"{stops[len(stops) // 2]:.1f} s, longest {stops[-1]:.1f} s.")
    codes = {}
    for r in nights:
        codes.setdefault(r["fault"], Counter())[r["exit_code"]] += 1
    lines += ["", "| fault | exit codes (nights) |", "|---|---|"]
    lines += [f"| `{f}` | " + ", ".join(f"{c}: {k}" for c, k in sorted(
        codes[f].items(), key=lambda ck: (ck[0] is None, ck[0] or 0))) + " |"
        for f in sorted(codes)]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.soak")
    ap.add_argument("--nights", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results.json")
    ap.add_argument("--table", action="store_true", help="print the table of --out and stop")
    ap.add_argument("--faults", help="draw only these (comma-separated; to try a new one)")
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
    # Started in the background of a script (nohup ... &), the bench would
    # have SIGINT ignored, and so would every night it starts: a SIGINT
    # before the run's first line would be lost, not struck.  Its nights get
    # the default, as from a terminal or a service.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    work = Path(tempfile.mkdtemp(prefix="hpc-health-soak."))
    faults = tuple(args.faults.split(",")) if args.faults else FAULTS
    unknown = set(faults) - set(FAULTS)
    if unknown:
        ap.error(f"unknown faults: {sorted(unknown)}")
    soak = Soak(work, args.seed, faults=faults)
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
