"""Request and answer bodies of the query endpoint: Content-Encoding both ways, every decompressor
stopped just past the size limit (a decompression bomb costs at most the limit).

Never decompresses without a limit: a codec whose library cannot stop at one (an old brotli) is
refused (NOT_IMPLEMENTED) rather than run unbounded.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

from telemetry.errors import EngineError


def _zstd() -> Any:
    try:
        from backports import zstd  # type: ignore[import-not-found]
    except ImportError:
        from compression import zstd  # type: ignore[import-not-found,no-redef]
    return zstd


def compressors() -> dict[str, Callable[[bytes | memoryview], bytes]]:
    out: dict[str, Callable[[bytes | memoryview], bytes]] = {
        "gzip": lambda b: _gzip(b),
        "deflate": lambda b: zlib.compress(b, 3),
    }
    try:
        import lz4.frame

        out["lz4"] = lambda b: lz4.frame.compress(b)
    except ImportError:
        pass
    try:
        z = _zstd()
        out["zstd"] = lambda b: z.compress(b)
    except ImportError:
        pass
    try:
        import brotli  # type: ignore[import-not-found]

        out["br"] = lambda b: brotli.compress(b, quality=3)
    except ImportError:
        pass
    return out


def _gzip(b: bytes | memoryview) -> bytes:
    c = zlib.compressobj(3, zlib.DEFLATED, 31)
    return c.compress(b) + c.flush()


def _frames(new: Callable[[], Any], data: bytes, limit: int) -> bytes:
    """Decompress concatenated lz4/zstd frames (clickhouse-connect compresses each insert block as
    its own frame), stopping just past `limit` bytes of output."""
    out = bytearray()
    while data and len(out) <= limit:
        d = new()
        out += d.decompress(data, max_length=limit + 1 - len(out))
        while not d.eof and not d.needs_input and len(out) <= limit:
            out += d.decompress(b"", max_length=limit + 1 - len(out))
        if len(out) <= limit and not d.eof:
            raise ValueError("truncated stream")
        data = d.unused_data
    return bytes(out)


def _zlib(wbits: int, data: bytes, limit: int) -> bytes:
    """The same for gzip members / zlib streams (max_length must stay >= 1: 0 means unlimited)."""
    out = bytearray()
    while data and len(out) <= limit:
        d = zlib.decompressobj(wbits)
        out += d.decompress(data, limit + 1 - len(out))
        while d.unconsumed_tail and len(out) <= limit:
            out += d.decompress(d.unconsumed_tail, limit + 1 - len(out))
        if len(out) <= limit and not d.eof:
            raise ValueError("truncated stream")
        data = d.unused_data
    return bytes(out)


def decompressor(encoding: str) -> Callable[[bytes, int], bytes]:
    """decompress(data, limit) for one Content-Encoding; the limit stops a zip bomb early."""
    if encoding in ("gzip", "x-gzip"):
        return lambda b, n: _zlib(47, b, n)
    if encoding == "deflate":
        return lambda b, n: _zlib(15, b, n)
    if encoding == "lz4":
        import lz4.frame

        return lambda b, n: _frames(lz4.frame.LZ4FrameDecompressor, b, n)
    if encoding == "zstd":
        z = _zstd()
        return lambda b, n: _frames(z.ZstdDecompressor, b, n)
    if encoding == "br":
        try:
            import brotli
        except ImportError:
            raise EngineError(
                48, "Content-Encoding br is not supported (install brotli)", "NOT_IMPLEMENTED"
            ) from None
        return lambda b, n: _brotli(brotli, b, n)
    raise EngineError(48, f"Unknown HTTP Content-Encoding: {encoding}", "NOT_IMPLEMENTED")


def _brotli(brotli: Any, data: bytes, limit: int) -> bytes:
    """Brotli, its output stopped just past `limit` (brotli >= 1.2's output_buffer_limit)."""
    d = brotli.Decompressor()
    out = bytearray()
    try:
        chunk = d.process(data, output_buffer_limit=limit + 1)
    except TypeError:  # an older brotli decompresses everything it is given at once
        raise EngineError(
            48,
            "Content-Encoding br needs brotli >= 1.2 (a bounded decompressor)",
            "NOT_IMPLEMENTED",
        ) from None
    out += chunk
    while len(out) <= limit and not d.is_finished():
        if d.can_accept_more_data():
            raise ValueError("truncated stream")
        chunk = d.process(b"", output_buffer_limit=limit + 1 - len(out))
        if not chunk:
            raise ValueError("truncated stream")
        out += chunk
    return bytes(out)
