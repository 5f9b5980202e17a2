"""The interface every fault implements.

A fault is measured in one *session* (the context manager :meth:`Fault.session`
sets up what every night needs, clean or faulty, and removes it after), and
on a faulty night it is *applied at a strength* (:meth:`Fault.apply`, a
context manager: entering applies the fault, leaving clears it, on error and
interrupt too).  :meth:`Fault.setting` describes a strength as the concrete
setting (a delay in ns, a tbf rate) and :meth:`Fault.describe` the fault.

Strengths are chosen so that the induced change grows roughly in proportion
to them (fraction of bandwidth removed, delay in ns, hog rate), which is
what the calibration's power-law search assumes.
"""

from __future__ import annotations

import contextlib

from hpc_health import stats

from ..system import FaultError
from ..workloads import RunEnv


class Fault:
    name = "?"
    #: the fault in a few words, for tables
    label = ""
    #: how it is done, for the results file
    what = ""
    #: what the session set up, for the results file
    session_info: dict = {}
    #: exponent the calibration assumes before it has two points
    slope = 1.0
    #: the strengths the calibration may try
    s_min, s_max = 0.0, 1.0

    def __init__(self, tools, opts):
        """``tools``: built helpers and benchmark paths by name (see
        ``measure.build_tools``); ``opts``: the command's options."""
        self.tools, self.opts = tools, opts
        self.refs = {}
        self.wl = None

    def describe(self):
        return {"name": self.name, "label": self.label, "what": self.what}

    def workload(self):
        """First runnable candidate; FaultError saying why none is."""
        why = []
        for wl in self.candidates():
            reason = wl.missing()
            if reason is None:
                self.wl = wl
                return wl
            why.append(f"{wl.name}: {reason}")
        raise FaultError("no workload: " + "; ".join(why))

    def candidates(self):
        """The workloads that can judge this fault, preferred first."""
        raise NotImplementedError

    @contextlib.contextmanager
    def session(self):
        """Set up what every night of this fault needs; yields the RunEnv."""
        yield RunEnv()

    def clean_env(self):
        """Extra environment of a clean night."""
        return {}

    def set_clean(self, refs):
        """The clean references ({metric: stats.Reference}) strengths are relative to."""
        self.refs = refs

    def clean_value(self, metric=None):
        return self.refs[metric or self.wl.primary].value

    def initial_strength(self, target):
        """First strength to try for a change of ``target`` (fraction worse)."""
        raise NotImplementedError

    def setting(self, strength):
        """The concrete setting a strength stands for ({knob: value})."""
        raise NotImplementedError

    @contextlib.contextmanager
    def apply(self, strength):
        """Apply the fault at ``strength``; yields (extra environment, info
        dict filled in on exit).  Leaving the context clears it."""
        raise NotImplementedError


def primary_direction(wl):
    return next(m.direction for m in wl.metrics if m.name == wl.primary)


def removed_fraction(target, direction):
    """Share of a rate to remove for a change of ``target``: removing a
    fraction s of a rate makes a bandwidth s worse and a time s/(1-s) worse."""
    return target if direction == stats.HIGHER else target / (1.0 + target)
