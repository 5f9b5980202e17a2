"""ReFrame configuration of the `local` site: the machine the suite runs on.

One system matching any hostname, one partition run with plain `mpirun` and no
scheduler.  The processor topology is detected when the configuration is
loaded (ReFrame only auto-detects partitions whose launcher is `local`), and
the checks size themselves from it.
"""

import os

from reframe.core.settings import site_configuration as _reframe_defaults
from reframe.utility.cpuinfo import cpuinfo

from hpc_health.site.reframe_glue import partition_extras, reframe_logging, reframe_storage

_SITE_DIR = os.path.dirname(os.path.abspath(__file__))

# Open MPI refuses to run as root (CI containers run as root) and refuses to
# start more ranks than cores without these.
_OPENMPI_ENV = [
    ['OMPI_ALLOW_RUN_AS_ROOT', '1'],
    ['OMPI_ALLOW_RUN_AS_ROOT_CONFIRM', '1'],
    ['OMPI_MCA_rmaps_base_oversubscribe', '1'],
    # Shared memory only: no interface probing, no surprises on CI runners.
    ['OMPI_MCA_btl', 'self,vader'],
]

site_configuration = {
    'systems': [
        {
            'name': 'local',
            'descr': 'The machine hpc-health runs on (no scheduler)',
            'hostnames': ['.*'],
            'modules_system': 'nomod',
            'partitions': [
                {
                    'name': 'default',
                    'descr': 'This host, launched with mpirun',
                    'scheduler': 'local',
                    'launcher': 'mpirun',
                    'environs': ['gnu-mpi'],
                    # Timings need an otherwise idle machine: one job at a time.
                    'max_jobs': 1,
                    'features': ['mpi', 'cpu'],
                    'env_vars': _OPENMPI_ENV,
                    'processor': cpuinfo(),
                    'extras': partition_extras(_SITE_DIR, 'default'),
                },
            ],
        },
    ],
    'environments': [
        {
            'name': 'gnu-mpi',
            'cc': 'mpicc',
            'cxx': 'mpicxx',
            'ftn': 'mpif90',
            'features': ['mpi', 'openmp'],
            'extras': {'omp_flag': '-fopenmp'},
        },
    ],
    # ReFrame's own results database (--list-stored-sessions,
    # --performance-compare): the site's reframe_results_db, else in the store.
    'storage': reframe_storage(_SITE_DIR),
    # ReFrame's debug log in the run directory, not a temp file in /tmp.
    'logging': reframe_logging(_reframe_defaults['logging'][0]),
}
