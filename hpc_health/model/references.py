"""The references a figure is judged against, as a site's reference file
(``reference/<site>.yaml``, read and checked by
:mod:`hpc_health.store.references`) holds them: indexed the way ReFrame
resolves them, looked up per test case and converted into the figure's
unit."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from hpc_health.units import convert


@dataclass
class Reference:
    value: float
    lower: float | None
    upper: float | None
    unit: str
    xfail: str | None = None
    provenance: dict = field(default_factory=dict)


class ReferenceSet:
    """All references of one site, indexed the way ReFrame resolves them."""

    def __init__(self, path, tests, provenance, hardware_=None, doc=None):
        self.path = path
        self._doc = doc
        self.tests = tests          # name -> (index tuple, nested data)
        self.provenance = provenance
        self.hardware = hardware_ or {}   # 'system:partition' -> what it was measured on

    def line_of(self, *keypath: str | int) -> int | None:
        return self._doc.line_of(list(keypath)) if self._doc else None

    def lookup(self, test: str, partition: str, environ: str, attrs: dict[str, Any],
               var: str, unit: str | None = None) -> Reference | None:
        """Reference of *var* for a test case, or None.

        *partition* is the full name ``system:partition``; *attrs* maps test
        attribute names (parameters) to the case's values.  With *unit* (the
        figure's), the value is converted into it (GB/s into MB/s); a
        reference in a unit of another quantity is none (``load`` with the
        figures refuses such a file).
        """
        ref = self._lookup(test, partition, environ, attrs, var)
        return in_unit(ref, unit) if ref is not None and unit else ref

    def _lookup(self, test, partition, environ, attrs, var):
        entry = self.tests.get(test)
        if entry is None:
            return None
        index, data = entry
        keys = []
        for level in index:
            if level == "$partition":
                key = partition
            elif level == "$system":
                key = partition.split(":")[0]
            elif level == "$environ":
                key = environ
            elif level in attrs:
                key = attrs[level]
            else:
                return None
            data = _match(data, key)
            if data is None:
                return None
            keys.append(str(key))
        leaf = data.get(var) if isinstance(data, dict) else None
        if leaf is None:
            return None
        prov = self.provenance.get(test, {}).get("/".join(keys + [var]), {})
        if leaf[0] == "$xfail":
            v = leaf[2]
            return Reference(v[0], v[1], v[2], v[3] if len(v) > 3 else "", xfail=leaf[1],
                             provenance=prov)
        return Reference(leaf[0], leaf[1], leaf[2], leaf[3] if len(leaf) > 3 else "",
                         provenance=prov)


def in_unit(ref: Reference, unit: str) -> Reference | None:
    """*ref* with its value in *unit* (its bounds are fractions: unchanged);
    None when its unit is of another quantity.  No unit means the figure's."""
    if not ref.unit or ref.unit == unit:
        return ref
    value = convert(ref.value, ref.unit, unit)
    if value is None:
        return None
    return Reference(value, ref.lower, ref.upper, unit, ref.xfail, ref.provenance)


def _match(level, key):
    """Exact key, else the keys as anchored regular expressions (ReFrame's
    rule), else None."""
    if not isinstance(level, dict):
        return None
    if key in level:
        return level[key]
    skey = str(key)
    for k, v in level.items():
        if str(k) == skey:
            return v
    for k, v in level.items():
        if isinstance(k, str) and isinstance(key, str):
            try:
                if re.fullmatch(k, key):
                    return v
            except re.error:
                continue
    return None
