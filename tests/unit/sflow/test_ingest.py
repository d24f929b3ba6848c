"""SflowIngest (after `decode.scan`): rows, sequence gaps, agent restarts, malformed datagrams (counted, rate-limited logs)."""

from __future__ import annotations

import logging

from exporters.sflow import encode as E
from exporters.sflow.decode import scan
from exporters.sflow.ingest import REASONS, SflowIngest
from telemetry.contracts import ComponentStats
from telemetry.problems import Problems


def _dg(seq: int, uptime: int = 1000, qp: int = 5, rate: int = 100, output: int = 12) -> bytes:
    frame = E.rocev2_frame("10.0.0.1", "10.0.1.1", qp)
    return E.datagram([E.flow_sample(frame[:128], rate=rate, frame_length=1100, output=output)],
                      seq=seq, uptime_ms=uptime)  # fmt: skip


def test_rows_scaled_and_named() -> None:
    st = ComponentStats("t")
    ing = SflowIngest(st, agents={"10.0.0.1": "leaf01"}, ifnames={"leaf01": {12: "Ethernet48"}})  # fmt: skip
    assert ing.add(scan(_dg(1)), "10.0.0.1", 1_000)
    [b] = [b for b in ing.drain() if b.kind.name == "flow_sample"]
    row = b.table.to_pylist()[0]
    assert row["switch"] == "leaf01" and row["out_port"] == "Ethernet48" and "ecmp_group" not in row
    assert (row["bytes"], row["packets"], row["dest_qp"]) == (110_000, 100, 5)


def test_sequence_gaps_and_restarts_are_counted() -> None:
    st = ComponentStats("t")
    ing = SflowIngest(st)
    for seq, up in ((1, 1000), (2, 2000), (5, 3000), (6, 4000), (1, 100), (2, 200)):
        ing.add(scan(_dg(seq, up)), "10.0.0.1", 0)
    assert ing.lost == 2  # 3 and 4
    assert ing.restarts == 1  # back to 1 with a smaller uptime
    assert st.extra["datagrams_lost"] == 2 and st.extra["agent_restarts"] == 1


def test_malformed_counted_and_logged_once_per_reason_per_minute(caplog) -> None:  # type: ignore[no-untyped-def]
    st = ComponentStats("t")
    now = [100.0]
    ing = SflowIngest(st, Problems(st, "sflow", REASONS, clock=lambda: now[0]))
    bad = E.datagram([], version=4)
    short = E.datagram([])[:10]
    with caplog.at_level(logging.WARNING):
        for i in range(5):
            now[0] = 100.0 + i
            assert not ing.add(scan(bad), "10.0.0.9", 0)
        ing.add(scan(bad), "10.0.0.8", 0)  # another agent, same reason: same line budget
        ing.add(scan(short), "10.0.0.8", 0)  # another reason: its own line
        now[0] = 161.0
        ing.add(scan(bad), "10.0.0.9", 0)
    # the label is the bounded reason; the agent address is only in the log
    assert st.errors == {"bad_version": 7, "truncated_header": 1} and st.failed == 8
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3
    assert "10.0.0.9" in lines[0] and "bad_version" in lines[0]
    assert "10.0.0.8" in lines[1] and "truncated_header" in lines[1]
    assert "bad_version" in lines[2] and "+5 more" in lines[2]
    assert ing.drain() == []  # nothing stored from a bad datagram


def test_counter_samples_become_port_rows() -> None:
    st = ComponentStats("t")
    ing = SflowIngest(st, agents={"10.0.0.1": "leaf01"}, ifnames={"leaf01": {7: "Ethernet24"}})
    g = {"ifindex": 7, "ifspeed": 400_000_000_000, "ifstatus": 3, "in_octets": 10, "out_octets": 20,
         "in_ucast_pkts": 1, "in_multicast_pkts": 2, "in_broadcast_pkts": 3, "out_discards": 4}  # fmt: skip
    ing.add(scan(E.datagram([E.counter_sample(g)])), "10.0.0.1", 5)
    [b] = ing.drain()
    row = b.table.to_pylist()[0]
    assert (row["switch"], row["port"], row["up"], row["speed_bps"]) == (
        "leaf01",
        "Ethernet24",
        1,
        4e11,
    )
    assert (row["rx_bytes_total"], row["tx_bytes_total"], row["rx_packets_total"], row["tx_discards_total"]) == (
        10, 20, 6, 4)  # fmt: skip
