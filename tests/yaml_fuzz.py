"""YAML text mutations for the config / scenario fuzz tests: tests/fuzz.py's edits, plus what only
YAML has (anchors that refer to themselves, tags, deep nesting, YAML 1.1 scalars)."""

from __future__ import annotations

import random

from tests.fuzz import mutate

YAML_VALUES = (
    "[" * 10,
    "[" * 1100,  # deeper than Python's recursion limit
    "{a: " * 1100,
    "&x [*x, *x]",
    "*nope",
    "!!python/object/apply:os.system [x]",
    "!!binary AAAA",
    "!!set {a, b}",
    "2001-01-01",
    "2001-01-01 00:00:00+05:00",
    "0x" + "f" * 40,
    "1_000",
    "0o17",
    ".inf",
    "-.nan",
    "~",
    "yes",
    "<<: *nope",
    "|\n  a\n  b",
    "'\\ud800'",
    '"\\ud800"',
    '"\\x00"',
)


def mutate_yaml(rnd: random.Random, text: str) -> str:
    """`text` mutated: 7 in 10 by character edits, else one line's value (or a line inserted
    after it) replaced by a YAML-only oddity."""
    if rnd.random() < 0.7:
        return mutate(rnd, text)
    lines = text.splitlines() or [""]
    i = rnd.randrange(len(lines))
    key = lines[i].split(":")[0] if ":" in lines[i] else "x"
    odd = f"{key}: {rnd.choice(YAML_VALUES)}"
    lines[i] = odd if rnd.random() < 0.5 else f"{lines[i]}\n{odd}"
    if rnd.random() < 0.05:
        lines.insert(0, rnd.choice(["%YAML 9.9\n---", "--- !x", "---\n---", "..."]))
    return "\n".join(lines)
