"""The switch tests' gNMI target: telemetry.sim.gnmi_target's Target serving the SONiC
COUNTERS_DB/APPL_DB dump in tests/fixtures/sonic and the OpenConfig JSON in
tests/fixtures/switch/openconfig.json; with `aliases`, also the CONFIG_DB of the same
sonic-utilities mock tables (its PORT hashes give Ethernet0 the alias etp1, ...), so the COUNTERS
answers are keyed by vendor alias as sonic-gnmi keys them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from telemetry.sim.gnmi_target import Target, serve

FIX = Path(__file__).parents[2] / "fixtures"


def load_target(*, aliases: bool = False, **kw: Any) -> Target:
    counters = json.loads((FIX / "sonic" / "counters_db.json").read_text())
    appl = json.loads((FIX / "sonic" / "appl_db.json").read_text())
    oc = json.loads((FIX / "switch" / "openconfig.json").read_text())
    if aliases:
        kw["config"] = json.loads((FIX / "sonic" / "config_db.json").read_text())
    return Target(counters, appl, oc, **kw)


__all__ = ["Target", "load_target", "serve"]
