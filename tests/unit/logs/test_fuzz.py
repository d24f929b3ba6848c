"""Fuzzing the log scanner and grammar with inputs seeded from the real fixture lines (plain, CRI,
dmesg, kmsg): whatever the bytes, nothing escapes, every event is of a declared kind with fields
JSON can write, its line is one of the input's, and every line is counted. >= 100,000 inputs;
marked slow."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path

import pytest

from exporters.logs import grammar
from exporters.logs.formats import Clock
from exporters.logs.scan import Scanner
from tests.fuzz import PER_EXAMPLE, fuzz, inputs

pytestmark = pytest.mark.slow
FIX = Path(__file__).parents[2] / "fixtures" / "logs"
LINES = sorted(
    {ln for p in FIX.glob("*.*") if p.name != "PROVENANCE.md" for ln in p.read_text().splitlines()}
)
CLOCK = Clock(
    boot=datetime(2026, 1, 1, tzinfo=UTC), year=2026, fallback=datetime(2026, 1, 2, tzinfo=UTC)
)
WRAP = {
    "text": lambda s: s,
    "cri": lambda s: f"2026-03-01T10:00:00.123456789Z stdout {'P' if len(s) % 3 == 0 else 'F'} {s}",
    "dmesg": lambda s: f"[  {len(s)}.000123] {s}",
    "kmsg": lambda s: f"6,{len(s)},{len(s) * 1000},-;{s}",
}


def test_scanner_never_raises_and_makes_only_declared_events() -> None:
    def check(rnd: random.Random) -> int:
        fmt = rnd.choice(sorted(WRAP))
        texts = inputs(rnd, LINES, PER_EXAMPLE)
        data = "\n".join(WRAP[fmt](t) for t in texts).encode("utf-8", errors="surrogateescape")
        sc = Scanner(fmt, CLOCK, max_line=rnd.choice([1024, 65536]))
        hits = []
        at = 0
        while at < len(data):  # reads cut anywhere
            step = rnd.randint(1, 4096)
            hits += sc.feed(data[at : at + step], limit=rnd.choice([None, None, 50]))
            at += step
        hits += sc.finish()
        for h in hits:
            assert h.kind in grammar.KINDS
            json.dumps(h.fields)
            assert 1 <= h.line <= sc.line
            assert len(h.excerpt) <= 512
        assert sc.counts.lines == sc.line
        return len(texts)

    fuzz(check)
