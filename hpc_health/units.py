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
