"""Small helpers for sizes and units shared by checks, parsers and reports."""

_BINARY = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")]


def size_label(nbytes):
    """8 -> '8B', 4096 -> '4KiB', 1048576 -> '1MiB' (exact multiples only,
    so a label always names one size)."""
    nbytes = int(nbytes)
    for factor, unit in _BINARY:
        if nbytes >= factor and nbytes % factor == 0:
            return f"{nbytes // factor}{unit}"
    return f"{nbytes}B"


def parse_size(text):
    """'4KiB' / '4k' / '4096' -> 4096; the inverse of :func:`size_label`."""
    s = str(text).strip()
    units = {"b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
             "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
             "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}
    num = s.rstrip("BbKkMmGgIi")
    suffix = s[len(num):].lower()
    if not num or suffix not in units and suffix != "":
        raise ValueError(f"not a size: {text!r}")
    return int(float(num) * units.get(suffix, 1))
