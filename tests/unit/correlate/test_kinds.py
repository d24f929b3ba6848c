"""Finding kinds declared once (telemetry/correlate/kinds.yaml): the loader refuses what does not
hold, thresholds.yaml's sections belong to declared kinds, and every declared scope has a rule."""

from __future__ import annotations

from typing import Any

import pytest

from telemetry.correlate.kinds import (
    ENGINE_THRESHOLDS,
    SCOPES,
    KindError,
    check_threshold_sections,
    kinds,
    parse,
)
from telemetry.correlate.thresholds import default_thresholds


def _one(**fields: Any) -> dict[str, Any]:
    return {"category": "fabric", "means": "m", "doc": "docs/x.md", "do": ["{subject}"], **fields}


@pytest.mark.parametrize(
    ("decl", "error"),
    [
        ({"a": _one(colour="red")}, "a: unknown field.s. colour"),
        ({"a": {**_one(), "means": ""}}, "a: missing means"),
        ({"a": _one(scope="rack")}, "a: scope 'rack' is not one of idc_pair"),
        ({"a": _one(effect_of=["b"])}, "a: effect_of names undeclared b"),
        ({"a": _one(effect_of=[], prefer_usual=True)}, "a: prefer_usual without effect_of"),
        ({"a": ["not", "a", "mapping"]}, "a: a mapping of fields expected"),
    ],
)
def test_the_loader_refuses_what_does_not_hold(decl: dict[str, Any], error: str) -> None:
    with pytest.raises(KindError, match=error):
        parse(decl)


def test_a_declaration_reads_as_written() -> None:
    k = parse({"b": _one(), "a": _one(effect_of=["b"], scope="job", incident=False)})
    assert (k["a"].effect_of, k["a"].is_effect, k["a"].scope, k["a"].incident) == (
        ("b",), True, "job", False
    )  # fmt: skip
    assert (k["b"].effect_of, k["b"].is_effect, k["b"].incident) == (None, False, True)
    assert kinds()["gpu_without_direct_nic"].scope == "hypernode"


def test_every_thresholds_section_belongs_to_a_declared_kind_or_the_engine() -> None:
    sections = set(default_thresholds())
    check_threshold_sections(sections)  # as shipped
    with pytest.raises(KindError, match=r"section\(s\) fans judged by no declared kind"):
        check_threshold_sections(sections | {"fans"})
    with pytest.raises(KindError, match=r"pfc_storm: thresholds section\(s\) pfc absent"):
        check_threshold_sections(sections - {"pfc"})


def test_declared_sections_cover_what_each_detector_waits_on() -> None:
    """A detector's lookback and settle name thresholds of the sections its kinds declare."""
    from telemetry.correlate.registry import detectors

    for spec in detectors().values():
        own = {s for k in spec.kinds for s in kinds()[k].thresholds}
        used = {p.split(".")[0] for p in (*spec.lookback, *spec.settle)}
        assert used - set(ENGINE_THRESHOLDS) <= own, spec.name


def test_every_declared_scope_has_a_rule() -> None:
    from telemetry.correlate.incidents import SCOPE_RULES

    assert set(SCOPE_RULES) == set(SCOPES)
    assert {k.scope for k in kinds().values()} - {None} <= set(SCOPES)


def test_the_docs_tables_give_each_kind_its_declared_category() -> None:
    """docs/correlation.md and docs/nccl.md list findings as `| kind | category | ...`."""
    import re
    from pathlib import Path

    root = Path(__file__).parents[3]
    seen = {}
    for page in ("docs/correlation.md", "docs/nccl.md"):
        for m in re.finditer(r"(?m)^\| `(\w+)`(?: / `(\w+)`)? \| (\w+)", (root / page).read_text()):
            for k in m.group(1, 2):
                if k in kinds():
                    seen[k] = m.group(3)
    assert len(seen) >= 30
    assert seen == {k: kinds()[k].category for k in seen}
