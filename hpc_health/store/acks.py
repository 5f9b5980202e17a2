"""Which stored runs a dashboard has acknowledged (``hpc-health push``).

One small JSON file per destination under ``<store>/push/``, named by a
hash of the URL (a URL may carry a user name; the file name never does).
A run is recorded only after the server answered 2xx for it, so a run is
sent until it is acknowledged, and never again afterwards.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from hpc_health import paths, processes
from hpc_health.errors import ConfigError
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


def pushing(url: str, wait: float,
            say: Callable[[str], Any]) -> AbstractContextManager[None]:
    """One push to a destination at a time: two pushes at once would both
    read the same runs as not yet acknowledged and send them twice.  Waits
    up to *wait* seconds for another, saying so, then refuses."""
    path = _file(url).with_suffix(".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    return processes.held(
        path, wait,
        lambda holder: say(f"another push to this URL is running ({holder}): waiting up to "
                           f"{wait:g} s for it to finish"),
        lambda holder: ConfigError(path, f"another push to this URL ({holder}) still runs "
                                   f"after {wait:g} s: nothing sent; its runs are sent by it"))
