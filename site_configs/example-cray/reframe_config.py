"""ReFrame configuration of `example-cray`: an HPE Cray EX-like system.

Two programming environments on the same nodes, PrgEnv-gnu and PrgEnv-cray;
each names the compiler Spack builds the benchmarks with
(``extras.spack_toolchain``), so the same check compares the toolchains.
The processor is described here rather than detected (ReFrame detects only
partitions it reaches without a scheduler); STREAM sizes its arrays from the
L3 caches listed below.
"""

import os

from reframe.core.settings import site_configuration as _reframe_defaults

from hpc_health.site.reframe_glue import partition_extras, reframe_logging, reframe_storage

_SITE_DIR = os.path.dirname(os.path.abspath(__file__))


def _genoa_node(sockets=2, cores_per_socket=96, cores_per_ccd=8):
    """2x AMD EPYC 9654: 12 CCDs of 8 cores per socket, one 32 MiB L3 per
    CCD, SMT on (CPU c + cores is the sibling of core c)."""
    cores = sockets * cores_per_socket

    def mask(first, count):
        cpus = list(range(first, first + count)) + \
            list(range(first + cores, first + cores + count))
        return hex(sum(1 << c for c in cpus))

    per_core = [mask(c, 1) for c in range(cores)]
    per_socket = [mask(s * cores_per_socket, cores_per_socket) for s in range(sockets)]
    return {
        'arch': 'zen4',
        'vendor': 'AuthenticAMD',
        'model': 'AMD EPYC 9654 96-Core Processor',
        'platform': 'x86_64',
        'num_cpus': 2 * cores,
        'num_cpus_per_core': 2,
        'num_cpus_per_socket': 2 * cores_per_socket,
        'num_sockets': sockets,
        'topology': {
            # NPS1: one NUMA domain per socket.
            'numa_nodes': per_socket,
            'sockets': per_socket,
            'cores': per_core,
            'caches': [
                {'type': 'L1', 'size': 32 * 1024, 'linesize': 64, 'associativity': 8,
                 'num_cpus': 2, 'cpusets': per_core},
                {'type': 'L2', 'size': 1024 * 1024, 'linesize': 64, 'associativity': 8,
                 'num_cpus': 2, 'cpusets': per_core},
                {'type': 'L3', 'size': 32 * 1024 * 1024, 'linesize': 64,
                 'associativity': 16, 'num_cpus': 2 * cores_per_ccd,
                 'cpusets': [mask(c, cores_per_ccd) for c in range(0, cores, cores_per_ccd)]},
            ],
        },
    }


site_configuration = {
    'systems': [
        {
            'name': 'example-cray',
            'descr': 'HPE Cray EX-like system',
            'hostnames': [r'^uan\d+', r'^nid\d+'],
            'modules_system': 'lmod',
            'partitions': [
                {
                    'name': 'cpu',
                    'descr': 'CPU compute nodes, 2x AMD EPYC 9654, Slingshot 11',
                    'scheduler': 'slurm',
                    'launcher': 'srun',
                    'access': ['--partition=standard', '--hint=nomultithread'],
                    'environs': ['PrgEnv-gnu', 'PrgEnv-cray'],
                    'max_jobs': 8,
                    'features': ['cpu', 'mpi'],
                    # Cray MPICH over Slingshot (libfabric cxi provider).
                    'env_vars': [['FI_PROVIDER', 'cxi']],
                    'processor': _genoa_node(),
                    'extras': partition_extras(_SITE_DIR, 'cpu'),
                },
            ],
        },
    ],
    'environments': [
        {
            'name': 'PrgEnv-gnu',
            'target_systems': ['example-cray'],
            'modules': ['PrgEnv-gnu', 'craype-x86-genoa'],
            'cc': 'cc',
            'cxx': 'CC',
            'ftn': 'ftn',
            'features': ['mpi', 'openmp'],
            'extras': {'omp_flag': '-fopenmp', 'spack_toolchain': '%gcc'},
        },
        {
            'name': 'PrgEnv-cray',
            'target_systems': ['example-cray'],
            'modules': ['PrgEnv-cray', 'craype-x86-genoa'],
            'cc': 'cc',
            'cxx': 'CC',
            'ftn': 'ftn',
            'features': ['mpi', 'openmp'],
            'extras': {'omp_flag': '-fopenmp', 'spack_toolchain': '%cce'},
        },
    ],
    # ReFrame's own results database (--list-stored-sessions,
    # --performance-compare): the site's reframe_results_db, else in the store.
    'storage': reframe_storage(_SITE_DIR),
    # ReFrame's debug log in the run directory, not a temp file in /tmp.
    'logging': reframe_logging(_reframe_defaults['logging'][0]),
}
