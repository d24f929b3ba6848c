"""What the switch source keeps from one poll of a gNMI SONiC cache to the next (PORT_TABLE's
up/speed columns, the LLDP columns, the priority rows' port names, Arrow arrays of unchanged
lists) must never outlive what it was made from: after APPL_DB changes (a port down, a new
speed, a bad speed, another neighbour) and after new name maps (a port gone), a poll of a
long-lived source equals, column by column, the poll of a fresh source fed the same updates
(rates aside: a fresh source has no previous poll), and a bad speed is named on every poll."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

from exporters.switch import gnmi as G
from exporters.switch.config import GnmiConfig
from exporters.switch.sonic import Target as SwitchTarget
from exporters.switch.source import SwitchSource
from telemetry.sim.gnmi_target import Target

FIX = Path(__file__).parents[2] / "fixtures" / "sonic"
RATES = ("rx_bytes_per_second", "tx_bytes_per_second", "tx_utilization_ratio")


def _source(t: Target) -> tuple[SwitchSource, G.SonicGnmi]:
    src = SwitchSource([])
    st = G.SonicGnmi("leaf0", GnmiConfig(address="127.0.0.1:1"), 10.0, 5.0, src.problems)

    async def get(md: Any, target: str, paths: Any) -> list[Any]:
        return [t._notification(target, [G.parse_path(p) for p in paths])]

    st._get = get  # type: ignore[method-assign]
    asyncio.run(st._prepare([]))
    src.targets.append(SwitchTarget("leaf0", "", "leaf", st))
    return src, st


def _feed(st: G.SonicGnmi, t: Target) -> None:
    st._notification(t._notification("APPL_DB", [G.parse_path(p) for p in G.SONIC_ON_CHANGE]))
    st._notification(t._notification("COUNTERS_DB", [G.parse_path(p) for p in G.SONIC_SAMPLE]))
    st._synced()


def _poll(src: SwitchSource) -> dict[str, dict[str, list[Any]]]:
    out = {}
    for b in src._collect():
        cols = b.table.to_pydict()
        for f in (*RATES, "ts", "poll_duration_seconds"):
            cols.pop(f, None)
        out[b.kind.name] = cols
    return out


def test_a_long_lived_poll_equals_a_fresh_one_after_appl_db_and_maps_change() -> None:
    counters = json.loads((FIX / "counters_db.json").read_text())
    appl = json.loads((FIX / "appl_db.json").read_text())
    t = Target(counters, appl, {})
    src, st = _source(t)
    _feed(st, t)
    first = _poll(src)
    assert _poll(src) == first  # nothing changed: the kept columns serve
    ports = first["switch_port_sample"]["port"]
    assert len(ports) >= 3 and first["lldp_link"]["local_port"]
    p0, p1 = ports[0], ports[1]
    appl2 = copy.deepcopy(appl)
    appl2[f"PORT_TABLE:{p0}"] = {**appl2.get(f"PORT_TABLE:{p0}", {}), "oper_status": "down",
                                 "speed": "100000"}  # fmt: skip
    appl2[f"PORT_TABLE:{p1}"] = {**appl2.get(f"PORT_TABLE:{p1}", {}), "speed": "fast"}
    lldp = next(k for k in appl2 if k.startswith("LLDP_ENTRY_TABLE:"))
    appl2[lldp] = {**appl2[lldp], "lldp_rem_sys_name": "spine-new"}
    t.appl = appl2
    for _ in range(2):  # the bad speed named on every poll, from the kept columns too
        _feed(st, t)
        before = src.stats.errors.get("bad_value", 0)
        got = _poll(src)
        assert src.stats.errors.get("bad_value", 0) == before + 1  # PORT_TABLE speed=fast
        fresh_src, fresh = _source(t)
        _feed(fresh, t)
        assert got == _poll(fresh_src)
        assert got != first
        pc = got["switch_port_sample"]
        assert pc["up"][0] == 0 and pc["speed_bps"][0] == 1e11 and pc["speed_bps"][1] is None
        assert "spine-new" in got["lldp_link"]["remote_device"]
    # new name maps: a port gone from COUNTERS_PORT_NAME_MAP
    counters2 = copy.deepcopy(counters)
    del counters2["COUNTERS_PORT_NAME_MAP"][p0]
    t.counters = counters2
    asyncio.run(st._prepare([]))
    _feed(st, t)
    got = _poll(src)
    fresh_src, fresh = _source(t)
    _feed(fresh, t)
    assert got == _poll(fresh_src)
    assert p0 not in got["switch_port_sample"]["port"]
    assert p0 not in got["switch_priority_sample"]["port"]
