"""Which stored runs a dashboard has acknowledged (``hpc-health push``).

One small JSON file per destination under ``<store>/push/``, named by a
hash of the URL (a URL may carry a user name; the file name never does).
A run is recorded only after the server answered 2xx for it, so a run is
sent until it is acknowledged, and never again afterwards.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from hpc_health import paths
from hpc_health.store import rundirs


def _file(url: str) -> Path:
    return paths.store_root() / "push" / (hashlib.sha256(url.encode()).hexdigest()[:16] + ".json")


def acknowledged(url: str) -> set[str]:
    """Run keys (``site/run id``) the destination has acknowledged."""
    try:
        data = json.loads(_file(url).read_text())
    except FileNotFoundError:
        return set()
    except (OSError, ValueError):
        # A damaged record means "not known to be sent": send again (the
        # records carry the run id, so a dashboard can deduplicate).
        return set()
    return set(data.get("acknowledged") or [])


def record(url: str, done: set[str]) -> None:
    """Keep *done* as the destination's acknowledged runs (atomically)."""
    path = _file(url)
    path.parent.mkdir(parents=True, exist_ok=True)
    rundirs.write_json(path, {"acknowledged": sorted(done)})
