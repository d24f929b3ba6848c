"""The excerpt a log event keeps: the line, bounded, with credentials and tokens redacted. Pure.

It never keeps more than `limit` characters, and redacts before it cuts, so that a secret is
never half-kept at the boundary."""

from __future__ import annotations

import re

EXCERPT_CHARS = 512
REDACTED = "<redacted>"

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # key=value / key: value for secret-sounding keys (env dumps, URLs' query strings, configs)
    (
        re.compile(
            r"(?i)\b([\w.\-]*(?:password|passwd|pwd|secret|token|api[_\-]?key|access[_\-]?key|"
            r"private[_\-]?key|credential|auth)[\w.\-]*)(\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|(?:(?i:bearer|basic)\s+)?[^\s,;&]+)"
        ),
        rf"\1\2{REDACTED}",
    ),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}"), rf"\1 {REDACTED}"),
    (re.compile(r"(?i)(\b[a-z][a-z0-9+.\-]*://)[^/\s:@]+:[^/\s@]+@"), rf"\1{REDACTED}@"),
    (
        re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
        REDACTED,
    ),  # JWT
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED),  # AWS access key id
    (
        re.compile(r"\b(?:ghp|gho|ghs|ghu|github_pat|glpat|hf|xox[abpr])_[A-Za-z0-9_\-]{16,}"),
        REDACTED,
    ),
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{20,}"), REDACTED),
)


# A line holding none of these (case-folded) cannot match a pattern above: most do not.
_HINTS = (
    "pass",
    "pwd",
    "secret",
    "token",
    "key",
    "credential",
    "auth",
    "bearer",
    "basic",
    "://",
    "eyj",
    "akia",
    "asia",
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "github_pat",
    "glpat",
    "hf_",
    "xox",
    "sk-",
)


def redact(text: str) -> str:
    low = text.lower()
    for h in _HINTS:
        if h in low:
            break
    else:
        return text
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return text


def excerpt(line: str, limit: int = EXCERPT_CHARS) -> str:
    """`line` without control characters, redacted, at most `limit` characters (an ellipsis
    marks a cut)."""
    text = line.strip()
    if not text.isprintable():
        text = "".join(c if c.isprintable() else " " for c in text)
    text = redact(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = ["EXCERPT_CHARS", "REDACTED", "excerpt", "redact"]
