"""Each node's record of its short checks (``hpc-health node-check``): the
recent healthy values of each probe, one small JSON file per node in the
store (``nodecheck/<site>/<node>.json``), written atomically.  The probes
are not ReFrame runs, so they are kept beside the run directories, not
among them."""

from __future__ import annotations

import json
from pathlib import Path

from hpc_health import paths
from hpc_health.errors import ConfigError
from hpc_health.store.rundirs import write_json


def record_path(site: str, node: str) -> Path:
    return paths.store_root() / "nodecheck" / site / f"{node}.json"


def read(site: str, node: str) -> dict[str, list[float]]:
    """{probe: recent healthy values}; empty for a node never checked."""
    path = record_path(site, node)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        raise ConfigError(path, f"unreadable node-check record ({err}): delete it to "
                                "start the node's record again") from None
    return {k: [float(x) for x in v] for k, v in (data.get("probes") or {}).items()}


def write(site: str, node: str, probes: dict[str, list[float]]) -> None:
    path = record_path(site, node)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {"node": node, "probes": probes})
