"""Several samples of a performance variable from one run.

ReFrame records one value per performance variable; a verdict that compares
one number with one number cannot tell noise from change.  A check that
gathers k samples (benchmark repetitions inside its job) returns them from
:meth:`PerfSamples.perf_samples`; they are written to ``hpc-health-samples.json``,
which ReFrame copies into the run's output, and ``hpc-health`` judges the
distribution.  The performance variable itself is :func:`location` of the
samples, the estimate hpc-health judges, so ReFrame's own bound check and
hpc-health's verdict look at the same figure.
"""

import json
import math
import os

import reframe as rfm
from reframe.core.builtins import run_before

from hpc_health.results import SAMPLES_FILE
from hpc_health.stats import location  # noqa: F401 - the checks' figure


class PerfSamples(rfm.RegressionTestPlugin):

    def perf_samples(self):
        """Performance variable name -> list of samples (override)."""
        return {}

    # Before the performance stage, not at cleanup: a figure outside
    # ReFrame's reference bounds fails that stage, cleanup never runs, and
    # the samples must still be there (in the stage directory ReFrame keeps)
    # for hpc-health's own verdict.
    # always_last: after the checks' own hooks have set their performance
    # variables (OSU records which figure each variable reads there).
    @run_before('performance', always_last=True)
    def write_samples(self):
        if self.is_dry_run():
            return
        try:
            samples = self.perf_samples()
        except Exception as err:   # noqa: BLE001 - never lose the run over it
            samples = {'_error': str(err)}
        clean = {k: [v if math.isfinite(v) else str(v) for v in map(float, vals)]
                 for k, vals in samples.items() if isinstance(vals, (list, tuple))}
        with open(os.path.join(self.stagedir, SAMPLES_FILE), 'w') as fp:
            json.dump(clean, fp)
        if SAMPLES_FILE not in self.keep_files:
            self.keep_files = list(self.keep_files) + [SAMPLES_FILE]


def sections(text, marker):
    """[(match, body)] for each line matching the compiled regex *marker*:
    a job that runs a benchmark several times prints a marker line before
    each run, and each body is then parsed on its own."""
    marks = list(marker.finditer(text))
    ends = [m.start() for m in marks[1:]] + [len(text)]
    return [(m, text[m.end():end]) for m, end in zip(marks, ends)]
