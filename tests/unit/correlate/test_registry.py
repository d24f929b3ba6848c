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
    assert specs["gpu_xid"].needs == ("gpu_event",)


# the category of every detector as it was declared one by one before it defaulted to the area
CATEGORIES = {
    "cross_tenant_rdma": "placement",
    "dci_near_capacity": "storage",  # lives in fabric.py: given explicitly
    "ecmp_imbalance": "fabric",
    "ecn_hotspot": "fabric",
    "gpu_lost": "node",
    "gpu_throttle": "node",
    "gpu_without_direct_nic": "placement",
    "gpu_xid": "node",
    "hdfs_cross_idc_read": "storage",
    "hdfs_replica_violation": "storage",
    "hdfs_replication_backlog": "storage",
    "hypernode_drift": "topology",
    "job_spans_su": "placement",
    "link_flap": "fabric",
    "network_bound": "node",
    "nic_pcie_stall": "node",
    "pfc_storm": "fabric",
    "pfc_unexpected_priority": "fabric",
    "placement_violation": "placement",
}


def test_category_defaults_to_the_module_area() -> None:
    got = {n: s.category for n, s in detectors().items() if n in CATEGORIES}
    assert got == CATEGORIES


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
