"""How MPI start-up grows with the job: MPI_Init and the first barrier at
1, 2, 4, ... ranks on one node, then 2, 4, ... full nodes, under srun and
under mpirun (settings ``startup``).

A launcher or PMIx change that makes start-up grow linearly is invisible
at two nodes; the growth figures (largest point over smallest, per round)
and the fitted ``a + b log2 P + c P`` show it.
"""

import reframe as rfm
from reframe.core.builtins import parameter

from hpc_health.checklib.startup import StartupSweep


@rfm.simple_test
class StartupScaling(StartupSweep):
    """MPI_Init and first-barrier time per scale point, and their growth."""

    launcher = parameter(['srun', 'mpirun'])
    descr = 'MPI start-up time against the number of ranks and nodes'
    tags = {'kernels', 'mpi', 'startup', 'tuning'}
    time_limit = '20m'
