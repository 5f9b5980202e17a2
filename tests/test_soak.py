"""A short soak (bench/soak): ten nights on one store with faults drawn at
random; after each, every completed run readable with its verdicts, the
interrupted ones named, the index equal to a rebuild, nothing of the suite
left running and nothing outside the store and scratch changed."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent

if os.geteuid() != 0 or not shutil.which("mpirun") or not shutil.which("cmake"):
    pytest.skip("the soak needs root (a tmpfs store it fills and remounts), mpirun and cmake",
                allow_module_level=True)


def test_ten_nights_under_random_faults_lose_nothing(tmp_path):
    out = tmp_path / "soak.json"
    # Seed 6 draws SIGINT, SIGHUP, kill -9 of the run and of ReFrame, a full
    # and a read-only store, the index locked and deleted.
    res = subprocess.run([sys.executable, "-m", "bench.soak", "--nights", "10", "--seed", "6",
                          "--out", str(out)], cwd=REPO, capture_output=True, text=True,
                         timeout=1200)
    nights = json.loads(out.read_text())["nights"]
    assert len(nights) == 10, res.stdout + res.stderr
    problems = [(n["night"], n["fault"], n["problems"]) for n in nights if n["problems"]]
    assert not problems, res.stdout[-3000:]
    assert res.returncode == 0
