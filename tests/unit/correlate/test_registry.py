"""The detector registry fills itself from its table of modules, without building a Correlator
and without importing the engine; config validation of thresholds stays as light."""

from __future__ import annotations

import subprocess
import sys

from telemetry.correlate.registry import DETECTOR_MODULES, detectors
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
