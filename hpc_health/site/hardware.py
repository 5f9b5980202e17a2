"""The hardware a figure was measured on.

A reference belongs to the hardware it was measured on: a run on other
hardware is never judged against it.  A partition's hardware is what the
site declares in ``site.yaml`` (``partitions.<p>.hardware``: CPU model,
CPUs and memory per node, node count), or, with ``hardware: detect``, what
this host reports (the ``local`` site, whose jobs run here).
"""

import os

#: What identifies a partition's hardware, in the order it is described.
FIELDS = ("cpu", "cpus", "memory_gib", "nodes")
#: Memory is compared within this fraction: kernels and firmware reserve
#: slightly different amounts on identical nodes.
MEMORY_TOLERANCE = 0.05


def detect(nodes=1, cpuinfo="/proc/cpuinfo", meminfo="/proc/meminfo"):
    """This host: CPU model, logical CPUs, memory in GiB (rounded)."""
    model, cpus = None, 0
    try:
        with open(cpuinfo) as fp:
            for line in fp:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "processor":
                    cpus += 1
                elif key in ("model name", "Model", "cpu model") and model is None:
                    model = " ".join(value.split())
    except OSError:
        pass
    memory = None
    try:
        with open(meminfo) as fp:
            for line in fp:
                if line.startswith("MemTotal:"):
                    memory = round(int(line.split()[1]) / 2**20)
    except (OSError, ValueError, IndexError):
        pass
    return {"cpu": model or os.uname().machine, "cpus": cpus or os.cpu_count(),
            "memory_gib": memory, "nodes": int(nodes or 1)}


def of_partition(declared, nodes=1):
    """A partition's hardware from its ``hardware`` setting: a mapping as
    declared, ``detect`` for this host, or None when the site says nothing."""
    if declared == "detect":
        return detect(nodes)
    if isinstance(declared, dict):
        return {"nodes": int(nodes or 1), **declared}
    return None


def same(a, b):
    """Is hardware *a* the hardware *b*?  Unknown (None) is never the same."""
    if not a or not b:
        return False
    for key in FIELDS:
        x, y = a.get(key), b.get(key)
        if key == "memory_gib" and x and y:
            if abs(x - y) > MEMORY_TOLERANCE * max(x, y):
                return False
        elif x != y:
            return False
    return True


def describe(hw):
    if not hw:
        return "undeclared hardware"
    parts = [str(hw.get("cpu") or "unknown CPU")]
    if hw.get("cpus"):
        parts.append(f"{hw['cpus']} CPUs")
    if hw.get("memory_gib"):
        parts.append(f"{hw['memory_gib']} GiB")
    nodes = int(hw.get("nodes") or 1)
    parts.append(f"{nodes} node{'s' if nodes != 1 else ''}")
    return ", ".join(parts)
