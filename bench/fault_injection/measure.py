"""One fault measured: warm-up, a baseline that becomes the product's
reference, calibration of the fault's strength to each nominal size, then
faulty and clean nights interleaved, every night judged as ``hpc-health``
judges a run (``analysis.judge``).  The README's Method section is the
design; this module is its code."""

from __future__ import annotations

import math
import time

from hpc_health import stats

from . import analysis, quiet
from .system import FaultError


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def split_samples(k, rounds):
    """How many of a night's k samples each round takes (as even as can be)."""
    if not 1 <= rounds <= k:
        raise ValueError(f"--rounds must be between 1 and --samples ({k}), got {rounds}")
    return [k // rounds + (1 if r < k % rounds else 0) for r in range(rounds)]


class QuietBudget:
    """Waiting for other processes to leave the CPUs, within one total
    budget of seconds for the whole command (``--max-wait``)."""

    def __init__(self, foreign_cpu, max_wait, log=log):
        self.foreign_cpu, self.max_wait, self.log = foreign_cpu, max_wait, log
        self.waited = 0.0

    def wait(self):
        """Wait for a quiet window; False once the budget is spent."""
        left = self.max_wait - self.waited
        if left <= 0:
            return False
        t = time.monotonic()
        ok = quiet.wait_quiet(self.foreign_cpu, max_wait=left, log=self.log)
        self.waited += time.monotonic() - t
        return ok


class FaultMeasurement:
    """The nights of one fault, recorded into ``recorder`` as they come."""

    def __init__(self, fault, opts, recorder, budget):
        self.fault, self.opts, self.rec, self.budget = fault, opts, recorder, budget
        self.fr = recorder.fault(fault.name)
        self.k = opts.samples

    # --- the design, step by step ---------------------------------------------

    def run(self):
        fr, opts, fault = self.fr, self.opts, self.fault
        fr["what"] = fault.what
        fr["samples"], fr["baseline_runs"] = opts.samples, opts.baseline_runs
        fr["rounds"] = opts.rounds
        # Results files outlive changes to the statistics: say which one judged.
        fr["estimator"] = stats.ESTIMATOR
        try:
            self.wl = fault.workload()
        except FaultError as exc:
            fr.update(status="skipped", reason=str(exc))
            log(f"{fault.name}: skipped: {exc}")
            return
        fr.update(workload=self.wl.describe(), primary=self.wl.primary,
                  metrics=[m.__dict__ for m in self.wl.metrics])
        t0 = time.time()
        try:
            with fault.session() as self.renv:
                fr["session"] = fault.session_info
                self.clean_env = fault.clean_env()
                self._measure()
            fr["status"] = "ok"
        except FaultError as exc:
            fr.update(status="skipped", reason=str(exc))
            log(f"{fault.name}: skipped: {exc}")
        except KeyboardInterrupt:
            fr["status"] = "interrupted"
            raise
        except Exception as exc:   # recorded; the next fault still runs
            fr.update(status="error", reason=f"{type(exc).__name__}: {exc}")
            log(f"{fault.name}: ERROR: {exc}")
        finally:
            fr["seconds"] = round(time.time() - t0, 1)
            self.rec.save()

    def _measure(self):
        fr, opts, fault, wl, k = self.fr, self.opts, self.fault, self.wl, self.k
        self.budget.wait()
        log(f"{fault.name}: workload {wl.name}; warm-up")
        wl.night(k, self.renv, self.clean_env)   # first-touch, caches, page-ins: not a night
        # Interleaved: a short pilot sets the fault's scale and what to
        # trial; the reference itself comes from baseline nights spread
        # through the trial block, so it sees the same stretch of the
        # machine's life as the nights it judges.
        interleaved = opts.baseline == "interleaved"
        first = "pilot" if interleaved else "baseline"
        self._nights([(analysis.CLEAN, None, first)]
                     * (opts.pilot_runs if interleaved else opts.baseline_runs))
        self.refs = self._reference_from(first)
        fault.set_clean(self.refs)
        fr["baseline_placement"] = opts.baseline

        self.direction = next(m.direction for m in wl.metrics if m.name == wl.primary)
        promised = analysis.promised_mdc(self.refs[wl.primary], self.direction, k,
                                         len(wl.metrics))
        fr["promised_mdc"] = promised
        sizes, skipped = analysis.sizes_to_trial(promised)
        if opts.trial_unclaimed:
            sizes, skipped = dict(analysis.SIZES), {}
        fr["not_trialled"] = skipped
        for size in skipped:
            log(f"{fault.name}: {size} not trialled: the reference promises an MDC of "
                f"{100 * promised:.1f} % with {k} samples, so it is not claimed "
                f"(--trial-unclaimed runs it anyway)")
        fr["calibration"] = {}
        for size, target in sizes.items():
            self._calibrate(size, target)

        order = analysis.schedule(opts.clean_runs, opts.trials, tuple(sizes))
        specs = [(kind, None if kind == analysis.CLEAN
                  else fr["calibration"][kind]["strength"], "trial") for kind in order]
        if not interleaved:
            self._nights(specs, self._judge)
            return
        self._nights(analysis.interleave(
            specs, [(analysis.CLEAN, None, "baseline")] * opts.baseline_runs))
        self.refs = self._reference_from("baseline")
        fr["promised_mdc"] = analysis.promised_mdc(self.refs[wl.primary], self.direction, k,
                                                   len(wl.metrics))
        fr["not_trialled"] = {size: fr["promised_mdc"] for size in skipped}
        for n in fr["nights"]:
            if n["phase"] == "trial":
                self._judge(n)

    def _calibrate(self, size, target):
        """The strength that induces ``target`` (fraction worse), recorded
        under ``calibration[size]``."""
        fault, opts, primary = self.fault, self.opts, self.wl.primary
        points = []
        s = fault.initial_strength(target)
        for _ in range(opts.calibration_steps):
            s = min(fault.s_max, max(fault.s_min, s))
            clean_vals, faulty_vals = [], []
            for _ in range(opts.calibration_pairs):
                clean_vals += self._night(analysis.CLEAN, "calibration")["values"][primary]
                faulty_vals += self._night(size, "calibration", s)["values"][primary]
            # The product's own location: a pooled median jumps between
            # launch levels (slow rank, 1.5/2.8/1.9 us of delay read as
            # 13/77/10 %), which misled the knob search.
            e = analysis.worse_by(stats.location(faulty_vals), stats.location(clean_vals),
                                  self.direction)
            points.append((s, e))
            log(f"{fault.name}: calibrating {size}: {fault.setting(s)} -> {100 * e:+.1f} %")
            if self._close_enough(e, target):
                break
            nxt = analysis.next_strength(points, target, fault.s_min, fault.s_max, fault.slope)
            if nxt is None:
                break
            s = nxt
        s, e = analysis.best_point(points, target)
        how = "closest try"
        if not self._close_enough(e, target):
            fitted = analysis.fit_strength(points, target, fault.s_min, fault.s_max)
            if fitted is not None:
                s, e, how = fitted, None, "power-law fit through all tries"
        self.fr["calibration"][size] = {"target": target, "points": points, "strength": s,
                                        "knob": fault.setting(s), "calibrated_change": e,
                                        "chosen_by": how}
        log(f"{fault.name}: {size} -> {fault.setting(s)} ({how})")
        self.rec.save()

    def _close_enough(self, change, target):
        return (abs(math.log((1 + max(change, -0.99)) / (1 + target)))
                <= self.opts.calibration_tolerance)

    def _reference_from(self, phase):
        """The product's references from the clean nights of ``phase``."""
        runs = [n for n in self.fr["nights"] if n["phase"] == phase]
        refs = {m.name: analysis.reference_for(runs, m) for m in self.wl.metrics}
        key = "reference" if phase == "baseline" else f"{phase}_reference"
        self.fr[key] = {name: r.to_dict() for name, r in refs.items()}
        for name, r in refs.items():
            log(f"{self.fault.name}: {phase} reference {name} = {r.value:.4g} {r.unit}, bound "
                f"±{100 * r.upper:.1f} %, between-run "
                f"{100 * (r.between_run_spread or 0):.1f} %, within-run "
                f"{100 * (r.within_run_spread or 0):.1f} %")
        return refs

    def _judge(self, n):
        n["verdicts"] = analysis.judge(self.refs, self.wl.metrics, n["values"])
        v = n["verdicts"][self.wl.primary]
        log(f"{self.fault.name}: {n['kind']:>5}: {self.wl.primary} {v['value']:.4g} "
            f"({100 * v['worse_by']:+.1f} %) {v['verdict']}")

    # --- nights -----------------------------------------------------------------

    def _chunk(self, kind, n_samples, strength=None):
        """n_samples of the workload in one go, the fault on or off; re-run
        while other processes used the CPUs (--reruns)."""
        opts = self.opts
        for attempt in range(opts.reruns + 1):
            t = time.time()
            meter = quiet.CpuMeter()
            info = {}
            if strength is None:
                values = self.wl.night(n_samples, self.renv, self.clean_env)
            else:
                with self.fault.apply(strength) as (env, info):
                    values = self.wl.night(n_samples, self.renv, env)
            foreign, steal = meter.foreign()
            if foreign <= opts.foreign_cpu or attempt == opts.reruns:
                break
            self.fr["reruns"] = self.fr.get("reruns", 0) + 1
            log(f"{self.fault.name}: other processes used {foreign:.2f} cores during this "
                f"{kind} run: discarded, re-run when quiet")
            self.budget.wait()
        return {"t": t, "end": time.time(), "values": values, "info": info,
                "foreign": foreign, "steal": steal}

    def _finish(self, kind, phase, strength, parts):
        """The night record from its chunks (one, or one per round)."""
        values = {}
        for part in parts:
            for name, vals in part["values"].items():
                values.setdefault(name, []).extend(vals)
        foreign = max(part["foreign"] for part in parts)
        rec_n = {"phase": phase, "kind": kind, "t": round(parts[0]["t"], 1),
                 "seconds": round(sum(p["end"] - p["t"] for p in parts), 2),
                 "values": values, "foreign_cores": round(foreign, 3),
                 "steal_cores": round(max(part["steal"] for part in parts), 3)}
        if len(parts) > 1:
            # how long the night's samples were spread over
            rec_n["span_s"] = round(parts[-1]["end"] - parts[0]["t"], 1)
        if foreign > self.opts.foreign_cpu:
            rec_n["loaded"] = True   # kept only because the re-runs ran out
        if strength is not None:
            rec_n["strength"] = strength
            rec_n["knob"] = self.fault.setting(strength)
            rec_n["injected"] = parts[-1]["info"]
        return rec_n

    def _night(self, kind, phase, strength=None):
        """One night of k samples taken in one go (calibration)."""
        rec_n = self._finish(kind, phase, strength, [self._chunk(kind, self.k, strength)])
        self.fr["nights"].append(rec_n)
        return rec_n

    def _nights(self, specs, done=None):
        """The nights ``specs`` ((kind, strength, phase) each), their k
        samples taken in --rounds rounds: every round visits every night in
        turn, so each night's samples are spread over the whole block as a
        session's are over its --rounds.  A night is recorded when its last
        round is in; ``done(record)`` then."""
        fr, rounds = self.fr, self.opts.rounds
        counts = split_samples(self.k, rounds)
        parts = [[] for _ in specs]
        phases = sorted({phase for _, _, phase in specs})
        fr["in_progress"] = {"phase": "+".join(phases), "nights": len(specs),
                             "rounds": rounds, "round": 0}
        for r, n_r in enumerate(counts):
            fr["in_progress"]["round"] = r + 1
            for i, (kind, strength, phase) in enumerate(specs):
                parts[i].append(self._chunk(kind, n_r, strength))
                if r == len(counts) - 1:
                    rec_n = self._finish(kind, phase, strength, parts[i])
                    fr["nights"].append(rec_n)
                    if done:
                        done(rec_n)
                    self.rec.save()
            if rounds > 1:
                log(f"{self.fault.name}: {fr['in_progress']['phase']}: round {r + 1}/"
                    f"{rounds} of {len(specs)} nights done")
                self.rec.save()
        del fr["in_progress"]
