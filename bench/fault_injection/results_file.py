"""The results document (``results.json``): every night's samples, verdicts
and settings, per fault, rewritten after every night so an interrupted run
keeps what it measured.  Tables are rendered from it (``analysis``), never
typed in."""

from __future__ import annotations

import json
from pathlib import Path


class Recorder:
    def __init__(self, path, meta, append=False):
        self.path = Path(path)
        self.doc = {"meta": meta, "faults": {}}
        if append and self.path.exists():
            # Keep the faults measured before; the ones run now replace theirs.
            old = json.loads(self.path.read_text())
            self.doc["faults"] = old.get("faults", {})
            meta["earlier_runs"] = old["meta"].get("earlier_runs", []) + [
                {k: old["meta"].get(k) for k in ("started", "finished", "argv", "options")}]

    def fault(self, name):
        """A fresh record for fault ``name`` (replacing an earlier one)."""
        self.doc["faults"][name] = {"name": name, "status": "running", "nights": []}
        return self.doc["faults"][name]

    def save(self):
        # One line per night keeps the file small and still readable.
        lines = {}
        doc = {"meta": self.doc["meta"], "faults": {}}
        for name, fr in self.doc["faults"].items():
            fr = dict(fr)
            keys = []
            for i, n in enumerate(fr.get("nights", [])):
                key = f"@@night-{name}-{i}@@"
                lines[key] = json.dumps(n, default=_jsonable, separators=(",", ":"))
                keys.append(key)
            fr["nights"] = keys
            doc["faults"][name] = fr
        text = json.dumps(doc, indent=1, default=_jsonable)
        for key, line in lines.items():
            text = text.replace(f'"{key}"', line, 1)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(text + "\n")
        tmp.replace(self.path)


def load(path):
    return json.loads(Path(path).read_text())


def _jsonable(o):
    if isinstance(o, Path):
        return str(o)
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(type(o))
