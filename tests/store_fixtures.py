"""Stored runs made from recorded series, for tests of everything that reads
the store (capture, verdicts, history, compare) without re-measuring.

A run directory holds what `hpc-health run` writes: ReFrame's JSON run
report (only the fields hpc-health reads) and run.json.
"""

import csv
import json
from pathlib import Path

NOISE = Path(__file__).parent / "data" / "noise"


def recording(name):
    """(values, unit) of a recorded 30-run series (tests/data/noise/<name>.csv)."""
    with open(NOISE / f"{name}.csv") as fp:
        rows = list(csv.DictReader(fp))
    return [float(r["value"]) for r in rows], rows[0]["unit"]


def series(name):
    """Values of a recorded 30-run series (tests/data/noise/<name>.csv)."""
    return recording(name)[0]


#: The names of the recorded series.
RECORDINGS = sorted(p.stem for p in NOISE.glob("*.csv"))


# What these recorded figures' checks declare as better.
BETTER = {"MB/s": "higher", "MiB/s": "higher", "us": "lower", "s": "lower"}


def case(test, var, value, unit, *, system="local", partition="default",
             environ="gnu-mpi", params=None, ref=None, outputdir=None,
             result="pass", fail_phase=None, fail_reason=None, better=None):
    params = params or {}
    name = " ".join([test] + [f"%{k}={v}" for k, v in params.items()])
    ref_tuple = [0, None, None] if ref is None else list(ref)
    tc = {"name": name, "display_name": name, "unique_name": name.replace(" ", "_"),
          "system": system, "partition": partition, "environ": environ,
          "result": result, "fail_phase": fail_phase, "fail_reason": fail_reason,
          "fixture": False, "job_nodelist": ["node1"], "outputdir": outputdir,
          "figure_better": {var: better or BETTER[unit]},
          "perfvalues": {} if value is None else
          {f"{system}:{partition}:{var}": [value, *ref_tuple, unit, "pass"]}}
    tc.update(params)
    return tc


def write_run(store, site, run_id, testcases, started, samples=None, stack="s1", meta=None):
    """One stored run; *samples* maps testcase index -> {var: [samples]}."""
    d = Path(store) / "runs" / site / run_id
    d.mkdir(parents=True)
    for i, tc in enumerate(testcases):
        if samples and i in samples:
            out = d / "output" / f"case{i}"
            out.mkdir(parents=True)
            (out / "hpc-health-samples.json").write_text(json.dumps(samples[i]))
            tc["outputdir"] = str(out)
    (d / "report.json").write_text(json.dumps({"runs": [{"testcases": testcases}]}))
    (d / "run.json").write_text(json.dumps({"site": site, "run_id": run_id,
                                            "started": started, "finished": started,
                                            "exit_code": 0, "stack_hash": stack,
                                            **(meta or {})}))
    return d
