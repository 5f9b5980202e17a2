"""ReFrame configuration of the `local-slurm` site: a two-node Slurm cluster
that `site_configs/local-slurm/cluster up` starts on this one host.

Both nodes are the same machine seen through network and UTS namespaces, so
the site is for function (multi-node launch, scheduler, accounting), never for
comparing timings.

Launcher: `mpirun` inside the allocation, not `srun`.  Debian's Open MPI 4.1.4
under `srun --mpi=pmix` crashed in MPI_Init in 5-7 % of runs with two ranks per
node (a null callback in the TCP BTL); `mpirun` in the allocation, which starts
its daemons through Slurm, never failed in 50-80 runs.

Scheduler: `slurm`, which polls `sacct`; the cluster runs slurmdbd for that.
"""

import os

from reframe.core.settings import site_configuration as _reframe_defaults
from reframe.utility.cpuinfo import cpuinfo

from hpc_health.site.reframe_glue import partition_extras, reframe_logging, reframe_storage

_SITE_DIR = os.path.dirname(os.path.abspath(__file__))

# Must match the `cluster` script (same variables, same defaults).
_SUBNET = os.environ.get('HPC_HEALTH_SLURM_SUBNET', '10.250.47') + '.0/24'
_STATE = os.environ.get('HPC_HEALTH_SLURM_STATE', '/var/tmp/hpc-health-slurm')
_SLURM_CONF = os.path.join(_STATE, 'etc', 'slurm.conf')

# `cluster up` links /etc/slurm/slurm.conf to its configuration unless that
# file already belongs to something else; then sbatch/sacct, run by ReFrame
# from this process, must be told where the cluster's configuration is.
if ('SLURM_CONF' not in os.environ and os.path.isfile(_SLURM_CONF) and
        os.path.realpath('/etc/slurm/slurm.conf') != os.path.realpath(_SLURM_CONF)):
    os.environ['SLURM_CONF'] = _SLURM_CONF


# Every node is this host, and slurmd is given what it detects here, so the
# host's topology is each node's (ReFrame auto-detects only partitions with
# the `local` launcher).
_PROCESSOR = cpuinfo()

_OPENMPI_ENV = [
    # Jobs run as root on this test cluster.
    ['OMPI_ALLOW_RUN_AS_ROOT', '1'],
    ['OMPI_ALLOW_RUN_AS_ROOT_CONFIRM', '1'],
    # Ranks on different nodes talk TCP over the cluster's bridge.  It is
    # chosen by subnet, not by interface name, because mpirun may also run on
    # the host (under salloc), where the bridge's end has another name.
    ['OMPI_MCA_pml', 'ob1'],
    ['OMPI_MCA_btl', 'self,vader,tcp'],
    ['OMPI_MCA_btl_tcp_if_include', _SUBNET],
    ['OMPI_MCA_oob_tcp_if_include', _SUBNET],
    # Slurm hands each node its own core 0..n, but the nodes share this
    # host's cores: binding would stack ranks of both nodes on one core.
    ['OMPI_MCA_hwloc_base_binding_policy', 'none'],
    # Each node offers as many slots as the host has cores, so two nodes
    # oversubscribe them twice over and Open MPI does not know: ranks that
    # busy-poll then wait a scheduler tick for the rank they poll for.  A
    # 2x2-rank halo run took 74 s with polling, 10 s with yielding.
    ['OMPI_MCA_mpi_yield_when_idle', '1'],
]


def _partition(name, descr, features):
    return {
        'name': name,
        'descr': descr,
        'scheduler': 'slurm',
        'launcher': 'mpirun',
        'access': [f'--partition={name}'],
        'environs': ['gnu-mpi'],
        # Both nodes share the host's cores: the previous job's teardown and
        # accounting run just as the next job starts, and a microsecond
        # figure would measure them (barrier on node02, which always starts
        # right after node01, read 2-3x slower without this pause).
        'prepare_cmds': ['sleep 2'],
        'max_jobs': 4,
        'features': features,
        'processor': _PROCESSOR,
        'extras': partition_extras(_SITE_DIR, name),
    }


site_configuration = {
    'systems': [
        {
            'name': 'local-slurm',
            'descr': 'Two-node Slurm cluster in namespaces on this host '
                     '(site_configs/local-slurm/cluster up)',
            'hostnames': ['.*'],
            'modules_system': 'nomod',
            'partitions': [
                _partition('batch', 'node01 and node02', ['mpi', 'multinode', 'cpu']),
                _partition('debug', 'node01 only', ['mpi', 'cpu']),
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
            'env_vars': _OPENMPI_ENV,
            'target_systems': ['local-slurm'],
        },
    ],
    # ReFrame's own results database (--list-stored-sessions,
    # --performance-compare): the site's reframe_results_db, else in the store.
    'storage': reframe_storage(_SITE_DIR),
    # ReFrame's debug log in the run directory, not a temp file in /tmp.
    'logging': reframe_logging(_reframe_defaults['logging'][0]),
}
