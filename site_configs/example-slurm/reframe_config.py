"""ReFrame configuration of `example-slurm`: a Slurm cluster with a CPU and a
GPU partition.

The processors are described here rather than detected: ReFrame detects
only partitions it can reach without a scheduler, and the STREAM check sizes
its arrays from the last-level caches listed below.  Site settings reach the
checks through each partition's ``extras`` (see site.yaml).
"""

import os

from reframe.core.settings import site_configuration as _reframe_defaults

from hpc_health.site.reframe_glue import partition_extras, reframe_logging, reframe_storage

_SITE_DIR = os.path.dirname(os.path.abspath(__file__))

_KiB, _MiB = 1024, 1024 * 1024


def _mask(cpus):
    return hex(sum(1 << c for c in cpus))


def _epyc(sockets, cores_per_socket, arch, model, cores_per_l3=8):
    """Processor record of a node of AMD EPYCs with SMT on (Linux numbers
    the second hardware thread of core c as c + cores)."""
    cores = sockets * cores_per_socket

    def threads(first, count):
        return [c for c in range(first, first + count)] + \
               [c + cores for c in range(first, first + count)]

    per_core = [_mask(threads(c, 1)) for c in range(cores)]
    return {
        'arch': arch,
        'vendor': 'AuthenticAMD',
        'model': model,
        'platform': 'x86_64',
        'num_cpus': 2 * cores,
        'num_cpus_per_core': 2,
        'num_cpus_per_socket': 2 * cores_per_socket,
        'num_sockets': sockets,
        'topology': {
            'numa_nodes': [_mask(threads(s * cores_per_socket, cores_per_socket))
                           for s in range(sockets)],
            'sockets': [_mask(threads(s * cores_per_socket, cores_per_socket))
                        for s in range(sockets)],
            'cores': per_core,
            'caches': [
                {'type': 'L1', 'size': 32 * _KiB, 'linesize': 64, 'associativity': 8,
                 'num_cpus': 2, 'cpusets': per_core},
                {'type': 'L2', 'size': 512 * _KiB, 'linesize': 64, 'associativity': 8,
                 'num_cpus': 2, 'cpusets': per_core},
                # One L3 per CCX of 8 cores.
                {'type': 'L3', 'size': 32 * _MiB, 'linesize': 64, 'associativity': 16,
                 'num_cpus': 2 * cores_per_l3,
                 'cpusets': [_mask(threads(c, cores_per_l3))
                             for c in range(0, cores, cores_per_l3)]},
            ],
        },
    }


site_configuration = {
    'systems': [
        {
            'name': 'example-slurm',
            'descr': 'Slurm cluster with CPU and GPU nodes',
            'hostnames': [r'^login\d+', r'^cn\d+', r'^gpu\d+'],
            'modules_system': 'lmod',
            'partitions': [
                {
                    'name': 'cpu',
                    'descr': 'CPU nodes, 2x AMD EPYC 7763',
                    'scheduler': 'slurm',
                    'launcher': 'srun',
                    'access': ['--partition=cpu'],
                    'environs': ['gnu-openmpi'],
                    'max_jobs': 4,
                    'features': ['cpu', 'mpi'],
                    'processor': _epyc(2, 64, 'zen3', 'AMD EPYC 7763 64-Core Processor'),
                    'extras': partition_extras(_SITE_DIR, 'cpu'),
                },
                {
                    'name': 'gpu',
                    'descr': 'GPU nodes, 1x AMD EPYC 7713 + 4x NVIDIA A100',
                    'scheduler': 'slurm',
                    'launcher': 'srun',
                    'access': ['--partition=gpu'],
                    'environs': ['gnu-openmpi'],
                    'max_jobs': 4,
                    # 'cpu': the host side (STREAM, IOR) is checked too.
                    'features': ['gpu', 'mpi', 'cpu', 'cuda'],
                    'processor': _epyc(1, 64, 'zen3', 'AMD EPYC 7713 64-Core Processor'),
                    'devices': [
                        {'type': 'gpu', 'arch': 'sm_80', 'model': 'NVIDIA A100-SXM4-80GB',
                         'num_devices': 4},
                    ],
                    # How ReFrame asks Slurm for a test's num_gpus_per_node.
                    'resources': [
                        {'name': '_rfm_gpu', 'options': ['--gres=gpu:{num_gpus_per_node}']},
                    ],
                    'extras': partition_extras(_SITE_DIR, 'gpu'),
                },
            ],
        },
    ],
    'environments': [
        {
            'name': 'gnu-openmpi',
            'target_systems': ['example-slurm'],
            'modules': ['gcc/12.3.0', 'openmpi/4.1.6'],
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
    # Every performance figure to the site's OpenSearch/Elasticsearch as it
    # is measured (ReFrame's httpjson handler), beside ReFrame's own perflog
    # files.  ReFrame drops this handler for the whole session when the
    # server does not answer at start-up: `hpc-health push URL` sends the
    # judged figures of every night the index has not acknowledged.
    # ReFrame's debug log goes to the run directory (reframe_logging).
    'logging': [{
        **reframe_logging(_reframe_defaults['logging'][0])[0],
        'handlers_perflog': [
            {'type': 'filelog', 'prefix': '%(check_system)s/%(check_partition)s',
             'level': 'info', 'format': '%(check_job_completion_time)s|%(check_info)s|'
             '%(check_perfvalues)s', 'format_perfvars': '%(check_perf_var)s=%(check_perf_value)s '
             '%(check_perf_unit)s|', 'append': True},
            {'type': 'httpjson', 'url': 'http://opensearch.example.org:9200/hpc-health/_doc',
             'level': 'info', 'extras': {'facility': 'hpc-health', 'site': 'example-slurm'},
             # An API key, when the index wants one; kept out of the file.
             'extra_headers': {'Authorization': f"ApiKey {os.environ.get('OPENSEARCH_API_KEY', '')}"},
             'ignore_keys': ['check_perfvalues']},
        ],
    }],
}
