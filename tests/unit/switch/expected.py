"""Expected switch rows computed straight from a COUNTERS_DB dump, independently of the parser
(plain dict lookups on SAI names), for the unit and Redis tests."""

from __future__ import annotations

from typing import Any


def _sum(h: dict[str, str], names: list[str]) -> int | None:
    if not all(n in h for n in names):
        return None
    return sum(int(h[n]) for n in names)


def expected_ports(db: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for name, oid in db["COUNTERS_PORT_NAME_MAP"].items():
        h = db[f"COUNTERS:{oid}"]
        rates = db.get(f"RATES:{oid}", {})
        pause = _sum(h, [f"SAI_PORT_STAT_PFC_{p}_RX_PAUSE_DURATION_US" for p in range(8)])
        if pause is None:
            pause = _sum(h, [f"EST_PORT_STAT_PFC_{p}_RX_PAUSE_DURATION_US" for p in range(8)])
        out[name] = {
            "rx_bytes_total": int(h["SAI_PORT_STAT_IF_IN_OCTETS"]),
            "tx_bytes_total": int(h["SAI_PORT_STAT_IF_OUT_OCTETS"]),
            "rx_packets_total": int(h["SAI_PORT_STAT_IF_IN_UCAST_PKTS"])
            + int(h["SAI_PORT_STAT_IF_IN_NON_UCAST_PKTS"]),
            "tx_packets_total": int(h["SAI_PORT_STAT_IF_OUT_UCAST_PKTS"])
            + int(h["SAI_PORT_STAT_IF_OUT_NON_UCAST_PKTS"]),
            "rx_discards_total": int(h["SAI_PORT_STAT_IF_IN_DISCARDS"]),
            "tx_discards_total": _sum(h, ["SAI_PORT_STAT_IF_OUT_DISCARDS"]),
            "rx_errors_total": int(h["SAI_PORT_STAT_IF_IN_ERRORS"]),
            "tx_errors_total": _sum(h, ["SAI_PORT_STAT_IF_OUT_ERRORS"]),
            "pfc_rx_pause_total": sum(int(h[f"SAI_PORT_STAT_PFC_{p}_RX_PKTS"]) for p in range(8)),
            "pfc_tx_pause_total": sum(int(h[f"SAI_PORT_STAT_PFC_{p}_TX_PKTS"]) for p in range(8)),
            "pfc_rx_pause_duration_us_total": pause,
            "rx_bytes_per_second": float(rates["RX_BPS"]) if "RX_BPS" in rates else None,
            "tx_bytes_per_second": float(rates["TX_BPS"]) if "TX_BPS" in rates else None,
        }
    return out


def expected_priorities(db: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    """(port, priority) -> switch_priority_sample values: frames as counted, pause time in
    seconds (SAI's duration, else SONiC's estimate, both in microseconds)."""
    out = {}
    for name, oid in db["COUNTERS_PORT_NAME_MAP"].items():
        h = db[f"COUNTERS:{oid}"]
        for p in range(8):
            rx_us = h.get(
                f"SAI_PORT_STAT_PFC_{p}_RX_PAUSE_DURATION_US",
                h.get(f"EST_PORT_STAT_PFC_{p}_RX_PAUSE_DURATION_US"),
            )
            tx_us = h.get(f"SAI_PORT_STAT_PFC_{p}_TX_PAUSE_DURATION_US")
            out[(name, p)] = {
                "rx_pause_total": int(h[f"SAI_PORT_STAT_PFC_{p}_RX_PKTS"]),
                "tx_pause_total": int(h[f"SAI_PORT_STAT_PFC_{p}_TX_PKTS"]),
                "rx_pause_duration_seconds_total": None if rx_us is None else int(rx_us) / 1e6,
                "tx_pause_duration_seconds_total": None if tx_us is None else int(tx_us) / 1e6,
            }
    return out


def expected_queues(db: dict[str, Any]) -> dict[tuple[str, str, int], dict[str, Any]]:
    out: dict[tuple[str, str, int], dict[str, Any]] = {}
    types = {"SAI_QUEUE_TYPE_UNICAST": "unicast", "SAI_QUEUE_TYPE_MULTICAST": "multicast",
             "SAI_QUEUE_TYPE_ALL": "all", "SAI_QUEUE_TYPE_UNICAST_VOQ": "voq"}  # fmt: skip
    for qname, oid in db["COUNTERS_QUEUE_NAME_MAP"].items():
        c = db.get(f"COUNTERS:{oid}", {})
        w = db.get(f"USER_WATERMARKS:{oid}", {})
        if not c and not w:
            continue
        port = qname.rsplit(":", 1)[0]
        idx = int(db["COUNTERS_QUEUE_INDEX_MAP"][oid])
        wm = c.get(
            "SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES", w.get("SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES")
        )
        status = c.get("PFC_WD_STATUS")
        out[(port, types[db["COUNTERS_QUEUE_TYPE_MAP"][oid]], idx)] = {
            "tx_packets_total": _sum(c, ["SAI_QUEUE_STAT_PACKETS"]),
            "tx_bytes_total": _sum(c, ["SAI_QUEUE_STAT_BYTES"]),
            "dropped_packets_total": _sum(c, ["SAI_QUEUE_STAT_DROPPED_PACKETS"]),
            "dropped_bytes_total": _sum(c, ["SAI_QUEUE_STAT_DROPPED_BYTES"]),
            "ecn_marked_packets_total": _sum(c, ["SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS"]),
            "ecn_marked_bytes_total": _sum(c, ["SAI_QUEUE_STAT_WRED_ECN_MARKED_BYTES"]),
            "watermark_bytes": None if wm is None else float(wm),
            "pfc_wd_storm_detected": None if status is None else int(status == "stormed"),
            "pfc_wd_storms_total": _sum(c, ["PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED"]),
            "pfc_wd_dropped_packets_total": _sum(
                c, ["PFC_WD_QUEUE_STATS_TX_DROPPED_PACKETS", "PFC_WD_QUEUE_STATS_RX_DROPPED_PACKETS"]),
        }  # fmt: skip
    for pname, oid in db["COUNTERS_PG_NAME_MAP"].items():
        c = db.get(f"COUNTERS:{oid}", {})
        w = db.get(f"USER_WATERMARKS:{oid}", {})
        merged = {**w, **c}
        out[(pname.rsplit(":", 1)[0], "pg", int(db["COUNTERS_PG_INDEX_MAP"][oid]))] = {
            "dropped_packets_total": _sum(
                merged, ["SAI_INGRESS_PRIORITY_GROUP_STAT_DROPPED_PACKETS"]
            ),
            "watermark_bytes": _f(
                merged.get("SAI_INGRESS_PRIORITY_GROUP_STAT_SHARED_WATERMARK_BYTES")
            ),
            "headroom_watermark_bytes": _f(
                merged.get("SAI_INGRESS_PRIORITY_GROUP_STAT_XOFF_ROOM_WATERMARK_BYTES")
            ),
        }
    return out


def _f(v: str | None) -> float | None:
    return None if v is None else float(v)


def check_against_dump(rows_by_kind: dict[str, list[dict[str, Any]]], db: dict[str, Any]) -> int:
    """Assert every port/queue value equals the dump's; returns how many values were compared."""
    n = _compare(rows_by_kind["switch_port_sample"], ("port",), expected_ports(db))
    n += _compare(
        rows_by_kind["switch_priority_sample"], ("port", "priority"), expected_priorities(db), 1e-9
    )
    n += _compare(
        rows_by_kind["switch_queue_sample"], ("port", "queue_type", "queue"), expected_queues(db)
    )
    return n


def _compare(
    rows: list[dict[str, Any]], key: tuple[str, ...], expected: dict[Any, dict[str, Any]],
    rel: float = 0.0,
) -> int:  # fmt: skip
    """Rows keyed by `key` (one column: its value, else a tuple) are exactly the expected ones,
    each field equal (within `rel` relative for floats); returns the values compared."""
    got = {r[key[0]] if len(key) == 1 else tuple(r[k] for k in key): r for r in rows}
    assert set(got) == set(expected)
    n = 0
    for k, fields in expected.items():
        for f, v in fields.items():
            g = got[k][f]
            assert g == v or (rel and v is not None and abs(g - v) < rel * v), (k, f, g, v)
            n += 1
    return n
