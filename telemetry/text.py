"""Small text helpers shared by parsers: pure functions on strings, no I/O.

Never imports anything heavier than the standard library (exporters import it too).
"""

from __future__ import annotations

__all__ = ["split_top_level"]


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
