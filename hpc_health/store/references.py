"""Reference files: ``reference/<site>.yaml``.

The file is in ReFrame 4.10's external reference format, so ReFrame itself
gates on it (checks set ``reference = {'$ref': '<site>.yaml'}``)::

    HaloExchange:                       # test class name
      $index: [$partition, $environ, dims, strategy]
      'local:default':
        gnu-mpi:
          1:
            SERE:
              time_8B: [1.9, -0.5, 0.25, us]   # value, lower, upper, unit

Bounds are fractions of the value, as in ReFrame.  Our own fields sit beside
the numbers under the top-level key ``$provenance`` (ReFrame only reads the
keys named after tests)::

    $provenance:
      HaloExchange:
        'local:default/gnu-mpi/1/SERE/time_8B':
          captured: '2026-11-22T05:00:00Z'
          runs: [run ids]
          samples: 30
          spread: 0.05              # relative robust spread of all samples
          between_run_spread: 0.04  # relative spread of per-run medians (episodes)
          within_run_spread: 0.02   # spread of samples inside one run
          stack: 3f2a...            # software-stack hash of the runs
          estimator: huber-1.5      # how samples were summarised (stats.location)

(the noise fields are those of :class:`hpc_health.stats.Reference`)

A malformed file is reported with its file, key path and line.  What it
holds, and the lookup a verdict makes in it, are the model's
(:mod:`hpc_health.model.references`).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from hpc_health.errors import ConfigError
from hpc_health.model.figures import HIGHER, LOWER
from hpc_health.model.references import ReferenceSet
from hpc_health.site import hardware, yamlio
from hpc_health.units import convert

PROVENANCE_KEY = "$provenance"
HARDWARE_KEY = "$hardware"
_NUM = (int, float)
_PROVENANCE_FIELDS = {"captured": str, "runs": list, "samples": int, "spread": _NUM,
                      "between_run_spread": _NUM, "between_run_spread_better": _NUM,
                      "within_run_spread": _NUM, "episode_floor": _NUM, "too_noisy": bool,
                      "stack": str, "note": str, "floor": _NUM, "cap": _NUM,
                      "estimator": str, "rounds": (int, list), "mdc": _NUM, "weak": str,
                      "no_reference": str, "night_spread": _NUM, "night_df": int,
                      "prior_spread": _NUM, "prior_df": _NUM, "effective": _NUM,
                      "check_figures": int, "check_correlation": _NUM, "check_apart": int,
                      "mdc_one_night": _NUM, "levels": list, "level_runs": int,
                      "resolution": _NUM}


#: A figure as its check declares it (:mod:`hpc_health.model.figures`): its
#: name (an axis value replaced by ``{}``), its unit, which way is better.
Declared = tuple[str, str, str]


def load(path: str | Path, figures: Mapping[str, Sequence[Declared]] | None = None
         ) -> ReferenceSet:
    """Load and validate a reference file; ConfigError names file, key path
    and line of the first problem.  With *figures* ({check: its declared
    figures}), each reference's unit and bounds are also checked against
    its figure's declaration: a unit of another quantity, or a bound on the
    worse side that lets the figure pass whatever it measures, is refused."""
    doc = yamlio.load(path)
    data = doc.data if doc.data is not None else {}
    if not isinstance(data, dict):
        raise doc.error([], "a reference file is a mapping of test names to references")
    tests = {}
    for test, body in data.items():
        if test in (PROVENANCE_KEY, HARDWARE_KEY):
            continue
        if not isinstance(test, str) or not re.fullmatch(r"[A-Za-z_]\w*", test):
            raise doc.error([test], f"{test!r} is not a test class name")
        if not isinstance(body, dict):
            raise doc.error([test], "expected a mapping (an optional $index and the references)")
        index = body.get("$index", ["$partition"])
        if "$index" in body and (not isinstance(index, list) or not index
                                 or not all(isinstance(i, str) for i in index)):
            raise doc.error([test, "$index"], "must be a non-empty list of attribute names")
        nested = {k: v for k, v in body.items() if k != "$index"}
        _check_level(doc, [test], nested, len(index), (figures or {}).get(test))
        tests[test] = (tuple(index), nested)
    provenance = data.get(PROVENANCE_KEY) or {}
    _check_provenance(doc, provenance, tests)
    measured_on = data.get(HARDWARE_KEY) or {}
    _check_hardware(doc, measured_on)
    return ReferenceSet(str(path), tests, provenance, measured_on, doc)


def _check_hardware(doc, measured_on):
    kp = [HARDWARE_KEY]
    if not isinstance(measured_on, dict):
        raise doc.error(kp, "expected a mapping of 'system:partition' to hardware")
    for part, hw in measured_on.items():
        if not isinstance(part, str) or ":" not in part:
            raise doc.error(kp + [part], "keys are full partition names 'system:partition'")
        if not isinstance(hw, dict):
            raise doc.error(kp + [part], "expected a mapping (cpu, cpus, memory_gib, nodes)")
        unknown = set(hw) - set(hardware.FIELDS)
        if unknown:
            raise doc.error(kp + [part, sorted(unknown)[0]],
                            f"unknown hardware field (known: {', '.join(hardware.FIELDS)})")


def _check_level(doc, keypath, node, depth, declared=None):
    if not isinstance(node, dict):
        raise doc.error(keypath, f"expected a mapping with {depth} more index level(s)")
    for key, val in node.items():
        if depth > 0:
            _check_level(doc, keypath + [key], val, depth - 1, declared)
        else:
            _check_leaf(doc, keypath + [key], val, _declaration(declared, str(key)))


def _declaration(declared: Sequence[Declared] | None, var: str) -> Declared | None:
    """The declared figure *var* is an instance of: its own name, else the
    name template (``latency_{}``) with the longest fixed part matching."""
    found = None
    for name, unit, better in declared or ():
        if name == var:
            return name, unit, better
        head, _, tail = name.partition("{}")
        if "{}" in name and var.startswith(head) and var.endswith(tail) and \
                len(var) > len(head) + len(tail) and \
                (found is None or len(head + tail) > len(found[0]) - 2):
            found = (name, unit, better)
    return found


def _check_leaf(doc, keypath, val, figure=None):
    if isinstance(val, list) and val and val[0] == "$xfail":
        if len(val) != 3 or not isinstance(val[1], str):
            raise doc.error(keypath, "an expected failure is "
                            "['$xfail', 'reason', [value, lower, upper, unit]]")
        _check_leaf(doc, keypath, val[2], figure)
        return
    if not isinstance(val, list) or len(val) not in (3, 4):
        raise doc.error(keypath, f"a reference is [value, lower, upper, unit], got {val!r}")
    value, lower, upper = val[:3]
    _check_value(doc, keypath, value)
    if len(val) == 4 and not isinstance(val[3], str):
        raise doc.error(keypath, f"unit {val[3]!r} is not a string")
    for name, b, sign in (("lower", lower, -1), ("upper", upper, 1)):
        if b is None:
            continue
        if not _is_number(b):
            raise doc.error(keypath, f"{name} bound {b!r} is not a number or null")
        if b * sign < 0:
            raise doc.error(keypath, f"{name} bound {b} must be {'<= 0' if sign < 0 else '>= 0'} "
                            "(bounds are fractions of the value)")
        why = _blind_bound(name, b, figure)
        if why:
            raise doc.error(keypath, f"{name} bound {b} is {b:+.0%} of the value: {why}")
    if lower is None and upper is None:
        raise doc.error(keypath, "both bounds are null: this reference could never fail")
    if figure and len(val) == 4 and val[3]:
        _check_unit(doc, keypath, value, val[3], figure)


#: Largest reference value taken as a figure (in any unit here: 1e15 MB/s
#: is a zettabyte a second, 1e15 us thirty years).
MAX_VALUE = 1e15


def _check_value(doc, keypath, value):
    if isinstance(value, str):
        try:
            as_number = float(value)
        except ValueError:
            raise doc.error(keypath, f"value {value!r} is not a number") from None
        if math.isfinite(as_number) and abs(as_number) <= MAX_VALUE:
            # YAML 1.1 reads 1e3 as text: its exponent form needs a dot.
            raise doc.error(keypath, f"value {value!r} is read as text, not a number: YAML "
                            f"needs a dot in it ({as_number!r})")
        value = as_number       # 1e308: said below to be no plausible figure
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise doc.error(keypath, f"value {value!r} is not a number")
    if math.isnan(value):
        raise doc.error(keypath, "value is NaN, not a number: capture a real value")
    if not math.isfinite(value) or abs(value) > MAX_VALUE:
        raise doc.error(keypath, f"value {value:g} is beyond any plausible figure (more than "
                        f"{MAX_VALUE:g} in any unit): capture a real value")
    if value == 0:
        # A zero reference turns ReFrame's fractional bounds into absolute
        # ones around 0: such a check can hardly ever fail.  Refuse it.
        raise doc.error(keypath, "a reference value of 0 can never fail; capture a real value")
    if value < 0:
        raise doc.error(keypath, f"value {value} is negative: every figure here is a time, a "
                        "rate, a size or a ratio; capture a real value")


def _blind_bound(name, bound, figure):
    """Why *bound* (the *name* bound, a fraction) lets the figure pass
    whatever it measures, or is wider than any reference may be; ''."""
    better = figure[2] if figure else None
    worse_side = (name == "lower" and better == HIGHER) or (name == "upper" and better == LOWER)
    if name == "lower" and bound < -MAX_BOUND["lower"]:
        return "past -100 % the bound is a negative figure"
    if name == "lower" and worse_side and bound <= -MAX_BOUND["lower"]:
        return (f"{figure[0]} is higher-is-better, so this is its worse side, and a figure "
                "of 0 would still pass: this reference can never fail; capture it again "
                "or narrow it")
    if name == "upper" and bound > MAX_BOUND["upper"]:
        if worse_side:
            return (f"a figure {bound:.0%} worse would still pass: this reference gates "
                    "nothing (a capture gives none that flags only changes of 900 % or more); "
                    "capture it again or narrow it")
        side = (f"the better side of {figure[0]}, a higher-is-better figure (only IMPROVED "
                "is judged against it), " if better == HIGHER else "")
        return (f"{side}wider than any reference may be (+{MAX_BOUND['upper']:.0%} at most); "
                "capture it again or narrow it")
    return ""


def _check_unit(doc, keypath, value, unit, figure):
    name, declared, _ = figure
    if convert(1.0, unit, declared) is None:
        raise doc.error(keypath, f"unit {unit!r} is not a unit of {name}'s quantity (its "
                        f"check declares {declared}): write the reference in {declared}")
    if convert(float(value), unit, declared) > MAX_VALUE:
        raise doc.error(keypath, f"value {value} {unit} is beyond any plausible figure")


#: Widest bounds a reference may have: a lower bound past -1 is a negative
#: figure; an upper bound of 10 lets a figure eleven times worse pass.  (The
#: widest capture here, a barely gateable halo time, wrote 8.6.)
MAX_BOUND = {"lower": 1.0, "upper": 10.0}


def _check_provenance(doc, provenance, tests):
    kp = [PROVENANCE_KEY]
    if not isinstance(provenance, dict):
        raise doc.error(kp, "expected a mapping of test names")
    for test, entries in provenance.items():
        if not isinstance(entries, dict):
            raise doc.error(kp + [test], "expected a mapping of reference paths")
        for key, fields in entries.items():
            if not isinstance(fields, dict):
                raise doc.error(kp + [test, key], "expected a mapping of provenance fields")
            for name, value in fields.items():
                want = _PROVENANCE_FIELDS.get(name)
                if want is None:
                    raise doc.error(kp + [test, key, name],
                                    "unknown provenance field (known: "
                                    f"{', '.join(sorted(_PROVENANCE_FIELDS))})")
                if not isinstance(value, want) or (isinstance(value, bool) and want is not bool):
                    raise doc.error(kp + [test, key, name], f"{value!r} has the wrong type")


def _is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def merge(data: dict[str, Any], proposals: dict[Any, Any],
          measured_on: dict[str, Any] | None = None) -> dict[str, Any]:
    """Apply proposals to the parsed reference document *data* (in place),
    with the hardware each partition's runs were measured on."""
    if measured_on:
        data.setdefault(HARDWARE_KEY, {}).update(measured_on)
    prov_root = data.setdefault(PROVENANCE_KEY, {})
    for (test, names, values, var), prop in proposals.items():
        path = "/".join(str(v) for v in values) + "/" + var
        if "no_reference" in prop:
            if _leaf(data.get(test), values, var) is None:
                # Said in every run's table instead of "no reference".
                prov_root.setdefault(test, {})[path] = {
                    **prop["provenance"], "no_reference": prop["no_reference"]}
            continue
        if "leaf" not in prop:
            continue
        section = data.setdefault(test, {})
        if section.get("$index") not in (None, list(names)):
            # A different index means a different shape: start that test anew
            # rather than mixing two layouts ReFrame would misread.
            section.clear()
            prov_root.pop(test, None)
        section["$index"] = list(names)
        node = section
        for v in values:
            node = node.setdefault(v, {})
        node[var] = prop["leaf"]
        prov_root.setdefault(test, {})[path] = prop["provenance"]
    if not prov_root:
        data.pop(PROVENANCE_KEY)
    # Tests first for people; what they were measured on and how, last.
    for key in (HARDWARE_KEY, PROVENANCE_KEY):
        moved = data.pop(key, None)
        if moved is not None:
            data[key] = moved
    return data


def _leaf(section, values, var):
    node = section
    for v in values:
        if not isinstance(node, dict) or v not in node:
            return None
        node = node[v]
    return node.get(var) if isinstance(node, dict) else None


def write(path: Path, data: dict[str, Any]) -> None:
    """Validate, then replace atomically; the old file survives any error."""
    text = ("# References of this site, captured by `hpc-health reference capture`.\n"
            "# ReFrame 4.10's external reference format, with both bounds: the checks hand\n"
            "# ReFrame the worse one.  $hardware and $provenance are hpc-health's.\n"
            + yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fp:
        fp.write(text)
        fp.flush()
        os.fsync(fp.fileno())
    try:
        load(tmp)
    except ConfigError:
        os.unlink(tmp)
        raise
    os.replace(tmp, path)


def load_raw(path: Path) -> dict[str, Any]:
    if not os.path.exists(path):
        return {}
    with open(path) as fp:
        return yaml.safe_load(fp) or {}
