"""Fuzzing `parse_lldpcli_json` (`lldpcli show neighbors -f json`, as `railscope lldp --from`
and `railscope topology --from` read it) with inputs seeded from the real captures
(tests/fixtures/lldp): the JSON text mutated, or the document structurally mutated (wrong
types, missing keys, huge numbers, lone surrogates, deep nesting). Only LldpFormatError escapes
(the commands turn it into one error line naming the file); every row it returns is text that
stores as UTF-8. >= 100,000 inputs; marked slow."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from telemetry.topology.physical import LldpFormatError, parse_lldpcli_json
from tests.fuzz import PER_EXAMPLE, fuzz, mutate, mutate_doc

pytestmark = pytest.mark.slow
FIX = Path(__file__).parents[2] / "fixtures" / "lldp"
TEXTS = [p.read_text() for p in sorted(FIX.glob("*.json"))]
DOCS = [json.loads(t) for t in TEXTS]


def test_lldpcli_json_lets_only_lldp_format_error_out() -> None:
    seen = {"rows": 0, "rejected": 0}

    def check(rnd: random.Random) -> int:
        for _ in range(PER_EXAMPLE):
            doc = (
                mutate(rnd, rnd.choice(TEXTS))
                if rnd.random() < 0.3
                else mutate_doc(rnd, rnd.choice(DOCS))
            )
            try:
                rows = parse_lldpcli_json(doc, "host-a", where="capture.json")
            except LldpFormatError as e:
                assert str(e).startswith("capture.json: ")
                seen["rejected"] += 1
                continue
            for row in rows:
                assert all(isinstance(v, str) for v in row.values())
                "".join(row.values()).encode()  # stores as UTF-8
            seen["rows"] += len(rows)
        return PER_EXAMPLE

    fuzz(check)
    assert seen["rows"] and seen["rejected"]
