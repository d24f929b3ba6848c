"""SonicGnmi's cache without a network: updates go in as a target renders them (the SONiC
dump), polls come out. Counters read as a full update arrives serve the polls until another
update changes a hash; then the poll reads the hashes again (never a stale value)."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

from exporters.switch import gnmi as G
from exporters.switch.config import GnmiConfig
from telemetry.sim.gnmi_target import Target
from tests.unit.switch.seen import Seen

FIX = Path(__file__).parents[2] / "fixtures" / "sonic"


def _stream() -> tuple[G.SonicGnmi, Target]:
    counters = json.loads((FIX / "counters_db.json").read_text())
    appl = json.loads((FIX / "appl_db.json").read_text())
    t = Target(counters, appl, {})
    st = G.SonicGnmi("leaf0", GnmiConfig(address="127.0.0.1:1"), 10.0, 5.0, Seen())

    async def get(md: Any, target: str, paths: Any) -> list[Any]:
        return [t._notification(target, [G.parse_path(p) for p in paths])]

    st._get = get  # type: ignore[method-assign]
    asyncio.run(st._prepare([]))
    st._notification(t._notification("APPL_DB", [G.parse_path(p) for p in G.SONIC_ON_CHANGE]))
    return st, t


def _sample(st: G.SonicGnmi, t: Target, paths: tuple[str, ...] = G.SONIC_SAMPLE) -> None:
    st._notification(t._notification("COUNTERS_DB", [G.parse_path(p) for p in paths]))
    st._synced()


def test_counters_read_on_arrival_until_a_later_update() -> None:
    st, t = _stream()
    _sample(st, t)
    assert st._block["port"] is not None
    # the dump's queues are not alike (the PFC watchdog's counters on some only, 60 of 90 with
    # counters at all): read by the poll
    assert st._block["queue"] is None
    pc, _, qc, _ = st.poll_columns(Seen())
    oid = t.counters["COUNTERS_PORT_NAME_MAP"]["Ethernet0"]
    i = pc["port"].index("Ethernet0")
    assert pc["rx_bytes_total"][i] == int(
        t.counters[f"COUNTERS:{oid}"]["SAI_PORT_STAT_IF_IN_OCTETS"]
    )
    # one port updated alone (a switch may send a path per port): that poll reads the hashes
    t.counters = copy.deepcopy(t.counters)
    t.counters[f"COUNTERS:{oid}"]["SAI_PORT_STAT_IF_IN_OCTETS"] = "777"
    t.counters["Ethernet0"] = t.counters[f"COUNTERS:{oid}"]
    st._notification(
        G.gnmi_pb().Notification(
            timestamp=t._ts(),
            prefix=G.gnmi_pb().Path(target="COUNTERS_DB"),
            update=[
                G.gnmi_pb().Update(
                    path=G.parse_path("COUNTERS/Ethernet0"),
                    val=G.gnmi_pb().TypedValue(
                        json_ietf_val=json.dumps(t.counters[f"COUNTERS:{oid}"]).encode()
                    ),
                )
            ],
        )
    )
    assert st._block["port"] is None  # that update did not bring every port
    pc2, prio2, qc2, _ = st.poll_columns(Seen())
    assert pc2["rx_bytes_total"][i] == 777
    assert [x for j, x in enumerate(pc2["rx_bytes_total"]) if j != i] == [
        x for j, x in enumerate(pc["rx_bytes_total"]) if j != i
    ]
    assert list(qc2["tx_packets_total"]) == list(qc["tx_packets_total"])  # queues: still read
    # a full sample again: read on arrival, the same columns as the hashes give
    _sample(st, t)
    assert st._block["port"] is not None
    pc3, prio3, _, _ = st.poll_columns(Seen())
    assert {k: list(v) for k, v in pc3.items() if k != "ts"} == {
        k: list(v) for k, v in pc2.items() if k != "ts"
    }
    assert {k: list(v) for k, v in prio3.items() if k != "ts"} == {
        k: list(v) for k, v in prio2.items() if k != "ts"
    }


def test_a_full_update_with_a_bad_value_is_read_by_the_poll_and_named() -> None:
    st, t = _stream()
    t.counters = copy.deepcopy(t.counters)
    oid = t.counters["COUNTERS_PORT_NAME_MAP"]["Ethernet4"]
    t.counters[f"COUNTERS:{oid}"]["SAI_PORT_STAT_IF_IN_OCTETS"] = "lots"
    _sample(st, t)
    assert st._block["port"] is None  # not read on arrival: the poll reads it and names it
    seen = Seen()
    pc, _, _, _ = st.poll_columns(seen)
    assert pc["rx_bytes_total"][pc["port"].index("Ethernet4")] is None
    assert ("bad_value", f"COUNTERS:{oid} SAI_PORT_STAT_IF_IN_OCTETS='lots'") in seen.got
