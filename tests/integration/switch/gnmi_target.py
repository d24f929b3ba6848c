"""The switch tests' gNMI target: telemetry.sim.gnmi_target's Target serving the SONiC
COUNTERS_DB/APPL_DB dump in tests/fixtures/sonic and the OpenConfig JSON in
tests/fixtures/switch/openconfig.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from telemetry.sim.gnmi_target import Target, serve

FIX = Path(__file__).parents[2] / "fixtures"


def load_target(**kw: Any) -> Target:
    counters = json.loads((FIX / "sonic" / "counters_db.json").read_text())
    appl = json.loads((FIX / "sonic" / "appl_db.json").read_text())
    oc = json.loads((FIX / "switch" / "openconfig.json").read_text())
    return Target(counters, appl, oc, **kw)


__all__ = ["Target", "load_target", "serve"]
