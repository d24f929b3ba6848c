"""The detector registry fills itself from its table of modules, without building a Correlator
and without importing the engine; config validation of thresholds stays as light."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import pytest

from telemetry.correlate.findings import Finding
from telemetry.correlate.registry import (
    _DETECTORS,
    DETECTOR_MODULES,
    Context,
    Window,
    detector,
    detectors,
)
from telemetry.records import KINDS


def _fresh(code: str) -> str:
    """Run `code` in a new interpreter (nothing imported yet) and return its output."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_registry_is_filled_without_the_engine() -> None:
    out = _fresh(
        "import sys\n"
        "from telemetry.correlate.registry import detectors\n"
        "d = detectors()\n"
        "print(len(d), 'telemetry.correlate.engine' in sys.modules)"
    )
    assert out == f"{len(detectors())} False"


def test_config_validates_thresholds_without_the_engine() -> None:
    out = _fresh(
        "import sys\n"
        "from telemetry.config import CorrelateConfig\n"
        "CorrelateConfig(thresholds={'pfc': {'storm_pauses_per_second': 1}})\n"
        "try:\n"
        "    CorrelateConfig(thresholds={'pfc': {'nope': 1}})\n"
        "except ValueError as e:\n"
        "    print('rejected', 'thresholds.pfc.nope: unknown threshold' in str(e))\n"
        "print('telemetry.correlate.engine' in sys.modules)"
    )
    assert out.splitlines() == ["rejected True", "False"]


def test_every_detector_module_registers_and_needs_known_kinds() -> None:
    specs = detectors()
    modules = {s.fn.__module__ for s in specs.values()}
    assert modules == set(DETECTOR_MODULES)
    for s in specs.values():
        assert s.needs and set(s.needs) <= set(KINDS), s.name
    assert specs["gpu_xid"].needs == ("gpu_event", "log_event")  # NVML events, kernel Xid lines


def test_category_is_the_module_and_the_declaration() -> None:
    """A finding's category is its detector's module, which kinds.yaml declares."""
    from telemetry.correlate.kinds import kinds

    got = {k: s.category for s in detectors().values() for k in s.kinds}
    assert got == {k.name: k.category for k in kinds().values()}
    assert {k: got[k] for k in ("dci_near_capacity", "gpu_without_direct_nic", "pfc_storm")} == {
        "dci_near_capacity": "storage",
        "gpu_without_direct_nic": "placement",
        "pfc_storm": "fabric",
    }


def test_a_detector_and_its_declaration_must_agree() -> None:
    """An undeclared kind, a category other than the module, a declared kind no detector
    reports: each refused with the kind named."""
    from dataclasses import replace

    from telemetry.correlate.kinds import KindError
    from telemetry.correlate.registry import check_declarations

    specs = list(detectors().values())
    flap = next(s for s in specs if s.name == "link_flap")
    rest = [s for s in specs if s is not flap]
    with pytest.raises(KindError, match="link_errors, link_flap declared but no detector"):
        check_declarations(rest)
    with pytest.raises(
        KindError, match=r"link_flap: category fabric but its detector is in detectors/pfc\.py"
    ):
        check_declarations([*rest, replace(flap, category="pfc")])
    with pytest.raises(KindError, match=r"link_wobble is not declared in kinds\.yaml"):
        check_declarations([*rest, replace(flap, also=("link_errors", "link_wobble"))])
    check_declarations(specs)  # as shipped: agrees


def test_findings_carry_the_detector_name_and_category() -> None:
    @detector("test_only_two_kinds", needs=("gpu_sample",))
    def two_kinds(ctx: Context) -> list[Finding]:
        return [
            ctx.finding("info", "gpu", "n1/gpu0", "one", {"n": 1}),
            ctx.finding("warning", "gpu", "n1/gpu1", "two", {}, kind="test_only_other"),
        ]

    try:
        t = datetime(2026, 11, 21, tzinfo=UTC)
        ctx = Context(None, Window(t, t), {}, "c")  # type: ignore[arg-type]
        a, b = detectors()["test_only_two_kinds"].fn(ctx)
        # the module of this test is its area
        assert (a.kind, a.category, a.severity, a.subject, a.evidence) == (
            "test_only_two_kinds", "test_registry", "info", "n1/gpu0", {"n": 1}
        )  # fmt: skip
        assert (b.kind, b.category) == ("test_only_other", "test_registry")
        with pytest.raises(RuntimeError, match="outside a registered detector"):
            ctx.finding("info", "gpu", "x", "s", {})  # the bare context knows no detector
    finally:
        _DETECTORS.pop("test_only_two_kinds", None)


def test_reading_the_engines_own_output_writes_what_a_batch_run_kept_back() -> None:
    """Context.table of findings or incidents (and outputs_written, for a reader of its own)
    calls the batch run's flush first; any other kind does not, nor a context without one."""
    flushed: list[int] = []

    class _Store:
        def table(self, kind: str, *, final: bool = False) -> str:
            return f"`db`.`{kind}`"

    t = datetime(2026, 11, 21, tzinfo=UTC)
    ctx = Context(_Store(), Window(t, t), {}, "c", {"flush_outputs": lambda: flushed.append(1)})  # type: ignore[arg-type]
    ctx.table("gpu_sample")
    assert not flushed
    ctx.table("finding", final=True)
    ctx.table("incident")
    ctx.outputs_written()
    assert len(flushed) == 3
    Context(_Store(), Window(t, t), {}, "c").table("finding")  # type: ignore[arg-type]
