"""Small helpers for sizes and units shared by checks, parsers and reports,
and which way a figure is better."""

#: Which way a figure is better, as its check declares it: the words the run
#: report and the store keep (a figure's ``better``).  The figure
#: declarations and the statistics both read them from here.
HIGHER = "higher"   # bandwidth, rate: higher is better
LOWER = "lower"     # latency, time: lower is better
DIRECTIONS = (HIGHER, LOWER)

_BINARY = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")]


def size_label(nbytes):
    """8 -> '8B', 4096 -> '4KiB', 1048576 -> '1MiB' (exact multiples only,
    so a label always names one size)."""
    nbytes = int(nbytes)
    for factor, unit in _BINARY:
        if nbytes >= factor and nbytes % factor == 0:
            return f"{nbytes // factor}{unit}"
    return f"{nbytes}B"


#: Units of one quantity, each as a multiple of the first.  Units not listed
#: (ops/s, messages/s, ratio) are only ever equal to themselves.
_QUANTITIES = {
    "time": {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "min": 60.0},
    "bandwidth": {"B/s": 1.0, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12,
                  "KiB/s": 2.0 ** 10, "MiB/s": 2.0 ** 20, "GiB/s": 2.0 ** 30,
                  "TiB/s": 2.0 ** 40},
    "size": {"B": 1.0, "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 2.0 ** 10, "MiB": 2.0 ** 20,
             "GiB": 2.0 ** 30},
}


def quantity(unit):
    """What *unit* measures ('time', 'bandwidth', 'size'), or None."""
    return next((q for q, scale in _QUANTITIES.items() if unit in scale), None)


def convert(value, unit, to):
    """*value* in *unit* expressed in unit *to*; None when they are not
    units of the same quantity (GB/s and MB/s are, ms and MB/s are not)."""
    if unit == to:
        return value
    q = quantity(unit)
    if q is None or q != quantity(to):
        return None
    return value * _QUANTITIES[q][unit] / _QUANTITIES[q][to]
