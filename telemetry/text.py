"""Small text helpers shared by parsers: pure functions on strings, no I/O.

Never imports anything heavier than the standard library (exporters import it too).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["human_bytes", "parse_size", "split_top_level"]

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B?|B)?\s*$", re.IGNORECASE)
_MULT = {
    "": 1,
    "B": 1,
    "K": 1000,
    "KB": 1000,
    "KIB": 1024,
    "KI": 1024,
    "M": 10**6,
    "MB": 10**6,
    "MIB": 1 << 20,
    "MI": 1 << 20,
    "G": 10**9,
    "GB": 10**9,
    "GIB": 1 << 30,
    "GI": 1 << 30,
    "T": 10**12,
    "TB": 10**12,
    "TIB": 1 << 40,
    "TI": 1 << 40,
}


def parse_size(v: Any) -> int:
    """Bytes from an int or a size like '512MiB', '2GiB', '1.5 GB' (K/M/G/T: powers of 1000,
    Ki/Mi/Gi/Ti: of 1024). Raises ValueError for anything else."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    m = _SIZE.match(str(v))
    if not m:
        raise ValueError(f"not a size: {v!r} (use bytes or e.g. 512MiB, 2GiB)")
    return int(float(m[1]) * _MULT[(m[2] or "").upper()])


def human_bytes(n: float) -> str:
    """A byte count for people: B, kB, MB, GB, TB (powers of 1000) with three significant
    digits, so a non-zero amount never reads as 0.00 ('43.2 kB', '1.25 GB', '512 B')."""
    v = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if abs(v) < 999.5:
            return f"{v:.0f} B" if unit == "B" else f"{v:.3g} {unit}"
        v /= 1000
    return f"{v:,.3g} TB" if abs(v) < 999.5 else f"{v:,.0f} TB"


def split_top_level(text: str, sep: str, open: str, close: str) -> list[str]:
    """`text` split at each `sep` that stands outside `open`...`close` brackets (nested ones
    count). Parts are returned as written (not stripped); empty parts are kept except a last one,
    so '' gives [] and 'a,' gives ['a']. Unbalanced brackets are not an error: a stray `close`
    only lowers the depth, and everything after an unclosed `open` stays in one part."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == open:
            depth += 1
        elif ch == close:
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur:
        parts.append("".join(cur))
    return parts
