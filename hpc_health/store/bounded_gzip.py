"""An export's gzip members unpacked within a size limit, the size counted
first without keeping anything: a file that unpacks to far more than it
holds is refused before it costs memory."""

from __future__ import annotations

import zlib

#: What is unpacked at a time while an export's size is counted.
_CHUNK = 1 << 20


def unpacked_size(raw: bytes, limit: int) -> int:
    """The bytes the gzip members of *raw* unpack to, counted a chunk at a
    time and nothing kept, stopping once past *limit*: a bomb (2 MB that
    unpack to 2 GiB) is refused in a megabyte of memory, where unpacking
    it up to the limit took 1.09 GB and ended in a MemoryError under a
    1 GB limit.  EOFError when the data ends early."""
    size, data = 0, raw
    while data:
        unpack = zlib.decompressobj(wbits=31)
        pending = data
        while not unpack.eof:
            out = unpack.decompress(pending, _CHUNK)
            pending = unpack.unconsumed_tail
            if not out and not pending:
                raise EOFError
            size += len(out)
            if size > limit:
                return size
        data = unpack.unused_data
    return size


def gunzip(raw: bytes, limit: int) -> bytes | None:
    """gzip members of *raw* unpacked; None when they unpack to more than
    *limit* (found before anything is kept)."""
    if unpacked_size(raw, limit) > limit:
        return None
    out, data, size = [], raw, 0
    while data:
        unpack = zlib.decompressobj(wbits=31)
        out.append(unpack.decompress(data, limit + 1 - size))
        size += len(out[-1])
        if size > limit:
            break
        if not unpack.eof:
            raise EOFError
        data = unpack.unused_data
    return b"".join(out)
