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


def _stream(sonic_paths: str = "whole") -> tuple[G.SonicGnmi, Target]:
    counters = json.loads((FIX / "counters_db.json").read_text())
    appl = json.loads((FIX / "appl_db.json").read_text())
    t = Target(counters, appl, {})
    cfg = GnmiConfig(address="127.0.0.1:1", sonic_paths=sonic_paths)  # type: ignore[arg-type]
    st = G.SonicGnmi("leaf0", cfg, 10.0, 5.0, Seen())

    async def get(md: Any, target: str, paths: Any) -> list[Any]:
        return [t._notification(target, [G.parse_path(p) for p in paths])]

    st._get = get  # type: ignore[method-assign]
    asyncio.run(st._prepare([]))
    st._notification(t._notification("APPL_DB", [G.parse_path(p) for p in G.SONIC_ON_CHANGE]))
    return st, t


def _sample(st: G.SonicGnmi, t: Target, paths: tuple[str, ...] = G.SONIC_SAMPLE) -> None:
    st._notification(t._notification("COUNTERS_DB", [G.parse_path(p) for p in paths]))
    st._synced()


def _field_sample(st: G.SonicGnmi, t: Target) -> None:
    """A SAMPLE of every path `sonic_paths: fields` subscribes, a notification per path."""
    for p in G.SONIC_FIELD_SAMPLE:
        st._notification(t._notification("COUNTERS_DB", [G.parse_path(p)]))
    st._synced()


def _lists(cols: dict[str, Any]) -> dict[str, list[Any]]:
    return {k: list(v) for k, v in cols.items() if k != "ts"}


def test_field_paths_read_into_the_same_columns_as_the_whole_hashes() -> None:
    whole, t = _stream("whole")
    _sample(whole, t)
    st, _ = _stream("fields")
    assert st.sample_paths == G.SONIC_FIELD_SAMPLE
    _field_sample(st, t)
    # every counter (one per update) read as it arrived, counters the dump lacks as nulls
    assert len(st._fcols) == len(G.SONIC_FIELD_SAMPLE) - 1
    assert None not in st._fcols.values()
    seen = Seen()
    got, expect = st.poll_columns(seen), whole.poll_columns(Seen())
    for a, b in zip(got[:3], expect[:3], strict=True):
        assert _lists(a) == _lists(b)
    assert got[3] == expect[3] and not seen.got
    assert len(got[0]["port"]) == 3 and st.caught_up(t.base_ns // 10**6)


def test_a_field_update_with_a_bad_value_or_a_port_left_out_is_read_by_the_poll() -> None:
    st, t = _stream("fields")
    t.counters = copy.deepcopy(t.counters)
    pmap = t.counters["COUNTERS_PORT_NAME_MAP"]
    bad, gone = pmap["Ethernet4"], pmap["Ethernet8"]
    t.counters[f"COUNTERS:{bad}"]["SAI_PORT_STAT_IF_IN_OCTETS"] = "lots"
    del t.counters[f"COUNTERS:{gone}"]["SAI_PORT_STAT_PFC_3_RX_PKTS"]  # left out of its update
    _field_sample(st, t)
    assert st._fcols["SAI_PORT_STAT_IF_IN_OCTETS"] is None  # the poll reads it and names it
    assert st._fcols["SAI_PORT_STAT_PFC_3_RX_PKTS"] is None
    seen = Seen()
    pc, prio, _, _ = st.poll_columns(seen)
    i, j = pc["port"].index("Ethernet4"), pc["port"].index("Ethernet8")
    assert pc["rx_bytes_total"][i] is None
    assert ("bad_value", f"COUNTERS:{bad} SAI_PORT_STAT_IF_IN_OCTETS='lots'") in seen.got
    h0 = t.counters[f"COUNTERS:{pmap['Ethernet0']}"]
    k = pc["port"].index("Ethernet0")
    assert pc["rx_bytes_total"][k] == int(h0["SAI_PORT_STAT_IF_IN_OCTETS"])
    assert pc["pfc_rx_pause_total"][j] is None  # a term of the sum has no value: no sum
    assert pc["pfc_rx_pause_total"][k] is not None
    rows = dict(
        zip(zip(prio["port"], prio["priority"], strict=True), prio["rx_pause_total"], strict=True)
    )
    assert rows.get(("Ethernet8", 3)) is None
    assert rows[("Ethernet0", 3)] == int(h0["SAI_PORT_STAT_PFC_3_RX_PKTS"])


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


def test_a_deleted_lldp_neighbour_is_no_link() -> None:
    """sonic-gnmi sends an APPL_DB key deleted under ON_CHANGE as {key: {}} (db_client.go; its
    test TestTableKeyOnDeletion): the neighbour is gone, not a link to nobody. A gNMI delete of
    the key's path says the same."""
    st, _ = _stream()
    pb = G.gnmi_pb()

    def ports() -> list[str]:
        return sorted(st.poll_columns(Seen())[3].get("local_port", []))

    _sample(st, _stream()[1])
    assert ports() == ["Ethernet0", "Ethernet4", "Ethernet8"]
    st._notification(pb.Notification(
        timestamp=1, prefix=pb.Path(target="APPL_DB"),
        update=[pb.Update(path=G.parse_path("LLDP_ENTRY_TABLE"),
                          val=pb.TypedValue(json_ietf_val=b'{"Ethernet4": {}}'))],
    ))  # fmt: skip
    assert ports() == ["Ethernet0", "Ethernet8"]
    st._notification(pb.Notification(
        timestamp=2, prefix=pb.Path(target="APPL_DB"),
        delete=[G.parse_path("LLDP_ENTRY_TABLE/Ethernet8")],
    ))  # fmt: skip
    assert ports() == ["Ethernet0"]
