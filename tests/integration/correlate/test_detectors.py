"""Detectors on facts written to the real embedded store: each one fires on the fault it is for,
stays quiet on healthy data, and findings persist without duplicates."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from telemetry.correlate import Correlator
from telemetry.correlate import findings as fstore
from telemetry.records import (
    GPU_EVENT,
    GPU_SAMPLE,
    HDFS_TRANSFER,
    LLDP_LINK,
    NIC_SAMPLE,
    SWITCH_PORT_SAMPLE,
    SWITCH_QUEUE_SAMPLE,
    RecordKind,
)
from telemetry.store import Store

Series = Callable[[int], dict[str, Any]]  # step -> one subject's key and values at that step


def t0() -> datetime:
    """Start of a recent, window-aligned hour (tables have TTLs; windows are 300 s)."""
    now = datetime.now(UTC).replace(microsecond=0)
    return now.replace(minute=0, second=0) - timedelta(hours=2)


def ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def found(store: Store) -> set[tuple[str, str]]:
    """Every stored finding as (kind, subject): tests compare the exact set, so a false finding
    of any kind fails them."""
    return {(f["kind"], f["subject"]) for f in fstore.read(store)}


def run(store: Store, start: datetime, minutes: int = 10, **kw):  # type: ignore[no-untyped-def]
    return Correlator(store, cluster="c", **kw).run(start, start + timedelta(minutes=minutes))


def insert_series(
    store: Store, kind: RecordKind, s: datetime, n: int, every_s: float, *subjects: Series
) -> None:
    """`n` samples of `kind` in cluster c, one every `every_s` seconds from `s`: at step i one row
    per subject, `subject(i)` giving its key and values."""
    rows = [
        {"ts": ms(s) + int(i * every_s * 1000), "cluster": "c", **subject(i)}
        for i in range(n)
        for subject in subjects
    ]
    store.insert(kind, kind.to_arrow(rows))


def counting(key: dict[str, Any], **per_step: int) -> Series:
    """A subject (`key`) whose counters grow by `per_step` each step, from 0."""
    return lambda i: {**key, **{field: i * n for field, n in per_step.items()}}


def test_counter_increase_handles_reset(store: Store) -> None:
    from telemetry.correlate.registry import Context, Window
    from telemetry.correlate.sql import increase_sql
    from telemetry.correlate.thresholds import default_thresholds

    s = t0()
    vals = [100, 200, 50, 80]  # NIC reset between the 2nd and 3rd sample
    nic = {"node": "n1", "device": "mlx5_0", "port": 1, "up": 1}
    insert_series(store, NIC_SAMPLE, s, 4, 10, lambda i: {**nic, "pci_stalled_total": vals[i]})
    ctx = Context(store, Window(s, s + timedelta(minutes=5)), default_thresholds(), "c")
    (r,) = ctx.rows(increase_sql(ctx, "nic_sample", ["node", "device"], ["pci_stalled_total"]))
    assert r["inc_pci_stalled_total"] == 100 + 50 + 30
    assert r["resets_pci_stalled_total"] == 1 and r["span_s"] == 30


def _xids(store: Store, s: datetime) -> None:
    store.insert(
        GPU_EVENT,
        GPU_EVENT.to_arrow(
            [
                {
                    "ts": ms(s) + 60_000,
                    "cluster": "c",
                    "node": "n1",
                    "gpu": 3,
                    "event": "xid",
                    "xid": 79,
                },
                {
                    "ts": ms(s) + 100_000,
                    "cluster": "c",
                    "node": "n1",
                    "gpu": 3,
                    "event": "xid",
                    "xid": 79,
                },  # again within the hysteresis: the same finding
                {
                    "ts": ms(s) + 400_000,
                    "cluster": "c",
                    "node": "n1",
                    "gpu": 3,
                    "event": "xid",
                    "xid": 79,
                },  # again long after it closed: a new finding
                {
                    "ts": ms(s) + 70_000,
                    "cluster": "c",
                    "node": "n2",
                    "gpu": 0,
                    "event": "xid",
                    "xid": 13,
                },
            ]
        ),
    )


def _xid_spans(store: Store, s: datetime) -> list[tuple[str, timedelta, timedelta, str]]:
    return sorted(
        (
            f["subject"],
            f["first_seen"].replace(tzinfo=UTC) - s,
            f["last_seen"].replace(tzinfo=UTC) - s,
            f["severity"],
        )
        for f in fstore.read(store, kinds=["gpu_xid"])
    )


def test_xid_findings_persist_and_rerun_is_idempotent(store: Store) -> None:
    s = t0()
    _xids(store, s)
    run(store, s)
    got = _xid_spans(store, s)
    sec = lambda n: timedelta(seconds=n)  # noqa: E731
    # an event holds while it is in the 30 s trailing window: the first tick after it opens the
    # finding, the event 40 s later continues it (within the 60 s hysteresis), the one at 400 s
    # opens a second finding
    assert got == [
        ("n1/gpu3", sec(70), sec(130), "critical"),
        ("n1/gpu3", sec(410), sec(430), "critical"),
        ("n2/gpu0", sec(80), sec(100), "warning"),
    ]
    ids = {f["finding_id"] for f in fstore.read(store, kinds=["gpu_xid"])}
    run(store, s)  # re-run the same range
    again = fstore.read(store, kinds=["gpu_xid"])
    assert {f["finding_id"] for f in again} == ids and len(again) == 3


def test_a_restarted_engine_continues_open_findings(store: Store) -> None:
    """Two engines one after the other (a follower restarted at 100 s) write what one would:
    the open finding is read back from the store and continued under its id."""
    s = t0()
    _xids(store, s)
    Correlator(store, cluster="c").run(s, s + timedelta(seconds=100))
    Correlator(store, cluster="c").run(s + timedelta(seconds=100), s + timedelta(minutes=10))
    sec = lambda n: timedelta(seconds=n)  # noqa: E731
    assert _xid_spans(store, s) == [
        ("n1/gpu3", sec(70), sec(130), "critical"),
        ("n1/gpu3", sec(410), sec(430), "critical"),
        ("n2/gpu0", sec(80), sec(100), "warning"),
    ]


def test_gpu_lost_and_throttle(store: Store) -> None:
    s = t0()
    gpu = {"node": "n1", "up": 1, "thermal_violation_seconds_total": 0.0}
    insert_series(
        store, GPU_SAMPLE, s, 30, 10,  # 5 minutes at 10 s
        lambda i: {**gpu, "gpu": 0, "power_watts": 690.0, "power_violation_seconds_total": i * 8.0,
                   "clock_event_reasons": 0x4},
        lambda i: {**gpu, "gpu": 1, "power_watts": 400.0, "power_violation_seconds_total": 5.0,
                   "clock_event_reasons": 0},
        lambda i: {"node": "n1", "gpu": 2, "up": 0 if i >= 20 else 1},
        # HW thermal slowdown (0x40) with SW power cap (0x4) on a few samples
        lambda i: {**gpu, "gpu": 3, "power_violation_seconds_total": 0.0,
                   "clock_event_reasons": 0x40 if i % 10 else 0x44},
    )  # fmt: skip
    run(store, s, 5)
    causes = {
        f["subject"]: f["evidence"]["cause"] for f in fstore.read(store, kinds=["gpu_throttle"])
    }
    assert causes == {"n1/gpu0": "power", "n1/gpu3": "thermal"}
    # gpu1 is healthy (violation time flat, no reason bits): nothing about it
    assert found(store) == {
        ("gpu_throttle", "n1/gpu0"),
        ("gpu_throttle", "n1/gpu3"),
        ("gpu_lost", "n1/gpu2"),
    }


def test_pfc_storm_localised_to_the_nic_with_propagation(store: Store) -> None:
    s = t0()
    nic = {"device": "mlx5_3", "port": 1, "up": 1}
    insert_series(
        store, NIC_SAMPLE, s, 31, 10,
        counting({**nic, "node": "n7"}, pfc_tx_pause_total=200_000),
        counting({**nic, "node": "n8"}, pfc_tx_pause_total=10),
    )  # fmt: skip
    ports = (  # switch, port, rx and tx pauses per step
        ("leaf3", "Ethernet12", 200_000, 0),
        ("leaf3", "Ethernet64", 0, 50_000),  # pausing the spine
        ("spine1", "Ethernet3", 50_000, 0),
        ("leaf4", "Ethernet0", 3, 3),  # background
    )
    insert_series(
        store, SWITCH_PORT_SAMPLE, s, 31, 10,
        *(counting({"switch": sw, "port": port, "up": 1}, pfc_rx_pause_total=rx,
                   pfc_tx_pause_total=tx) for sw, port, rx, tx in ports),
    )  # fmt: skip
    lldp = []
    lldp.append(
        {
            "ts": ms(s),
            "cluster": "c",
            "local_device": "leaf3",
            "local_port": "Ethernet12",
            "remote_device": "n7",
            "remote_port": "ens3np0",
            "source": "sim",
        }
    )
    store.insert(LLDP_LINK, LLDP_LINK.to_arrow(lldp))
    run(store, s, 5)
    assert found(store) == {("pfc_storm", "n7/mlx5_3")}
    storms = fstore.read(store, kinds=["pfc_storm"])
    ev = storms[0]["evidence"]
    assert ev["origin_pauses_per_second"] == 20_000 and ev["leaf_port"] == "leaf3:Ethernet12"
    assert {p["port"] for p in ev["propagation"]} == {
        "leaf3:Ethernet12",
        "leaf3:Ethernet64",
        "spine1:Ethernet3",
    }


def test_ecn_hotspot_pairs_marks_with_cnps(store: Store) -> None:
    s = t0()
    queue = {"switch": "spine2", "queue": 3, "queue_type": "unicast"}
    insert_series(
        store, SWITCH_QUEUE_SAMPLE, s, 31, 10,
        counting({**queue, "port": "Ethernet8"}, tx_packets_total=10**6,
                 ecn_marked_packets_total=200_000),
        counting({**queue, "port": "Ethernet9"}, tx_packets_total=10**6,
                 ecn_marked_packets_total=100),
    )  # fmt: skip
    nic = {"device": "mlx5_0", "port": 1, "up": 1}
    insert_series(
        store, NIC_SAMPLE, s, 31, 10,
        counting({**nic, "node": "rx1"}, cnp_sent_total=50_000),  # notification point
        counting({**nic, "node": "tx1"}, cnp_handled_total=50_000),  # reaction point
    )  # fmt: skip
    run(store, s, 5)
    assert found(store) == {("ecn_hotspot", "spine2:Ethernet8")}
    (f,) = fstore.read(store, kinds=["ecn_hotspot"])
    assert f["severity"] == "warning"
    assert f["evidence"]["cnp_receivers"][0]["nic"] == "rx1/mlx5_0"
    assert f["evidence"]["cnp_senders"][0]["nic"] == "tx1/mlx5_0"


def test_link_flap_and_errors(store: Store) -> None:
    s = t0()
    port = {"switch": "leaf1", "up": 1, "link_down_events_total": 3, "rx_errors_total": 0}
    insert_series(
        store, SWITCH_PORT_SAMPLE, s, 31, 10,
        lambda i: {**port, "port": "Ethernet4", "up": 0 if i == 10 else 1,
                   "link_down_events_total": 3 + (1 if i >= 10 else 0), "rx_packets_total": i * 10**6},
        lambda i: {**port, "port": "Ethernet5", "rx_packets_total": i * 10**6, "rx_errors_total": i * 500},
        lambda i: {**port, "port": "Ethernet6", "rx_packets_total": i * 10**6},
        # a high error ratio on a nearly idle port, but fewer than link.min_errors
        lambda i: {**port, "port": "Ethernet7", "link_down_events_total": 0, "rx_packets_total": i * 100,
                   "rx_errors_total": i // 4},
    )  # fmt: skip
    run(store, s, 5)
    got = {(f["kind"], f["subject"]) for f in fstore.read(store)}
    assert got == {("link_flap", "leaf1:Ethernet4"), ("link_errors", "leaf1:Ethernet5")}


def test_cross_idc_reads_and_quiet_local_reads(store: Store) -> None:
    s = t0()
    read = {"op": "HDFS_READ", "dest_idc": "idc-a", "bytes": 128 << 20}
    insert_series(
        store, HDFS_TRANSFER, s, 20, 1,
        lambda i: {**read, "datanode": "dn-b-1", "src": "10.2.0.5:9866", "dest": "10.1.0.9:41234",
                   "src_idc": "idc-b", "block_id": f"blk_{i}", "client_id": "DFSClient_job7",
                   "cross_idc": True},
        lambda i: {**read, "datanode": "dn-a-1", "src": "10.1.0.5:9866", "dest": "10.1.0.10:41234",
                   "src_idc": "idc-a", "block_id": f"blk_l{i}", "client_id": "DFSClient_job8",
                   "cross_idc": False},
    )  # fmt: skip
    run(store, s, 5)
    assert found(store) == {("hdfs_cross_idc_read", "10.1.0.9")}
    (f,) = fstore.read(store, kinds=["hdfs_cross_idc_read"])
    # the evidence is the last evaluation's that held: its 60 s window (10 s .. 70 s) holds the
    # last 10 reads
    assert f["evidence"]["bytes"] == 10 * (128 << 20)
    assert f["evidence"]["from_idc"] == "idc-b"
    blocks = f["evidence"]["blocks"]
    assert len(blocks) == 10 and not any(
        b.startswith("blk_l") for b in blocks
    )  # local reads never listed


def test_empty_store_is_quiet(store: Store) -> None:
    res = run(store, t0(), 15)
    # a tick per 10 s, every one skipped: no detector has rows to read
    assert (res.windows, res.skipped) == (0, 15 * 6) and res.findings == [] and res.failed == {}


def _fabric_ports(
    store: Store, s: datetime, util: dict[tuple[str, str, str], float], cap_bps: float = 400e9
) -> None:
    def port(sw: str, role: str, name: str, u: float) -> Series:
        return lambda i: {
            "switch": sw, "role": role, "port": name, "up": 1, "speed_bps": cap_bps,
            "tx_bytes_total": int(i * 10 * u * cap_bps / 8), "tx_utilization_ratio": u,
            "tx_bytes_per_second": u * cap_bps / 8,
        }  # fmt: skip

    ports = [port(sw, role, name, u) for (sw, role, name), u in util.items()]
    insert_series(store, SWITCH_PORT_SAMPLE, s, 31, 10, *ports)


def _lldp(store: Store, s: datetime, links: list[tuple[str, str, str, str]]) -> None:
    rows = []
    for a, ap, b, bp in links:
        rows.append(
            {
                "ts": ms(s),
                "cluster": "c",
                "local_device": a,
                "local_port": ap,
                "remote_device": b,
                "remote_port": bp,
                "source": "t",
            }
        )
        rows.append(
            {
                "ts": ms(s),
                "cluster": "c",
                "local_device": b,
                "local_port": bp,
                "remote_device": a,
                "remote_port": ap,
                "source": "t",
            }
        )
    store.insert(LLDP_LINK, LLDP_LINK.to_arrow(rows))


def test_ecmp_hot_member_of_a_leaf_uplink_group(store: Store) -> None:
    s = t0()
    util = {
        ("leaf1", "leaf", f"Ethernet{256 + k * 8}"): u
        for k, u in enumerate([0.85, 0.2, 0.22, 0.18])
    }
    util |= {
        ("leaf2", "leaf", f"Ethernet{256 + k * 8}"): u for k, u in enumerate([0.5, 0.5, 0.55, 0.45])
    }  # balanced
    util |= {(f"spine{k}", "spine", "Ethernet0"): 0.3 for k in range(4)} | {
        (f"spine{k}", "spine", "Ethernet8"): 0.3 for k in range(4)
    }
    util |= {("leaf1", "leaf", "Ethernet0"): 0.95}  # a busy downlink is not an ECMP member
    _fabric_ports(store, s, util)
    _lldp(
        store,
        s,
        [("leaf1", f"Ethernet{256 + k * 8}", f"spine{k}", "Ethernet0") for k in range(4)]
        + [("leaf2", f"Ethernet{256 + k * 8}", f"spine{k}", "Ethernet8") for k in range(4)]
        + [("leaf1", "Ethernet0", "gpu-0001", "eth2")],
    )
    run(store, s, 5)
    assert found(store) == {("ecmp_imbalance", "leaf1:Ethernet256")}
    (f,) = fstore.read(store, kinds=["ecmp_imbalance"])
    assert (
        f["evidence"]["max_over_mean"] == round(0.85 / 0.3625, 3)
        and len(f["evidence"]["group"]) == 4
    )


def test_dci_link_near_capacity(store: Store) -> None:
    s = t0()
    _fabric_ports(
        store,
        s,
        {
            ("dci-a", "dci", "Ethernet0"): 0.93,
            ("dci-b", "dci", "Ethernet0"): 0.3,
            ("dci-a", "dci", "Ethernet8"): 0.4,
            ("dci-b", "dci", "Ethernet8"): 0.4,
            ("dci-a", "superspine", "Ethernet64"): 0.99,  # IDC-internal side: not a DCI port
            ("spine1", "spine", "Ethernet0"): 0.99,
        },
    )
    _lldp(
        store,
        s,
        [
            ("dci-a", "Ethernet0", "dci-b", "Ethernet0"),
            ("dci-a", "Ethernet8", "dci-b", "Ethernet8"),
            ("dci-a", "Ethernet64", "spine1", "Ethernet0"),
        ],
    )  # the IDC-internal side is not the DCI
    run(store, s, 5)
    assert found(store) == {("dci_near_capacity", "dci-a:Ethernet0<->dci-b:Ethernet0")}
    (f,) = fstore.read(store, kinds=["dci_near_capacity"])
    assert (
        f["evidence"]["utilization_when_hot"] == 0.93
        and f["evidence"]["seconds_near_capacity"]
        == 30  # its trailing window: dci.min_seconds + 10 s
    )


def test_replication_backlog_growing_vs_draining(store: Store) -> None:
    from telemetry.records import DCI_USAGE, HDFS_NAMENODE_SAMPLE

    s = t0()
    insert_series(
        store, HDFS_NAMENODE_SAMPLE, s, 11, 30,
        lambda i: {"up": 1, "namenode": "nn-a", "under_replicated_blocks": 2_000 + i * 500,
                   "pending_replication_blocks": 100},  # growing backlog
        # large but draining: recovering, not a finding
        lambda i: {"up": 1, "namenode": "nn-b", "under_replicated_blocks": 9_000 - i * 800,
                   "pending_replication_blocks": 0},
    )  # fmt: skip
    dci = {
        "src_idc": "a", "dest_idc": "b", "interval_seconds": 60, "read_bytes_per_second": 0.0,
        "sync_write_bytes_per_second": 0.0, "total_bytes_per_second": 4e9,
        "async_replication_bytes_per_second": 4e9, "headroom_bytes_per_second": 1e8,
        "utilization_ratio": 0.98,
    }  # fmt: skip
    insert_series(store, DCI_USAGE, s, 11, 30, lambda i: dci)
    run(store, s, 5)
    assert found(store) == {("hdfs_replication_backlog", "nn-a")}
    (f,) = fstore.read(store, kinds=["hdfs_replication_backlog"])
    # the last evaluation (at 5 min) saw samples up to 270 s
    assert f["evidence"]["blocks_waiting_last"] == 2_000 + 9 * 500 + 100
    assert f["evidence"]["dci"][0]["async_bps"] == 4e9
