"""The base of every hpc-health check: declared figures, site settings and
references bound to hardware.

A check declares its figures (:class:`hpc_health.model.figures.Figure`) and says
how to get its samples (a method returning one parsed output per sample);
this base turns the declarations into ReFrame's ``perf_variables``, writes
the per-sample figures hpc-health judges, records which way is better for
each figure in the run report, and hands ReFrame the site's references --
only for hardware like the one they were measured on, and bounding only
the worse side, so plain ReFrame fails exactly where a figure got worse.
"""

import functools
import json
import math
import os
import sys

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, variable, xfail

from hpc_health.checklib import retest
from hpc_health.checklib.shell import quote
from hpc_health.jobside import nodeload
from hpc_health.model.figures import HIGHER, validate_all
from hpc_health.model.results import SAMPLES_FILE
from hpc_health.site import hardware
from hpc_health.stats import location
from hpc_health.store import references

_BEFORE, _AFTER = 'node-before.json', 'node-after.json'


class RecordedSkip(rfm.RegressionTestPlugin):
    """Skip with a reason the run report keeps: ReFrame 4.10's JSON report
    records no reason for a skipped test, but it records variables."""

    #: Why the test was skipped; empty when it was not.
    skip_reason = variable(str, value='')

    def skip_for(self, condition, reason):
        if condition:
            self.skip_reason = reason
            self.skip(reason)


def settings(test):
    """The site's validated settings of the test's partition (``site.yaml``
    with every default filled in, see :mod:`hpc_health.site.schema`)."""
    return test.current_partition.extras.get('hpc_health', {})


def setting(test, dotted):
    """One setting by its key path, e.g. ``'osu.samples'``."""
    node = settings(test)
    for key in dotted.split('.'):
        node = (node or {}).get(key)
    return node


def ranks_per_node(test):
    """Site setting first; otherwise one rank per core of the detected
    processor (ranks beyond cores would time the scheduler, not MPI)."""
    value = settings(test).get('ranks_per_node')
    if value:
        return int(value)
    proc = test.current_partition.processor
    return int(proc.num_cores or proc.num_cpus or 1)


def num_nodes(test):
    return int(settings(test).get('nodes') or 1)


# The checks' sanity functions call plain functions on parsed outputs
# (check_stream_run, check_osu_table, ...), which raise this; the check turns
# it into ReFrame's SanityError.  Plain functions, so the tests can call them
# on recorded outputs.

class Insane(ValueError):
    """A benchmark output that must not produce figures."""


@functools.lru_cache(maxsize=8)
def _reference_set(path, mtime):
    return references.load(path)


def reference_file(test):
    """``reference/<system>.yaml``: ReFrame's reference prefix (``hpc-health
    run`` points it at the checkout's ``reference/``), else next to the
    checks."""
    import reframe.core.runtime as rt
    prefix = (rt.runtime().get_option('general/0/reference_prefix') or
              os.path.join(os.path.dirname(test.prefix), 'reference'))
    return os.path.join(prefix, f'{test.current_system.name}.yaml')


class _Attrs:
    """A test's attributes as the mapping a reference lookup indexes."""

    def __init__(self, test):
        self._test = test

    def __contains__(self, name):
        return hasattr(self._test, name)

    def __getitem__(self, name):
        return getattr(self._test, name)


class HealthCheck(RecordedSkip, rfm.RunOnlyRegressionTest):
    """Subclasses set :attr:`figures` and implement the sample source their
    figures name (:meth:`outputs` by default): a list with one parsed output
    per sample."""

    #: The check's figure declarations.
    figures = ()

    #: Which way is better for each figure: recorded in the run report,
    #: where hpc-health's verdicts read it.
    figure_better = variable(typ.Dict[str, str], value={})

    #: The declared capability each figure is a fraction of (``compare
    #: --normalise``), for the figures that declare one.
    figure_capability = variable(typ.Dict[str, str], value={})

    #: The smallest change each figure is a finding at, for the figures
    #: that declare one (:attr:`Figure.min_change`).
    figure_min_change = variable(typ.Dict[str, float], value={})

    #: Figures that could not be read, with the reason (each becomes a FAIL
    #: of its own; the other figures are still judged).
    figure_errors = variable(typ.Dict[str, str], value={})

    #: Why the site's references were not applied (other hardware).
    reference_note = variable(str, value='')

    #: {figure: what the run showed was applied} for figures of a setting
    #: (a forced algorithm, an I/O hint): kept with the figure in the report.
    figure_proof = variable(typ.Dict[str, str], value={})

    #: {figure: a finding worth a line of its own} ("the default is 1.4x
    #: the ring algorithm"); printed after the table, not a failure.
    findings = variable(typ.Dict[str, str], value={})

    maintainers = ['hpc-health']

    def fill_from_settings(self, section, **keys):
        """Variables left unset (None, i.e. not given with ``-S``) take the
        site setting ``section.key`` (whose default the schema holds)."""
        for attr, key in keys.items():
            if getattr(self, attr) is None:
                setattr(self, attr, setting(self, f'{section}.{key}'))

    #: What other processes did on the node while the benchmark ran
    #: (:mod:`hpc_health.jobside.nodeload`); hpc-health names a busy node beside
    #: the verdicts.
    node_load = variable(typ.Dict[str, object], value={})

    @run_before('run', always_last=True)
    def finish_job_script(self):
        """Last touches once every hook has set the job up: the repeated
        launches, and a snapshot of the node around the benchmark."""
        snap = f'{quote(sys.executable)} -m hpc_health.jobside.nodeload snapshot'
        self.prerun_cmds = [f'{snap} {_BEFORE} 2>/dev/null || true'] + list(self.prerun_cmds)
        # Right after the benchmark, keeping its exit code for what follows.
        self.postrun_cmds = [f'_hh_rc=$?; {snap} {_AFTER} 2>/dev/null; (exit $_hh_rc)'] + \
            list(self.postrun_cmds)
        if hasattr(self, 'repeat_launches'):
            # Before the snapshot after: the later launches are the benchmark too.
            self.repeat_launches()

    @run_before('run')
    def join_the_maintenance_reservation(self):
        """A per-node copy pinned to a node that hpc-health drained and
        reserved to test again (``run --resume-healthy``) must ask for the
        reservation, or Slurm holds it back: only that copy does."""
        option = retest.reservation_option(getattr(self, '.nid', None))
        if option and not self.local:
            self.job.options += [option]

    @run_before('sanity')
    def read_node_load(self):
        if not self.is_dry_run():
            self.node_load = nodeload.load_pair(os.path.join(self.stagedir, _BEFORE),
                                                os.path.join(self.stagedir, _AFTER)) or {}

    @run_after('init')
    def validate_figures(self):
        validate_all(type(self).__name__, self.figures, _Attrs(self))

    def outputs(self):
        """One parsed benchmark output per sample (override)."""
        return []

    def figure_readers(self):
        """{performance variable: (figure, reader of one sample)}."""
        return {name: (fig, read) for fig in self.figures
                for name, read in fig.instances(self)}

    def figure_samples(self):
        """{performance variable: samples}, and {variable: why not} for the
        figures that could not be read.  A reader returning None for every
        sample means the figure is not measured here (left out)."""
        found, errors, sources = {}, {}, {}
        for name, (fig, read) in self.figure_readers().items():
            try:
                if fig.source not in sources:
                    sources[fig.source] = getattr(self, fig.source)()
                values = [read(s) for s in sources[fig.source]]
            except Exception as err:   # one figure, not the run
                errors[name] = f'{type(err).__name__}: {err}'
                continue
            if values and all(v is None for v in values):
                continue    # not measured for this pattern (e.g. no shared file)
            if any(v is None for v in values):
                errors[name] = f'no value in {values.count(None)} of {len(values)} samples'
                continue
            found[name] = [float(v) for v in values]
        return found, errors

    # always_last: after the checks' own hooks have set the axis values.
    @run_before('performance', always_last=True)
    def set_figures(self):
        readers = self.figure_readers()
        self.figure_better = {name: fig.better for name, (fig, _) in readers.items()}
        self.figure_capability = {name: fig.capability for name, (fig, _) in readers.items()
                                  if fig.capability}
        self.figure_min_change = {name: fig.min_change for name, (fig, _) in readers.items()
                                  if fig.min_change}
        if self.is_dry_run():
            self.perf_variables = {name: sn.make_performance_function(sn.defer(0.0), fig.unit)
                                   for name, (fig, _) in readers.items()}
            return
        samples, self.figure_errors = self.figure_samples()
        # Before the performance stage, not at cleanup: a figure beyond
        # ReFrame's bound fails that stage and cleanup never runs; the stage
        # directory is kept and hpc-health reads the samples there.
        with open(os.path.join(self.stagedir, SAMPLES_FILE), 'w') as fp:
            json.dump({k: [v if math.isfinite(v) else str(v) for v in vals]
                       for k, vals in samples.items()}, fp)
        if SAMPLES_FILE not in self.keep_files:
            self.keep_files = list(self.keep_files) + [SAMPLES_FILE]
        self.perf_variables = {
            name: sn.make_performance_function(sn.defer(location(vals)), readers[name][0].unit)
            for name, vals in samples.items() if vals}
        self.reference = self.site_references()

    def site_references(self):
        """The site's references for this case, bounding the worse side only,
        or none when they were measured on other hardware."""
        path = reference_file(self)
        if not os.path.isfile(path):
            return {}
        refs = _reference_set(path, os.stat(path).st_mtime_ns)
        part = self.current_partition.fullname
        measured_on = refs.hardware.get(part)
        here = settings(self).get('hardware')
        if measured_on and not hardware.same(measured_on, here):
            self.reference_note = (f'reference measured on {hardware.describe(measured_on)}, '
                                   f'this is {hardware.describe(here)}')
            return {}
        table = {}
        units = {name: fig.unit for name, (fig, _) in self.figure_readers().items()}
        for name, better in self.figure_better.items():
            # In the figure's unit: ReFrame compares the numbers as they are.
            ref = refs.lookup(type(self).__name__, part, self.current_environ.name,
                              _Attrs(self), name, units.get(name))
            if ref is None:
                continue
            lower, upper = (ref.lower, None) if better == HIGHER else (None, ref.upper)
            entry = (ref.value, lower, upper, ref.unit)
            table[name] = xfail(ref.xfail, entry) if ref.xfail else entry
        return {part: table}
