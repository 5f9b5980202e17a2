"""Darshan around an MPI application: instrument it, prove the
instrumentation worked, and turn the log into figures.

A Darshan runtime built without MPI (what the builtin recipe silently
produces with Debian's Open MPI) writes *no* log for an MPI application, or
one log per process with ``nprocs: 1`` when forced into non-MPI mode.  So a
log is only trusted when it exists and its header counts every rank.
"""

import os
import shlex

from hpc_health.checklib.shell import shell_path
from hpc_health.parsers import ParseError
from hpc_health.parsers import darshan as dparse

LOG = 'app.darshan'
PARSED = 'darshan-parser.txt'
# Module name in darshan -> prefix of our performance variables
MODULES = {'POSIX': 'posix', 'MPI-IO': 'mpiio'}


def library(runtime_prefix):
    return os.path.join(runtime_prefix, 'lib', 'libdarshan.so')


def wrap(executable, options, runtime_prefix, logfile, env=()):
    """(executable, options) that run *executable* with Darshan preloaded
    (and the variables *env*, ``NAME=value``, set in every rank).

    ``env`` sets LD_PRELOAD for the application only; preloading the
    launcher (mpirun, srun) would instrument it too and may break it.  Every
    test names its own log file, so concurrent tests never share one.
    """
    return 'env', [f'LD_PRELOAD={shell_path(library(runtime_prefix))}',
                   f'DARSHAN_LOGFILE={shell_path(logfile)}', *env, executable] + list(options)


def parse_commands(util_prefix, logfile, out=PARSED):
    """Shell lines that turn the binary log into darshan-parser text
    (records, totals and derived performance in one pass)."""
    parser = os.path.join(util_prefix, 'bin', 'darshan-parser')
    log, dest = shlex.quote(logfile), shlex.quote(out)
    return [f'if [ -s {log} ]; then {shell_path(parser)} --base --total --perf '
            f'{log} > {dest} 2>&1 || echo "hpc-health: darshan-parser failed with exit $?"; '
            f'else echo "hpc-health: no Darshan log at {logfile}"; fi']


def load(stagedir, logfile, out=PARSED):
    """Parsed darshan-parser output; ParseError saying what is wrong."""
    if not os.path.exists(logfile):
        raise ParseError(
            f'no Darshan log at {logfile}: the runtime wrote nothing, which is what a '
            'darshan-runtime built without MPI does under an MPI application')
    path = os.path.join(stagedir, out)
    try:
        with open(path) as fp:
            text = fp.read()
    except OSError as err:
        raise ParseError(f'darshan-parser output unreadable: {err}') from None
    return dparse.parse_darshan(text)


def check_ranks(parsed, nranks):
    """Raise unless the log was written by an MPI-enabled runtime for all
    *nranks* ranks."""
    nprocs = parsed['header']['nprocs']
    if nprocs != nranks:
        raise ParseError(
            f'the Darshan log counts {nprocs} process(es) for {nranks} MPI ranks: '
            'the runtime was not built with MPI support (a non-MPI build writes one '
            'log per process, each with nprocs 1)')


def check_bytes(parsed, module, expected_written, expected_read, allowance=0):
    """Raise unless *module* saw the bytes the application was asked to move
    (exactly, or up to *allowance* more, for files the MPI library itself
    writes)."""
    moved = dparse.bytes_moved(parsed, module)
    for what, got, want in (('written', moved['written'], expected_written),
                            ('read', moved['read'], expected_read)):
        if got is None:
            raise ParseError(f'Darshan could not count the {module} bytes {what}')
        if not want <= got <= want + allowance:
            extra = f' (+ up to {allowance} B allowed)' if allowance else ''
            hint = (' - none of it: is the data directory in Darshan\'s excluded '
                    'directories (/var, /opt, /usr, ...)?' if got == 0 and want else '')
            raise ParseError(f'Darshan saw {got} B {what} in {module}, the application '
                             f'was asked to move {want} B{extra}{hint}')
    return moved


def rank_time_ratio(parsed, module):
    """Slowest over fastest rank time on the module's busiest shared file;
    None where Darshan measured no such pair (files used by one rank only)."""
    summary = parsed['base'].get(module) or {}
    slow, fast = summary.get('slowest_rank_time_s'), summary.get('fastest_rank_time_s')
    if slow is None or fast is None or fast <= 0:
        return None
    return slow / fast


def figures(parsed, module):
    """The Darshan figures we report for one module."""
    moved = dparse.bytes_moved(parsed, module)
    base = parsed['base'].get(module) or {}
    perf = parsed['perf'].get(module) or {}
    return {
        'bytes': moved['total'],
        'io_time_slowest_rank': perf.get('agg_time_by_slowest'),
        'meta_time': base.get('meta_time_s'),
        'rank_time_ratio': rank_time_ratio(parsed, module),
    }


def summary_lines(parsed, modules):
    """A few human lines for the test's output folder."""
    h = parsed['header']
    lines = [f'Darshan {h.get("lib_version")} log: {h["nprocs"]} processes, '
             f'run time {h["run_time_s"]} s, modules {", ".join(parsed["modules"])}',
             f'exe: {h["exe"]}']
    for module in modules:
        if module not in parsed['modules']:
            continue
        moved = dparse.bytes_moved(parsed, module)
        fig = figures(parsed, module)
        ratio = fig['rank_time_ratio']
        lines.append(
            f'{module}: written {moved["written"]} B, read {moved["read"]} B; '
            f'slowest rank I/O time {fig["io_time_slowest_rank"]} s; '
            f'metadata time (all ranks) {fig["meta_time"]} s; slowest/fastest rank '
            f'{"n/a (no shared file)" if ratio is None else f"{ratio:.2f}"}')
    return lines
