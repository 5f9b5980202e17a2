"""Which MPI-IO setting is right for a shared file on this machine, and is
each one still applied?  IOR on one shared file through collective MPI-IO,
once per setting (settings ``ior_hints``): collective buffering on, off and
automatic, one aggregator and one per node, the collective buffer's size,
Open MPI's OMPIO with each collective-I/O component, Lustre striping.

Each setting's bandwidth is its own figure, and counts only once the run
shows the setting was applied: Darshan's per-rank records name the ranks
that really wrote the file (the aggregators), the hints the file was opened
with are recorded, and Open MPI reports which io module opened it.
"""

import os
import shlex

import reframe as rfm
from reframe.core.builtins import parameter, run_after, run_before, sanity_function
from reframe.core.exceptions import SanityError

from hpc_health.checklib import darshan
from hpc_health.checklib.check import num_nodes, settings
from hpc_health.checklib.iohints import (
    IO_SETTINGS,
    not_applied,
    proof_text,
    writers,
)
from hpc_health.checklib.ior import IO_DIR_VAR, IoBase, check_ior_summary, ior_options
from hpc_health.checklib.launches import job_output
from hpc_health.model.figures import HIGHER, LOWER, Figure
from hpc_health.parsers import ParseError
from hpc_health.parsers.darshan import bytes_moved
from hpc_health.parsers.ior import ior_hints
from hpc_health.parsers.mpi_info import ompi_io_selected

_STRIPE = 'lfs-stripe.txt'


@rfm.simple_test
class IorHints(IoBase):
    """Write and read bandwidth of a shared file under one MPI-IO setting."""

    setting = parameter(list(IO_SETTINGS))
    figures = [Figure(f'{op}_bw', 'MiB/s', HIGHER, lambda it, op=op: it[op]['bw_mib'])
               for op in ('write', 'read')] + [
        # Two-phase I/O over a file with holes between the ranks' blocks
        # reads and rewrites whole buffers (ROMIO's data sieving): the file
        # system sees more bytes than the application wrote.
        Figure('posix_write_amplification', 'ratio', LOWER, lambda amp: amp,
               source='amplification')]
    descr = 'IOR shared-file bandwidth under one MPI-IO setting, proven applied'
    tags = {'io', 'ior', 'tuning'}
    dir_name = 'hpc-health-iohints'

    @run_after('setup')
    def choose(self):
        conf = settings(self).get('ior_hints') or {}
        self.conf = conf
        self.spec = IO_SETTINGS[self.setting]
        self.skip_for(self.setting not in (conf.get('settings') or []),
                      f'{self.setting} is not in ior_hints.settings')
        self.skip_for(not self.use_darshan, 'the I/O hints sweep proves each setting with '
                                            'Darshan, and ior.darshan is off')
        mpi = conf.get('mpi') or 'auto'
        # ROMIO is every MPICH's MPI-IO: only OMPIO is Open MPI's alone.
        self.skip_for(self.spec.component == 'ompio' and mpi not in ('auto', 'openmpi'),
                      f'{self.setting} selects Open MPI\'s OMPIO; ior_hints.mpi is {mpi}')
        self.mpi = mpi
        self.skip_for(self.spec.lustre and not conf.get('stripe_count'),
                      'the site declares no Lustre scratch to stripe '
                      '(ior_hints.stripe_count and stripe_size)')

    @run_before('run')
    def set_command(self):
        cfg = settings(self)['ior']
        opts = ior_options('mpiio_collective', cfg['block_size'], cfg['transfer_size'],
                           cfg['segments'], cfg['repetitions'], f'"${IO_DIR_VAR}/testfile"',
                           self.summary_file) + ['-H']
        env = ['DARSHAN_DISABLE_SHARED_REDUCTION=1', *self.spec.env(),
               *(shlex.quote(e) for e in self.conf.get('env') or [])]
        if self.spec.lustre:
            # Kept (-k) so that its layout can be read back; the directory
            # goes at the end as always.
            opts.append('-k')
        self.keep_files.append('ior-summary.json')
        self.launch(os.path.join(self.ior.prefix('ior'), 'bin', 'ior'), opts, env)
        if self.spec.lustre:
            count, size = self.conf['stripe_count'], self.conf.get('stripe_size') or '1m'
            self.prerun_cmds.append(
                f'command -v lfs >/dev/null || {{ echo "hpc-health: no lfs on $(hostname): '
                f'the scratch is not Lustre" >&2; exit 3; }}; '
                f'lfs setstripe -c {int(count)} -S {shlex.quote(str(size))} "${IO_DIR_VAR}"')
            self.postrun_cmds.insert(1, f'lfs getstripe -c -S "${IO_DIR_VAR}/testfile" '
                                        f'> {_STRIPE} 2>&1')
            self.keep_files.append(_STRIPE)

    def darshan_modules(self):
        return ['POSIX', 'MPI-IO']

    def outputs(self):
        return self.ior_samples()

    def amplification(self):
        return [self._amplification]

    def check_stripes(self):
        try:
            with open(os.path.join(self.stagedir, _STRIPE)) as fp:
                got = fp.read().split()
        except OSError:
            raise SanityError('lfs getstripe printed nothing') from None
        want = str(self.conf['stripe_count'])
        if not got or got[0] != want:
            raise SanityError(f'the test file has stripe count {got[:1]}, {want} was set: '
                              'the stripe setting was not applied')
        return f'; lfs getstripe: count {got[0]}, size {got[1] if len(got) > 1 else "?"}'

    @sanity_function
    def applied_and_moved(self):
        self.require_success('IOR')
        out = self.ior_summary
        expected = self.consistent(check_ior_summary, out, 'mpiio_collective', self.num_tasks)
        # MPI-IO saw exactly the application's bytes; the file system may
        # see more (amplification, a figure) but never fewer (lost I/O).
        self.check_darshan_bytes(('MPI-IO', expected, expected, 0))
        moved = bytes_moved(self.check_darshan(), 'POSIX')
        if (moved['written'] or 0) < expected:
            raise SanityError(f'Darshan saw {moved["written"]} B written in POSIX, fewer than '
                              f'the {expected} B IOR wrote through MPI-IO')
        self._amplification = moved['written'] / expected
        with open(os.path.join(self.stagedir, darshan.PARSED)) as fp:
            parsed = fp.read()
        # IOR's -H hints are on stdout, Open MPI's io module report on stderr.
        text = job_output(self, 'IOR')
        with open(os.path.join(self.stagedir, str(self.stderr)), errors='replace') as fp:
            text += fp.read()
        path = out['parameters']['testFileName']
        try:
            wrote, read, coll, indep = writers(parsed, path)
        except ParseError as err:
            raise SanityError(f'Darshan: {err}') from None
        hints, components = ior_hints(text), ompi_io_selected(text)
        why = not_applied(self.spec, self.num_tasks, num_nodes(self), wrote,
                          hints['passed'], hints['returned'], components,
                          open_mpi=self.mpi in ('auto', 'openmpi'))
        if why:
            raise SanityError(f'{self.setting} not applied: {why}')
        proof = proof_text(self.spec, self.num_tasks, wrote, read, coll, indep, components)
        if self.spec.lustre:
            proof += self.check_stripes()
        returned = hints['returned'][0] if hints['returned'] else {}
        if returned:
            proof += '; opened with ' + ', '.join(f'{k}={v}' for k, v in returned.items())
        self.figure_proof = {'write_bw': proof, 'read_bw': proof}
        self.write_summary([f'IOR {out["version"]}: {self.setting}, {self.num_tasks} ranks',
                            f'command: {out["command_line"]}', proof])
        return True
