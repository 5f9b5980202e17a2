"""Site settings and references, as seen from inside a check."""

import os

import reframe as rfm
from reframe.core.builtins import run_after, variable


class RecordedSkip(rfm.RegressionTestPlugin):
    """Skip with a reason the run report keeps: ReFrame 4.10's JSON report
    records no reason for a skipped test, but it records variables."""

    #: Why the test was skipped; empty when it was not.
    #:
    #: :type: :class:`str`
    #: :default: ``''``
    skip_reason = variable(str, value='')

    def skip_for(self, condition, reason):
        if condition:
            self.skip_reason = reason
            self.skip(reason)


def settings(test):
    """The site's settings for the test's current partition (site.yaml)."""
    return test.current_partition.extras.get('hpc_health', {})


def section(test, name):
    return settings(test).get(name) or {}


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


class SiteReferences(rfm.RegressionTestPlugin):
    """Take references from ``reference/<system>.yaml`` (ReFrame's external
    reference format), when the site has such a file.

    The file is found next to ``reframe_checks/`` unless ReFrame's
    ``RFM_REFERENCE_PREFIX`` says otherwise.  A variable without a reference
    is reported by hpc-health as NO-REFERENCE; it never passes silently.
    """

    @run_after('init')
    def load_site_references(self):
        import reframe.core.runtime as rt
        prefix = (rt.runtime().get_option('general/0/reference_prefix') or
                  os.path.join(os.path.dirname(self.prefix), 'reference'))
        path = os.path.join(prefix, f'{self.current_system.name}.yaml')
        if os.path.isfile(path):
            # Absolute: ReFrame joins it to its own prefix, which keeps it.
            self.reference = {'$ref': os.path.abspath(path)}
