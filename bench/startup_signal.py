#!/usr/bin/env python3
"""What a stop signal in a command's first tenth of a second prints.

A nightly run stopped in its first second (an operator's Ctrl-C, a
scheduler's SIGTERM, the soak's ``sigint_early``) must end with 128 + the
signal and no traceback.  The suite's own imports are covered (the
command's first line, ``hpc_health.cli.quiet_stops``); what is left is
Python's own start-up, before any line of the suite runs: its site module
(with the ``.pth`` files of the venv) and ``-m``'s search for the module.
A SIGINT there is Python's ``KeyboardInterrupt`` traceback.

This strikes ``hpc-health runs`` N times at a uniformly random moment in
its first 0.1 s, as the console script and as ``python -m hpc_health``,
and counts what each strike printed:

    python -m bench.startup_signal [--strikes 150] [--venv .venv]

``python's start-up``: a traceback through no line of the suite but the
one importing its signal handler (site, ``.pth`` files, runpy, the
standard library they import); ``ours``: a traceback through any other
line of ``hpc_health`` (a defect: the test
``test_a_stop_signal_while_python_imports_the_command_prints_no_traceback``
fails on it); ``quiet``: the signal's own exit (killed before Python set
its handler, or 128 + the signal) or the command finished first.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def classify(err: bytes | str) -> str:
    """What a struck command printed on stderr: ``quiet``, ``python's
    start-up`` (a traceback from no line of the suite but the one importing
    the signal handler itself), or ``ours``."""
    text = err.decode(errors="replace") if isinstance(err, bytes) else err
    if not any(w in text for w in ("Traceback", "KeyboardInterrupt", "Fatal Python error")):
        return "quiet"
    lines = text.splitlines()
    for i, line in enumerate(lines):
        frame = re.match(r'\s+File "([^"]+)", line \d+', line)
        if frame and "/hpc_health/" in frame.group(1):
            source = lines[i + 1] if i + 1 < len(lines) else ""
            if "quiet_stops" not in source:
                return "ours"
    return "python's start-up"


def strike(cmd: list[str], env: dict[str, str], delay: float) -> tuple[str, int]:
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    return classify(err), proc.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--strikes", type=int, default=150)
    ap.add_argument("--venv", default=str(REPO / ".venv"))
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    venv = Path(args.venv)
    forms = {"console script": [str(venv / "bin" / "hpc-health"), "runs", "--site", "local"],
             "python -m": [str(venv / "bin" / "python"), "-m", "hpc_health", "runs",
                           "--site", "local"]}
    with tempfile.TemporaryDirectory(prefix="hh-startup-") as store:
        env = {**os.environ, "HPC_HEALTH_STORE": store}
        # Outside the checkout: `-m` must find the package as a site would.
        env.pop("PYTHONPATH", None)
        for name, cmd in forms.items():
            seen: collections.Counter[str] = collections.Counter()
            codes: collections.Counter[int] = collections.Counter()
            for i in range(args.strikes):
                kind, code = strike(cmd, env, rng.uniform(0.0, 0.1))
                seen[kind] += 1
                codes[code] += 1
                print(f"\r{name}: {i + 1}/{args.strikes}", end="", file=sys.stderr, flush=True)
            print(file=sys.stderr)
            print(f"{name}: {args.strikes} SIGINTs in the first 0.1 s: "
                  + ", ".join(f"{k} {v}" for k, v in sorted(seen.items()))
                  + "; exit codes " + ", ".join(f"{k}: {v}" for k, v in sorted(codes.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
