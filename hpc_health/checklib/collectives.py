"""The collective-algorithm sweep in the check library: OSU's allreduce,
bcast and alltoall with the MPI's default and with each algorithm it offers,
forced one at a time, each proven applied.

The job lists the algorithms on the compute node
(:mod:`hpc_health.jobside.collectives`), runs one short proof launch per
algorithm with the library reporting what it applied, then the timed
launches round-robin (every algorithm once per round, so a slow spell of the
node hits them all alike and the ratio of two algorithms in one round is a
fair sample).  An algorithm the library refused or replaced is a FAIL of its
figures with the reason, never a figure.
"""

import functools
import os
import shlex
import statistics
import sys

import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import SanityError

from hpc_health.checklib.check import settings
from hpc_health.checklib.launches import case_launch, case_sections, job_output
from hpc_health.checklib.osu import OsuBase, check_osu_table
from hpc_health.checklib.shell import quote
from hpc_health.model.figures import LOWER, MESSAGE_SIZES, Axis, Figure
from hpc_health.parsers import ParseError, mpi_info
from hpc_health.parsers import osu as osu_parser
from hpc_health.units import size_label

PLAN = 'algorithms.tsv'
_READ = "while IFS=$'\\t' read -r alg force proof; do"


class NotApplied(ValueError):
    """The algorithm did not run as asked (the figure's reason)."""


def proof_reason(mpi, collective, algorithm, text, rc):
    """Why *algorithm* was not applied in its proof launch, or None."""
    if rc != 0:
        refused = mpi_info.mpich_refusal(text) if mpi != 'openmpi' else None
        if refused:
            return f'{mpi} refused it (the proof launch exited with {rc}): {refused}'
        if mpi != 'openmpi' and 'Fatal error' not in text:
            # Hydra stops the ranks at the first abort: now and then (1-2 in
            # 10 here) before any rank's message is out.
            return f'the proof launch exited with {rc}; {mpi} printed no reason'
        last = [ln for ln in text.splitlines() if ln.strip()][-3:]
        return f'the proof launch exited with {rc}: {" | ".join(last) or "no output"}'
    if mpi == 'openmpi':
        return mpi_info.ompi_forced_algorithm_applied(text, collective, algorithm)
    return None   # MPICH: MPIR_CVAR_COLLECTIVE_FALLBACK=error made refusal an exit code


def proof_summary(mpi, alg, text):
    """What the proof launch showed (the same words for every algorithm it
    holds for, so that the run prints one line per kind of proof)."""
    if mpi != 'openmpi':
        return ('the MPI\'s default' if alg == 'default' else
                f'forced with MPIR_CVAR_*_INTRA_ALGORITHM; {mpi} accepted it with '
                'MPIR_CVAR_COLLECTIVE_FALLBACK=error')
    serving = ', '.join(sorted({f'coll/{c} (priority {p})' for c, p in
                                mpi_info.ompi_serving_component(text).values()}))
    serving = serving or 'an unreported component'
    if alg == 'default':
        return f'the MPI\'s default, served by {serving}'
    return (f'forced through coll_tuned_<coll>_algorithm: Open MPI took the value and '
            f'{serving} served MPI_COMM_WORLD')


def algorithm_latency(rnd, case):
    """One round's latency of (size, algorithm); NotApplied when that
    algorithm's launch failed or was not applied."""
    size, alg = case
    table = rnd.get(alg)
    if isinstance(table, Exception) or table is None:
        raise NotApplied(str(table) if table else f'{alg}: no launch in this round')
    return osu_parser.value_at(table, size, 'avg_latency_us')


def default_over_best(round_tables, size, column='avg_latency_us'):
    """(default's time / best algorithm's time, best's name) in one round."""
    times = {alg: osu_parser.value_at(t, size, column) for alg, t in round_tables.items()
             if not isinstance(t, Exception)}
    if 'default' not in times:
        raise NotApplied(f'the default launch failed: {round_tables.get("default")}')
    best = min(times, key=times.get)
    return times['default'] / times[best], best


class OsuAlgorithmSweep(OsuBase):
    """The collective in ``benchmark`` (``osu_allreduce``, ``osu_bcast`` or
    ``osu_alltoall``) under each algorithm; settings ``osu_algorithms``."""

    #: Algorithms run, the MPI's default first; read from the job's plan.
    algorithms = variable(typ.List[str], value=['default'])
    #: {algorithm: what its proof launch showed}, recorded with the figures.
    algorithm_proof = variable(typ.Dict[str, str], value={})
    #: {algorithm: why it was not applied}: its figures FAIL with this.
    not_applied = variable(typ.Dict[str, str], value={})
    mpi = variable(str, value='')

    figures = [
        Figure('latency_{}', 'us', LOWER,
               algorithm_latency, Axis(
                   'cases', lambda c: f'{size_label(c[0])}_{c[1]}'), group='latency'),
        Figure('default_over_best_{}', 'ratio', LOWER,
               lambda rnd, size: default_over_best(rnd, size)[0], MESSAGE_SIZES),
    ]

    @property
    def cases(self):
        return [(s, a) for a in self.algorithms for s in self.sizes or []]

    @run_after('setup')
    def read_sweep_settings(self):
        conf = settings(self).get('osu_algorithms') or {}
        self.skip_for(self.benchmark not in (conf.get('collectives') or []),
                      f'{self.benchmark} is not in osu_algorithms.collectives')
        self.samples = conf.get('rounds') or 3
        self.sweep_settings = conf

    @run_before('run')
    def plan_the_sweep(self):
        conf, coll = self.sweep_settings, self.benchmark.replace('osu_', '')
        only = ','.join((conf.get('only') or {}).get(coll) or [])
        launch = self.launch_command()
        proof_opts = ['-m', f'{min(self.sizes)}:{min(self.sizes)}', '-i', '1', '-x', '0']
        plan = (f'{quote(sys.executable)} -m hpc_health.jobside.collectives plan '
                f'--mpi {conf.get("mpi") or "auto"} --collective {coll} '
                f'--only {shlex.quote(only)} --executable {quote(self.executable)} '
                f'> {PLAN} 2> plan-errors.txt')
        proofs = (f'{_READ} env $force $proof {launch} {self.executable} {" ".join(proof_opts)} '
                  f'> "proof-$alg.txt" 2>&1 < /dev/null; echo $? > "proof-$alg.rc"; done < {PLAN}')
        self.prerun_cmds = list(self.prerun_cmds) + [
            plan, proofs, 'echo "hpc-health: case default round 1"']
        self.keep_files = list(self.keep_files) + [PLAN, 'proof-*.txt']

    def repeat_launches(self):
        """Round 1's default is the job's own launch; every other launch is
        a line after it (stdin from /dev/null: a launcher reads stdin and
        would eat the plan)."""
        again = ' '.join([self.launch_command(), self.executable, *self.executable_opts])
        body = f'{case_launch("$alg", "$r", f"env $force {again}")}; done'
        self.postrun_cmds = [
            'echo "hpc-health: case default exit $?"',
            f'r=1; tail -n +2 {PLAN} | {_READ} {body}',
            f'for r in $(seq 2 {self.samples}); do {_READ} {body} < {PLAN}; done',
        ] + list(self.postrun_cmds)

    def _stage(self, name):
        return os.path.join(self.stagedir, name)

    def read_plan(self):
        try:
            with open(self._stage(PLAN)) as fp:
                lines = [ln.rstrip('\n').split('\t') for ln in fp if ln.strip()]
        except OSError:
            lines = []
        if not lines:
            try:
                with open(self._stage('plan-errors.txt')) as fp:
                    why = fp.read().strip()
            except OSError:
                why = ''
            raise SanityError(f'{self.benchmark}: no algorithm list: {why or "plan not run"}')
        self.algorithms = [ln[0] for ln in lines]
        forced = ' '.join(ln[1] for ln in lines if len(ln) > 1)
        named = self.sweep_settings.get('mpi')
        self.mpi = ('openmpi' if 'OMPI_MCA_' in forced else
                    named if named in ('mpich', 'cray-mpich') else 'mpich')

    def check_proofs(self):
        coll = self.benchmark.replace('osu_', '')
        for alg in self.algorithms:
            try:
                with open(self._stage(f'proof-{alg}.txt'), errors='replace') as fp:
                    text = fp.read()
                with open(self._stage(f'proof-{alg}.rc')) as fp:
                    rc = int(fp.read().strip() or -1)
            except (OSError, ValueError) as err:
                self.not_applied[alg] = f'no proof launch: {err}'
                continue
            why = (None if alg == 'default' and rc == 0 else
                   proof_reason(self.mpi, coll, alg, text, rc))
            if why:
                self.not_applied[alg] = why
                continue
            self.algorithm_proof[alg] = proof_summary(self.mpi, alg, text)
            for size in self.sizes:
                self.figure_proof[f'latency_{size_label(size)}_{alg}'] = \
                    self.algorithm_proof[alg]

    @functools.cached_property
    def _rounds(self):
        sections = case_sections(job_output(self, self.benchmark))
        rounds = []
        for r in range(1, self.samples + 1):
            rnd = {}
            for alg in self.algorithms:
                rc, body = sections.get((alg, r), (None, None))
                if alg in self.not_applied:
                    rnd[alg] = NotApplied(f'{alg} not applied: {self.not_applied[alg]}')
                elif body is None or rc is None:
                    rnd[alg] = NotApplied(f'{alg}: round {r} did not run to the end')
                elif rc != 0:
                    rnd[alg] = NotApplied(f'{alg}: launch of round {r} exited with {rc}')
                else:
                    try:
                        rnd[alg] = osu_parser.parse_osu(body)
                        check_osu_table(rnd[alg], self.benchmark, self.sizes, False)
                    except (ParseError, ValueError) as err:
                        rnd[alg] = NotApplied(f'{alg}, round {r}: {err}')
            rounds.append(rnd)
        return rounds

    def outputs(self):
        return self._rounds

    def check_output(self):
        if self.validates:
            self.check_validation()
        self.read_plan()
        self.check_proofs()
        failed = [r['default'] for r in self._rounds if isinstance(r['default'], Exception)]
        if failed:
            raise SanityError(f'{self.benchmark} with the MPI\'s default: {failed[0]}')
        self.note_findings()

    def note_findings(self):
        """A default well behind the best algorithm is worth saying on its own."""
        limit = self.sweep_settings.get('finding_ratio') or 1.2
        for size in self.sizes:
            per_round = [default_over_best(r, size) for r in self._rounds]
            ratio = statistics.median(x for x, _ in per_round)
            best = statistics.mode(b for _, b in per_round)
            if ratio >= limit:
                name = f'default_over_best_{size_label(size)}'
                self.findings[name] = (f'{self.benchmark.replace("osu_", "")} '
                                       f'{size_label(size)}: the default is {ratio:.2f}x '
                                       f'the {best} algorithm')
