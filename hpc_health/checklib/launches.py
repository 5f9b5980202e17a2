"""One program launched several times in one job, each launch one sample.

On shared or virtualised nodes the level of an MPI figure is set per launch
(where the ranks land, what the hypervisor does with their vCPUs): the
repetitions inside one launch share its luck and agree to a few per cent
while launches differ by tens.  Samples that are to average that away must
come from separate launches; the job launches the program ``samples`` times,
each after a marker line, and the output is split at the markers.
"""

import os
import re

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.exceptions import SanityError

MARK = 'hpc-health: launch'
# Not anchored at the line's start: a launch that died mid-line leaves no
# newline, and the next marker is echoed onto that line.
_SECTION = re.compile(rf'{MARK} (\d+)$', re.MULTILINE)


# Sweeps launch several cases (an algorithm, a scale point) in rounds; each
# launch is framed by a start line and an exit line with its exit code.
_CASE = re.compile(r'^hpc-health: case (\S+) round (\d+)$', re.MULTILINE)
_CASE_EXIT = re.compile(r'^hpc-health: case (\S+) exit (\d+)$', re.MULTILINE)


def case_launch(case, rnd, command):
    """Shell line: one framed launch of *case* (shell words allowed) in round *rnd*."""
    return (f'echo "hpc-health: case {case} round {rnd}"; {command} < /dev/null; '
            f'echo "hpc-health: case {case} exit $?"')


def case_sections(text):
    """{(case, round): (exit code, or None when cut short; output)}."""
    marks = sorted([(m.start(), m.end(), m) for m in _CASE.finditer(text)] +
                   [(m.start(), m.end(), m) for m in _CASE_EXIT.finditer(text)],
                   key=lambda x: x[0])
    out, current = {}, None
    for start, end, m in marks:
        if m.re is _CASE:
            current = ((m.group(1), int(m.group(2))), end)
        elif current and current[0][0] == m.group(1):
            out[current[0]] = (int(m.group(2)), text[current[1]:start])
            current = None
    if current:
        out[current[0]] = (None, text[current[1]:])
    return out


def sections(text, marker):
    """[(match, body)] for each line matching the compiled regex *marker*:
    a job that runs a benchmark several times prints a marker line before
    each run, and each body is then parsed on its own."""
    marks = list(marker.finditer(text))
    ends = [m.start() for m in marks[1:]] + [len(text)]
    return [(m, text[m.end():end]) for m, end in zip(marks, ends)]


def job_output(test, what):
    """The job's standard output; a SanityError naming *what* when it cannot
    be read."""
    try:
        with open(os.path.join(test.stagedir, sn.evaluate(test.stdout))) as fp:
            return fp.read()
    except OSError as err:
        raise SanityError(f'{what} output unreadable: {err}') from None


class RepeatedLaunches(rfm.RegressionTestPlugin):
    """Launch ``executable`` ``samples`` times under the job's own launcher.

    The test sets ``samples`` (an int) before the run stage; the launches
    after the first are shell lines after the job's own launch, so every one
    gets the same placement and options.
    """

    def launch_command(self):
        # ReFrame copies the task counts to the job only when it writes the
        # script; the launcher needs them now.
        self.job.num_tasks = self.num_tasks
        self.job.num_tasks_per_node = self.num_tasks_per_node
        return self.job.launcher.run_command(self.job)

    def relaunch_cmds(self):
        """Shell lines run before each launch after the first (override)."""
        return []

    def repeat_launches(self):
        """Add the launches after the first (called by HealthCheck once
        every other hook has set the job up)."""
        again = ' '.join([self.launch_command(), self.executable, *self.executable_opts])
        self.prerun_cmds = list(self.prerun_cmds) + [f'echo "{MARK} 1"']
        self.postrun_cmds = [line for i in range(2, self.samples + 1)
                             for line in (*self.relaunch_cmds(), f'echo "{MARK} {i}"', again)] + \
            list(self.postrun_cmds)

    def launch_outputs(self, what):
        """The output of every launch, in order; a SanityError naming *what*
        when the job's output cannot be read or launches are missing."""
        runs = [body for _, body in sections(job_output(self, what), _SECTION)]
        if len(runs) < self.samples:
            raise SanityError(f'{what}: {len(runs)} of {self.samples} launches '
                              'started (job cut short?)')
        return runs
