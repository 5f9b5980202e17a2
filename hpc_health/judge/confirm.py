"""A figure that failed on one night alone, measured again before the night
is closed: the retest.

The noise of shared machines comes in episodes of seconds to minutes (a
8 B latency at 2.6x for five runs in a row, then back; docs/verdicts.md).
A loss that is the machine's stays for the retest a few minutes later; an
episode mostly does not.  So a figure the one-night rule failed fails only
when its retest is also worse than the gate allows (one night beyond its
bound, or the third night in a row beyond the lower one) and its loss has
not shrunk by more than one night's bound allows between two nights (an
episode ending: :func:`hpc_health.judge.gating.retest_shrank`; not asked
on a node named busy on both, where the loss follows the other processes'
share); otherwise
it is ``PASS`` with both measurements in its reason.  A failure by the
persistence rule is a loss that stayed already and is not measured again.

A retest only ever removes failures, so it can only lower the false-alarm
rate the budget promises; the MDC is computed as if every one-night failure
had to be confirmed by an independent retest (:func:`gate.detectable`), the
side that never overstates what the gate catches, but for the shrinkage
test, which withdraws a loss that stays as rarely as the one-night rule
fails a healthy night (left out of the MDC: a change of it in the fifth
decimal).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hpc_health.jobside.nodeload import BUSY
from hpc_health.judge import nights
from hpc_health.judge.gating import WEAK_NOTE, retest_shrank, signed_pct

if TYPE_CHECKING:
    from hpc_health.judge.verdicts import Verdict

#: The tag of a one-night failure its retest did not confirm.
NOT_CONFIRMED = "not confirmed"
#: Said of a one-night failure its retest confirmed.
CONFIRMED = "confirmed by its retest"


def wanted(verdict_list: Sequence[Verdict]) -> list[Verdict]:
    """The verdicts a retest is for: failed by the one-night rule of the gate."""
    return [v for v in verdict_list if v.one_night]


def combine(first: Sequence[Verdict], retest: Sequence[Verdict]) -> list[Verdict]:
    """*first* with each one-night failure confirmed or withdrawn by its
    figure's verdict in *retest* (the same figures measured again)."""
    again = {nights.figure_key(v.measurement): v for v in retest}
    out = []
    for v in first:
        if not v.one_night:
            out.append(v)
            continue
        r = again.get(nights.figure_key(v.measurement))
        if r is None or r.deviation is None or r.verdict not in ("PASS", "DEGRADED", "IMPROVED"):
            why = "not run" if r is None else (r.reason.split(";")[0] or r.verdict)
            out.append(dataclasses.replace(
                v, retest="stands",
                reason=_then(v.reason, f"; its retest measured nothing ({why}): the failure stands")))
        elif r.verdict == "DEGRADED" and not _shrank(v, r):
            out.append(dataclasses.replace(
                v, retest="confirmed",
                reason=_then(v.reason, f"; {CONFIRMED} ({signed_pct(r.deviation)})")))
        elif r.verdict == "DEGRADED":
            out.append(dataclasses.replace(
                v, verdict="PASS", one_night=False, tag=NOT_CONFIRMED, retest="withdrawn",
                reason=_then(v.reason, f", but {signed_pct(r.deviation)} on its retest minutes "
                                       "later: the loss shrank by more than one night's noise "
                                       "allows, an episode ending, not a loss that stayed")))
        else:
            # On a busy node the night's loss has a likelier cause than
            # noise; and a retest just inside the bound is not "no loss"
            # (walk 17's Triad: -55.1 %, retest -51.1 %, bound -54.1 %).
            ended = ("not confirmed, while other processes used the node"
                     if v.measurement.busy else "an episode of the noise, not a loss that stayed")
            out.append(dataclasses.replace(
                v, verdict="PASS", one_night=False, tag=NOT_CONFIRMED, retest="withdrawn",
                reason=_then(v.reason, f", but {signed_pct(r.deviation)} on its retest minutes "
                                       f"later, within its bound: {ended}")))
    return out


def _shrank(first: Verdict, retest: Verdict) -> bool:
    """A retest still beyond the bound, but with the night's loss shrunk by
    more than the noise allows in minutes (a 8 B allreduce at 2.6x on its
    night and 1.4x on its retest, its three launches 0.17, 0.24 and 0.26 us
    against a reference of 0.17 us).

    Not on a node other processes used on the night and on the retest: the
    loss then follows their share from minute to minute, and a smaller one
    still beyond the bound is the same cause, still there (two memory-copy
    hogs took 41.7 % of the 1-thread Triad on its night and 30.2 % on its
    retest, against a bound of -9.1 %: newcomer walk 15)."""
    better = first.measurement.better
    if (first.retest_shrink is None or first.deviation is None or retest.deviation is None
            or better is None or (first.measurement.busy and retest.measurement.busy)):
        return False
    return retest_shrank(first.deviation, retest.deviation, better, first.retest_shrink)


def _then(reason: str, retested: str) -> str:
    """The reason with what the retest said right after the night's own
    words, before a weak reference's note and a busy node's."""
    at = min((i for i in (reason.find(WEAK_NOTE), reason.find(f"; {BUSY}"))
              if i >= 0), default=len(reason))
    return f"{reason[:at]}{retested}{reason[at:]}"
