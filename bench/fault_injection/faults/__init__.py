"""The injected faults, one module each, all with the interface of
:class:`base.Fault` (set up a session, apply at a strength and clear,
describe).  ``FAULTS`` maps the names ``--faults`` takes to their classes."""

from .base import Fault
from .io import Io
from .latency import BarrierLatency, Latency
from .memory import Memory
from .network import Network, NetworkLink
from .slow_rank import SlowRank, SlowRankQuota

FAULTS = {c.name: c for c in (Memory, Network, NetworkLink, Latency, Io, SlowRank,
                              SlowRankQuota, BarrierLatency)}

__all__ = ["FAULTS", "Fault"]
