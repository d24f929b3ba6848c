"""Fuzz inputs seeded from real captures for the `slow` parser fuzz tests (tests/unit/*/test_fuzz.py).

Hypothesis draws one integer per example (SEED; a failure prints it); the example expands it with
`random.Random(seed)` into a few hundred inputs: seed lines mutated by 0-4 edits (replace / delete /
insert a span, truncate), or text generated from scratch. Drawing every input (or every random
call, `st.randoms()`) through hypothesis cost 1-100x the parsers' own time and memory."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

# Field separators and characters that parsers split or match on, plus some that should not be
# there at all (NUL, a replacement char, non-ASCII digits).
ALPHABET = "0123456789abcdefABCDEF-_:,./ []()=\t\x00\ufffd\u0661\u00e9xN/A"

# CI-sized; deadline off (2 shared cores); no shrinking (the failing example's seed is printed)
FUZZ = settings(
    max_examples=400,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)


SEED = st.integers(0, 2**63)
PER_EXAMPLE = 250  # inputs one example feeds (one check() call)
NEEDED = 100_000  # inputs one fuzz test must feed in all


def fuzz(check: Callable[[random.Random], int], needed: int = NEEDED) -> None:
    """Run `check(rnd)` for each of FUZZ's examples (`rnd` seeded by the drawn SEED, so a failure
    prints the seed that reproduces it). `check` feeds the parser under test, asserts what must
    hold, and returns how many inputs it fed; in all they must reach `needed`."""
    fed = 0

    @FUZZ
    @given(SEED)
    def run(seed: int) -> None:
        nonlocal fed
        fed += check(random.Random(seed))

    run()
    assert fed >= needed, f"fed {fed} inputs, want {needed}"


def fuzz_accepted_or_refused(
    one: Callable[[random.Random], None],
    refused: type[Exception],
    check_refusal: Callable[[Exception], None],
) -> None:
    """`fuzz` over inputs each of which `one(rnd)` makes and feeds: it is accepted (returns) or
    refused with `refused`, whose message `check_refusal` asserts on; anything else escapes and
    fails. Both outcomes must occur (a fuzzer whose inputs are all refused, or all accepted,
    tests little)."""
    seen = {"accepted": 0, "refused": 0}

    def check(rnd: random.Random) -> int:
        for _ in range(PER_EXAMPLE):
            try:
                one(rnd)
            except refused as e:
                check_refusal(e)
                seen["refused"] += 1
                continue
            seen["accepted"] += 1
        return PER_EXAMPLE

    fuzz(check)
    assert seen["accepted"] and seen["refused"], seen


def fragment(rnd: random.Random, n: int = 12) -> str:
    return "".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(0, n)))


def mutate(rnd: random.Random, seed: str) -> str:
    s = seed
    for _ in range(rnd.randint(0, 4)):
        i = rnd.randint(0, len(s))
        op = rnd.random()
        if op < 0.4:
            s = s[:i] + fragment(rnd) + s[i + rnd.randint(0, 40) :]
        elif op < 0.65:
            s = s[:i] + s[i + rnd.randint(1, 40) :]
        elif op < 0.9:
            s = s[:i] + fragment(rnd) + s[i:]
        else:
            s = s[:i]
    return s


def inputs(rnd: random.Random, seeds: Sequence[str], n: int) -> list[str]:
    """n inputs: 9 in 10 a mutated seed, 1 in 10 generated text."""
    return [
        mutate(rnd, rnd.choice(seeds)) if rnd.random() < 0.9 else fragment(rnd, 80)
        for _ in range(n)
    ]


def json_value(rnd: random.Random, depth: int = 0) -> Any:
    """A random JSON value (the shapes /jmx and WebHDFS documents may wrongly hold)."""
    k = rnd.randint(0, 6 if depth < 3 else 3)
    if k == 0:
        return None
    if k == 1:
        return rnd.random() < 0.5
    if k == 2:
        return rnd.randint(-(2**63), 2**64)
    if k == 3:
        return fragment(rnd, 8) if rnd.random() < 0.8 else rnd.uniform(-1e300, 1e300)
    if k == 4:
        return [json_value(rnd, depth + 1) for _ in range(rnd.randint(0, 3))]
    return {fragment(rnd, 8): json_value(rnd, depth + 1) for _ in range(rnd.randint(0, 3))}


# Values a field of a parsed document (JSON / YAML / a Kubernetes object) may wrongly hold: the
# wrong type, nothing, huge or non-finite numbers, unicode the parser may choke on, long text.
ODD_VALUES: tuple[Any, ...] = (
    None,
    True,
    False,
    0,
    -1,
    2**63,
    2**64 + 1,
    -(2**70),
    10**400,
    1.5,
    -0.0,
    1e308,
    float("inf"),
    float("nan"),
    "",
    " ",
    "0",
    "-1",
    "1e400",
    "nan",
    "true",
    "null",
    "\x00",
    "\ud800",  # a lone surrogate: valid in JSON text ("\ud800"), not encodable as UTF-8
    "\u202e\u0661\u00e9",
    "x" * 5000,
    [],
    {},
    [None],
    {"": None},
)


def odd_value(rnd: random.Random) -> Any:
    r = rnd.random()
    if r < 0.6:
        return rnd.choice(ODD_VALUES)
    if r < 0.85:
        return json_value(rnd)
    v: Any = rnd.choice(ODD_VALUES[:20])
    for _ in range(rnd.randint(20, 200)):  # deep nesting
        v = [v] if rnd.random() < 0.5 else {"a": v}
    return v


def _edit(rnd: random.Random, node: Any, depth: int) -> Any:
    """`node` with one edit somewhere below it; containers on the way are copied (the seed
    document is shared between inputs and never changed)."""
    descend = 0.97 if depth == 0 else 0.8  # the top level is rarely replaced whole
    if isinstance(node, dict) and node and depth < 16 and rnd.random() < descend:
        new = dict(node)
        k = rnd.choice(list(new))
        r = rnd.random()
        if r < 0.12:
            del new[k]  # missing key
        elif r < 0.18:
            new[rnd.choice([fragment(rnd, 8), k.upper(), k + " "])] = odd_value(rnd)  # extra key
        else:
            new[k] = _edit(rnd, new[k], depth + 1)
        return new
    if isinstance(node, list) and node and depth < 16 and rnd.random() < descend:
        new_l = list(node)
        i = rnd.randrange(len(new_l))
        r = rnd.random()
        if r < 0.1:
            del new_l[i:]  # truncated
        elif r < 0.2:
            new_l.insert(i, odd_value(rnd))
        elif r < 0.25:
            new_l = new_l * rnd.randint(2, 4)  # duplicated entries
        else:
            new_l[i] = _edit(rnd, new_l[i], depth + 1)
        return new_l
    r = rnd.random()
    if r < 0.6:
        return odd_value(rnd)
    if r < 0.75 and isinstance(node, str):
        return mutate(rnd, node)
    if r < 0.85 and isinstance(node, dict):
        return list(node.items())  # a mapping written as a list
    if r < 0.95:
        return str(node)[: rnd.randint(0, 40)]  # a number or object as text
    return [node]


def mutate_doc(rnd: random.Random, doc: Any, edits: int = 3) -> Any:
    """A parsed document (dicts, lists, scalars) with 1..`edits` structural edits at random places:
    a value of the wrong type, a key removed or added, huge / negative / non-finite numbers,
    unicode and lone surrogates, long text, deep nesting, truncated or duplicated lists."""
    for _ in range(rnd.randint(1, edits)):
        doc = _edit(rnd, doc, 0)
    return doc
