"""ReFrame's output: kept as it comes (as much as the disk takes) and read
back when a run ended without a report."""

from __future__ import annotations


def ran_no_check(reframe_out):
    try:
        return "Running 0 check(s)" in reframe_out.read_text(errors="replace")
    except OSError:
        return False


def started_a_check(reframe_out):
    """Whether ReFrame's output shows a test case started."""
    try:
        return "RUN     " in reframe_out.read_text(errors="replace")
    except OSError:
        return True     # unknown: say what is known, ReFrame's last lines


class Kept:
    """ReFrame's output into reframe.out, as much of it as the disk takes
    (ReFrame's pipe is read to its end all the same)."""

    def __init__(self, path):
        self.fp, self.kept, self.lost = open(path, "w", buffering=1), 0, None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.fp.close()     # closed even when its last flush fails
        except OSError as err:
            self.lost = self.lost or err
        return False

    def write(self, text):
        if self.lost is None:
            try:
                self.fp.write(text)
                self.kept += len(text)
            except OSError as err:
                self.lost = err


def last_lines(path, count):
    """ReFrame's last lines, without the blocks Python's logging prints when
    a log file cannot be written (``--- Logging error ---`` ... ``Arguments:``:
    its debug log is in the run directory, so a full store makes every later
    log call print one)."""
    kept, skipping = [], False
    with open(path, errors="replace") as fp:
        for line in fp:
            if line.startswith("--- Logging error ---"):
                skipping = True
            elif skipping and line.startswith("Arguments:"):
                skipping = False
            elif not skipping:
                kept.append(line)
    return kept[-count:]


def relay(proc, log, out, shown, after=None):
    """ReFrame's output line by line into *log* (all of it) and *out* (the
    lines *shown* keeps, each followed by what *after* says of it), until
    it ends."""
    for line in proc.stdout:
        log.write(line)
        if shown(line):
            out.write(line)
            said = after(line) if after else None
            if said:
                out.write(said + "\n")
            out.flush()
    proc.wait()
