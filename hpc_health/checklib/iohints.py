"""The MPI-IO tuning sweep in the check library: IOR on one shared file
through collective MPI-IO under one setting each (collective buffering on,
off or automatic, aggregator counts and placement, the collective buffer's
size, Open MPI's I/O component and its collective-I/O algorithm, Lustre
striping), each proven applied before its figures count.

What proves a setting is not what the library says: Open MPI 4 returns the
hints it was passed from ``MPI_File_get_info`` whether it applied them or
not (OMPIO ignores ROMIO's hints).  The proof is what happened to the file:
with ``DARSHAN_DISABLE_SHARED_REDUCTION=1`` Darshan keeps one record per
rank of the shared file, so the ranks that really wrote (``POSIX_WRITES >
0``) are the aggregators; ``MPIIO_COLL_WRITES``/``MPIIO_INDEP_WRITES`` say
how IOR called MPI-IO.  A setting whose effect is not seen is a FAIL with
the reason, never a figure.
"""

from dataclasses import dataclass, field

from hpc_health.parsers import ParseError
from hpc_health.parsers.darshan import file_rank_counters


@dataclass(frozen=True)
class IoSetting:
    """One setting of the sweep."""
    hints: dict = field(default_factory=dict)   # MPI-IO hints (IOR_HINT__MPI__<hint>)
    component: str = ''      # Open MPI's io component: 'romio' or 'ompio' ('' the MPI's choice)
    fcoll: str = ''          # OMPIO's collective-I/O component
    lustre: bool = False     # stripe the test directory (ior_hints.stripe_count/size)
    what: str = ''

    def env(self):
        """Variables every rank gets (through the launched ``env``)."""
        out = [f'IOR_HINT__MPI__{k}={v}' for k, v in self.hints.items()]
        if self.component == 'romio':
            # Whichever ROMIO the build has (romio321 in 4.x, romio341 in 5.x).
            out.append('OMPI_MCA_io=^ompio')
        elif self.component == 'ompio':
            out.append('OMPI_MCA_io=ompio')
        if self.fcoll:
            out.append(f'OMPI_MCA_fcoll={self.fcoll}')
        if self.component:
            # Each process says which io module opened the file (stderr).
            out.append('OMPI_MCA_io_base_verbose=10')
        return out


_CB = {'enable': 'enable', 'disable': 'disable', 'automatic': 'automatic'}

#: The settings the sweep knows; a site picks with ``ior_hints.settings``.
IO_SETTINGS = {
    'default': IoSetting(what="the MPI's own choice"),
    **{f'romio_cb_{k}': IoSetting({'romio_cb_write': v, 'romio_cb_read': v}, 'romio',
                                  what=f'ROMIO collective buffering {v}')
       for k, v in _CB.items()},
    'romio_one_aggregator': IoSetting({'romio_cb_write': 'enable', 'romio_cb_read': 'enable',
                                       'cb_nodes': '1'}, 'romio',
                                      what='ROMIO collective buffering on one aggregator'),
    'romio_one_aggregator_per_node': IoSetting(
        {'romio_cb_write': 'enable', 'romio_cb_read': 'enable', 'cb_config_list': '*:1'},
        'romio', what='ROMIO, one aggregator per node (cb_config_list *:1)'),
    'romio_cb_buffer_1m': IoSetting({'romio_cb_write': 'enable', 'romio_cb_read': 'enable',
                                     'cb_buffer_size': '1048576'}, 'romio',
                                    what='ROMIO collective buffering with a 1 MiB buffer'),
    **{f'ompio_{f}': IoSetting({}, 'ompio', f, what=f'OMPIO with fcoll/{f}')
       for f in ('vulcan', 'dynamic_gen2', 'two_phase', 'individual')},
    'lustre_striped': IoSetting(lustre=True, what='the test directory striped with lfs'),
}


def expected_writers(setting, ranks, nodes):
    """How many ranks must have written the shared file if the setting was
    applied, or None where the library decides (automatic, OMPIO's
    aggregator count)."""
    hints = setting.hints
    if setting.fcoll == 'individual':
        return ranks
    cb = hints.get('romio_cb_write')
    if cb == 'disable':
        return ranks
    if cb == 'automatic':
        return None
    if 'cb_nodes' in hints:
        return min(int(hints['cb_nodes']), ranks)
    if cb != 'enable':
        return None
    # ROMIO's default, and what cb_config_list *:1 asks: one per node.
    return min(nodes, ranks)


def writers(parsed_text, path):
    """(ranks that wrote the file, ranks that read it, collective writes,
    independent writes) from darshan-parser's base view of a run with
    per-rank records."""
    posix = file_rank_counters(parsed_text, 'POSIX', path)
    if -1 in posix:
        raise ParseError(f'Darshan reduced {path} over the ranks (one rank -1 record): run '
                         'with DARSHAN_DISABLE_SHARED_REDUCTION=1 to see which ranks wrote')
    wrote = sorted(r for r, c in posix.items() if (c.get('POSIX_WRITES') or 0) > 0)
    read = sorted(r for r, c in posix.items() if (c.get('POSIX_READS') or 0) > 0)
    mpiio = file_rank_counters(parsed_text, 'MPI-IO', path)
    coll = sum(c.get('MPIIO_COLL_WRITES') or 0 for c in mpiio.values())
    indep = sum(c.get('MPIIO_INDEP_WRITES') or 0 for c in mpiio.values())
    return wrote, read, coll, indep


def not_applied(setting, ranks, nodes, wrote, passed, returned, components, open_mpi=True):
    """Why the run shows the setting was not applied, or None.  The io
    module is Open MPI's to report (*open_mpi*); MPICH has only ROMIO."""
    for got in returned:
        changed = {k: (v, got.get(k)) for k, v in setting.hints.items() if got.get(k) != v}
        if changed:
            k, (want, took) = next(iter(changed.items()))
            return (f'the file was opened with {k}={took or "nothing"}, not {want} '
                    '(MPI_File_get_info): the library did not take the hint')
    if setting.hints and not passed:
        return 'IOR passed no hints to MPI_File_open (IOR_HINT__MPI__ not seen)'
    if setting.component and open_mpi:
        other = sorted(c for c in components if not c.startswith(setting.component))
        if not components:
            return (f'no process reported its io module (io_base_verbose): cannot tell '
                    f'that {setting.component} opened the file')
        if other:
            return f'the file was opened by io/{", ".join(other)}, not {setting.component}'
    want = expected_writers(setting, ranks, nodes)
    if want is not None and len(wrote) != want:
        return (f'{len(wrote)} of {ranks} ranks wrote the shared file (Darshan, per rank), '
                f'{want} should have: the library did not apply '
                f'{", ".join(f"{k}={v}" for k, v in setting.hints.items()) or setting.what}')
    return None


def proof_text(setting, ranks, wrote, read, coll, indep, components):
    comp = f'io/{"/".join(sorted(components))}; ' if components else ''
    return (f'{setting.what}: {comp}{len(wrote)} of {ranks} ranks wrote the shared file, '
            f'{len(read)} read it; MPI-IO collective writes {coll}, independent {indep} '
            '(Darshan, per rank)')
