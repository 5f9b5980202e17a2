"""``hpc-health compare``: two run sets side by side, before/after on one
site or two sites, judged with the verdicts' noise model, with what differs
between their software stacks (printed by :mod:`hpc_health.cli.compare`).

Per (check, figure, partition): the centre of each side, the change, its
95 % interval and a word:

``REGRESSED``     worse, significantly (Holm over the figures compared) and
                  by at least ``min_change``
``IMPROVED``      the same, better
``SAME``          no significant change, and one of ``margin`` would have
                  been caught (the minimum detectable change is smaller)
``INCONCLUSIVE``  no significant change, but the runs cannot promise to see
                  one of ``margin``: the reason and the MDC are given
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hpc_health import stats
from hpc_health.errors import ConfigError

if TYPE_CHECKING:
    from hpc_health.model.runs import FigureIndex, Run, RunSet

REGRESSED, IMPROVED, SAME, INCONCLUSIVE = "REGRESSED", "IMPROVED", "SAME", "INCONCLUSIVE"
BROADLY_WORSE, BROADLY_BETTER = "BROADLY WORSE", "BROADLY BETTER"


@dataclass
class Row:
    check: str
    variable: str
    unit: str
    better: str
    partition_a: str
    partition_b: str
    environ: str
    centre_a: float
    centre_b: float
    runs_a: int
    runs_b: int
    samples_a: int
    samples_b: int
    change: float
    low: float | None
    high: float | None
    p_value: float | None
    mdc: float | None
    worse_by: float = 0.0               # the change, positive when B is worse
    level: float | None = None          # two-sided level of low/high: the decision's
    log_change: float = 0.0
    se: float = 0.0
    df: int = 0
    word: str = ""
    why: str = ""
    capability: str = ""
    norm_a: float | None = None      # fraction of the declared capability
    norm_b: float | None = None


@dataclass
class Result:
    a: object                   # model.runs.RunSet
    b: object
    rows: list = field(default_factory=list)
    only_a: list = field(default_factory=list)     # [(check, variable, partition)]
    only_b: list = field(default_factory=list)
    stack: list = field(default_factory=list)       # [(what, a, b)]
    specs: list = field(default_factory=list)       # [(change, name, a, b)]
    partition_map: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    #: all figures together (stats.BroadShift), None: too few runs
    broad: stats.BroadShift | None = None

    @property
    def exit_code(self) -> int:
        worse = self.broad is not None and self.broad.word == BROADLY_WORSE
        return 1 if worse or any(r.word == REGRESSED for r in self.rows) else 0

    def counts(self) -> str:
        found: dict[str, int] = defaultdict(int)
        for r in self.rows:
            found[r.word] += 1
        return ", ".join(f"{n} {w}" for w, n in sorted(found.items()))


def compare(idx: FigureIndex, set_a: RunSet, set_b: RunSet, mapping: dict[str, str] | None = None,
            margin: float = stats.COMPARE_MARGIN, alpha: float = stats.COMPARE_ALPHA,
            min_change: float = stats.BOUND_FLOOR, normalise: bool = False) -> Result:
    both = sorted({(r.site, r.run_id) for r in set_a.runs} & {(r.site, r.run_id) for r in set_b.runs})
    if both:
        what = ("both sides are the same run(s)" if len(both) == len(set_a.runs) ==
                len(set_b.runs) else f"{len(both)} run(s) are on both sides")
        raise ConfigError(f"{set_a.text} {set_b.text}", f"{what} ({', '.join(r for _, r in both[:3])}"
                          f"{' ...' if len(both) > 3 else ''}): a run compared with itself "
                          "shows no change whatever happened; give two sets without a run in "
                          "common (e.g. tag:before tag:after, or RUN1..RUN2 last:3)")
    figs = [idx.figures(s.runs, partition=s.partition) for s in (set_a, set_b)]
    res = Result(set_a, set_b)
    res.partition_map = _partition_map(figs[0], figs[1], mapping or {})
    same_site = set_a.site == set_b.site
    sides = [_by_key(figs[0], res.partition_map, same_site),
             _by_key(figs[1], None, same_site)]
    common = [k for k in sides[0] if k in sides[1]]
    res.only_a = sorted(_describe(k) for k in sides[0] if k not in sides[1])
    res.only_b = sorted(_describe(k) for k in sides[1] if k not in sides[0])
    if not common:
        raise ConfigError(f"{set_a.text} {set_b.text}", "the two run sets have no figure in "
                          f"common ({len(sides[0])} and {len(sides[1])} figures; partitions "
                          f"{_parts(figs[0])} and {_parts(figs[1])}: match them with "
                          "--map A_PART=B_PART)")
    together = []
    for key in common:
        a, b = sides[0][key], sides[1][key]
        first = next(iter(a.values()))[0]
        try:
            c = stats.compare_runs([s for _, s in a.values()], [s for _, s in b.values()],
                                   first.better)
        except ValueError as err:
            res.notes.append(f"{_describe(key)}: not compared: {err}")
            continue
        together.append((first.better, {r: s for r, (_, s) in a.items()},
                         {r: s for r, (_, s) in b.items()}))
        other = next(iter(b.values()))[0]
        row = Row(first.check, first.variable, first.unit, first.better, first.partition,
                  other.partition, key[3] or first.environ, c.centre_a, c.centre_b, c.runs_a,
                  c.runs_b, sum(len(s) for _, s in a.values()),
                  sum(len(s) for _, s in b.values()), c.change, c.low, c.high, c.p_value,
                  c.mdc, c.worse_by, log_change=c.log_change, se=c.se, df=c.df,
                  capability=first.capability)
        if normalise and first.capability:
            row.norm_a = _fraction(c.centre_a, first)
            row.norm_b = _fraction(c.centre_b, other)
        res.rows.append(row)
    _words(res.rows, margin, alpha, min_change)
    res.broad = stats.broad_shift(together, alpha)
    res.stack, res.specs = stack_diff(set_a.runs, set_b.runs, figs)
    return res


def _partition_map(figs_a, figs_b, mapping):
    pa = sorted({m.partition for m in figs_a})
    pb = sorted({m.partition for m in figs_b})
    for a, b in mapping.items():
        if a not in pa:
            raise ConfigError(f"--map {a}={b}", f"side A has no partition {a!r} "
                              f"(it has {', '.join(pa) or 'none'})")
        if b not in pb:
            raise ConfigError(f"--map {a}={b}", f"side B has no partition {b!r} "
                              f"(it has {', '.join(pb) or 'none'})")
    if not mapping and len(pa) == 1 and len(pb) == 1:
        return {pa[0]: pb[0]}
    return {**{p: p for p in pa}, **mapping}


def _by_key(figs, mapping, same_site):
    """{(check, variable, partition, environ): {run: (figure, samples)}};
    side A's partitions are renamed to side B's by *mapping*."""
    out = defaultdict(dict)
    for m in figs:
        part = mapping.get(m.partition, m.partition) if mapping is not None else m.partition
        # Programming environments are named per site: matched only on one site.
        key = (m.check, m.variable, part, m.environ if same_site else "")
        out[key][(m.run.site, m.run.run_id)] = (m, m.samples or [m.value])
    return {k: {r: (v[0], v[1]) for r, v in runs.items()} for k, runs in out.items()}


def _describe(key):
    check, variable, part, environ = key
    return f"{check} {variable} on {part}" + (f" ({environ})" if environ else "")


def _parts(figs):
    return ", ".join(sorted({m.partition for m in figs})) or "none"


def _fraction(value, m):
    caps = (m.run.meta.get("capabilities") or {}).get(f"{m.system}:{m.partition}") or {}
    num, _, per = m.capability.partition("/")
    cap = caps.get(num)
    if per:
        cap = cap / caps[per] if cap and caps.get(per) else None
    return value / cap if cap else None


def _words(rows, margin, alpha, min_change):
    """Each figure's word, from its interval at the level Holm's procedure
    judged it at (the interval printed): REGRESSED or IMPROVED when it
    does not contain 0 and the change is at least *min_change*; SAME only
    when it lies within +-*margin* (both one-sided tests of equivalence
    pass at that level); else INCONCLUSIVE, with what would decide it."""
    levels = stats.holm_levels([r.p_value for r in rows], alpha)
    n = sum(level is not None for level in levels)
    for r, level in zip(rows, levels):
        runs = f"{r.runs_a} run{'s' if r.runs_a > 1 else ''} against {r.runs_b}"
        if r.p_value is None or level is None:
            r.word = INCONCLUSIVE
            r.why = (f"{runs}: the night-to-night spread cannot be measured with fewer "
                     "than 3 runs in all; take more runs")
            continue
        r.level = level
        r.low, r.high = stats.change_interval(r.log_change, r.se, r.df, level)
        r.mdc = stats.detectable_change(r.se, r.df, level)
        ival = f"[{r.low:+.1%}, {r.high:+.1%}] ({1 - level:.4%} interval, Holm over {n} figures)"
        if (r.low > 0 or r.high < 0) and abs(r.worse_by) >= min_change:
            r.word = REGRESSED if r.worse_by > 0 else IMPROVED
            r.why = f"p={r.p_value:.2g}; {ival} does not contain 0"
        elif -margin <= r.low and r.high <= margin:
            r.word = SAME
            r.why = f"{ival} lies within ±{margin:.0%}"
        elif r.low > 0 or r.high < 0:
            r.word = INCONCLUSIVE
            r.why = (f"a change of {r.change:+.1%}, below {min_change:.0%}, yet {ival} reaches "
                     f"past ±{margin:.0%}: take more runs")
        else:
            r.word = INCONCLUSIVE
            r.why = (f"{ival} reaches past ±{margin:.0%}: only a change of {r.mdc:.0%} or more "
                     f"is caught with {runs}; take more runs")


# --- what differs between the two stacks ----------------------------------------

_STACK = (("compiler", lambda m: (m.get("stack") or {}).get("mpicc")),
          ("MPI", lambda m: (m.get("stack") or {}).get("mpirun")),
          ("kernel", lambda m: (m.get("stack") or {}).get("kernel")),
          ("ReFrame", lambda m: m.get("reframe")),
          ("hpc-health", lambda m: m.get("hpc_health")),
          ("suite commit", lambda m: m.get("suite_commit")),
          ("host", lambda m: m.get("hostname")))


def _environment(runs):
    found = defaultdict(set)
    for r in runs:
        for k, v in ((r.meta.get("stack") or {}).get("environment") or {}).items():
            found[k].add(v)
    return found


def stack_diff(runs_a: Sequence[Run], runs_b: Sequence[Run],
               figs: Sequence[Any]) -> tuple[list[tuple[str, Any, Any]], list[Any]]:
    """([(what, values in A, values in B)] for what differs, [(added |
    removed | changed, spec name, A, B)] of the Spack root specs)."""
    out = []
    for what, get in _STACK:
        va = sorted({str(get(r.meta)) for r in runs_a if get(r.meta)})
        vb = sorted({str(get(r.meta)) for r in runs_b if get(r.meta)})
        if va != vb:
            out.append((what, "; ".join(va) or "-", "; ".join(vb) or "-"))
    env_a, env_b = _environment(runs_a), _environment(runs_b)
    for k in sorted(set(env_a) | set(env_b)):
        if env_a.get(k) != env_b.get(k):
            out.append((f"${k}", "; ".join(sorted(env_a.get(k, ()))) or "-",
                        "; ".join(sorted(env_b.get(k, ()))) or "-"))
    nodes = [sorted({n for m in f for n in m.nodes}) for f in figs]
    if nodes[0] != nodes[1]:
        out.append(("nodes", ",".join(nodes[0]) or "-", ",".join(nodes[1]) or "-"))
    sa, sb = _specs(runs_a), _specs(runs_b)
    specs = []
    for name in sorted(set(sa) | set(sb)):
        a, b = sa.get(name), sb.get(name)
        if a == b:
            continue
        change = "added" if not a else "removed" if not b else "changed"
        specs.append((change, name, _spec_text(a), _spec_text(b)))
    return out, specs


def _specs(runs):
    found = defaultdict(set)
    for r in runs:
        for rec in (r.meta.get("spack") or {}).values():
            for name, s in (rec.get("specs") or {}).items():
                found[name].add((s.get("version"), s.get("variants"), s.get("hash"),
                                 s.get("compiler")))
    return {n: sorted(v, key=str) for n, v in found.items()}


def _spec_text(versions):
    if not versions:
        return "-"
    return "; ".join(f"@{v} {var} /{(h or '')[:7]}" + (f" %{c}" if c else "")
                     for v, var, h, c in versions)
