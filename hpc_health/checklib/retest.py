"""Nodes hpc-health drained, tested again under the maintenance reservation
of ``hpc-health run --per-node --resume-healthy`` (hpc_health.run.nodecare).

ReFrame's ``--distribute`` leaves out every node in a reservation unless the
job asks for that reservation, and asking for it would confine every copy
to the reserved nodes.  So the node map (``filternodes``) also takes the
nodes of hpc-health's reservation, and only the copy pinned to such a node
asks for it (:func:`reservation_option`): the peers run as they always do.
"""

import functools
import os

from reframe.core.schedulers.slurm import SlurmJobScheduler

from hpc_health.site.reframe_glue import RESERVATION_VAR

_ORIGINAL = SlurmJobScheduler.filternodes


def reservation():
    """(name, nodes) of the run's reservation, or (None, set())."""
    name, _, nodes = os.environ.get(RESERVATION_VAR, '').partition('=')
    return (name or None), set(filter(None, nodes.split(',')))


def reservation_option(pinned):
    """``--reservation=NAME`` for a copy pinned to *pinned* (its node
    list), when one of them is reserved for this run; else None."""
    name, nodes = reservation()
    return f'--reservation={name}' if name and set(pinned or ()) & nodes else None


@functools.wraps(_ORIGINAL)
def filternodes(self, job, nodes):
    kept = _ORIGINAL(self, job, nodes)
    name, _ = reservation()
    asked = ' '.join([*job.sched_access, *job.options, *job.cli_options])
    if not name or '--reservation' in asked:
        return kept
    # The same filters (partition, constraints, ...), with the reservation.
    job.options = [*job.options, f'--reservation={name}']
    try:
        reserved = _ORIGINAL(self, job, nodes)
    finally:
        job.options = job.options[:-1]
    return kept | reserved


def apply():
    """Only when hpc-health reserved nodes for this run: otherwise ReFrame's
    own filter, untouched."""
    if reservation()[0]:
        SlurmJobScheduler.filternodes = filternodes
