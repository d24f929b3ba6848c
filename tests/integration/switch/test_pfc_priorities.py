"""All eight PFC priorities end to end: the switch source on the SONiC dump -> the embedded store
-> `pfc_unexpected_priority`, judged against the configured lossless/CNP priorities."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from exporters.switch.sonic import DumpSonicDb, Target
from exporters.switch.source import SwitchSource
from telemetry.correlate import Correlator
from telemetry.correlate import findings as fstore
from telemetry.records import KINDS
from telemetry.store import Store

FIX = Path(__file__).parents[2] / "fixtures" / "sonic"


def _start() -> datetime:
    now = datetime.now(UTC).replace(microsecond=0)
    return now.replace(minute=0, second=0) - timedelta(hours=2)


def _poll_twice(store: Store, start: datetime, bump: dict[tuple[str, str], int]) -> None:
    """Two polls of the dump one 10 s interval apart (the engine judges counter rates over its
    trailing `sliding.rate_seconds`); between them the counters in `bump` ((port, SAI
    counter) -> frames) rise, everything else stays put."""
    db: dict[str, Any] = json.loads((FIX / "counters_db.json").read_text())
    clock = iter([start.timestamp() + 30, start.timestamp() + 40])
    src = SwitchSource([Target("leaf1", "", "", DumpSonicDb({"COUNTERS_DB": db}))],
                       clock=lambda: next(clock))  # fmt: skip
    for i in range(2):
        if i:
            for (port, name), n in bump.items():
                h = db[f"COUNTERS:{db['COUNTERS_PORT_NAME_MAP'][port]}"]
                h[name] = str(int(h[name]) + n)
        for b in src.collect():
            rows = [{**r, "cluster": "c"} for r in b.table.to_pylist()]
            store.insert(b.kind, KINDS[b.kind.name].to_arrow(rows))


def _findings(store: Store, start: datetime, **thresholds: Any) -> dict[str, dict[str, Any]]:
    Correlator(
        store, cluster="c", thresholds={"pfc": thresholds}, only=["pfc_unexpected_priority"]
    ).run(start, start + timedelta(minutes=5))
    return {f["subject"]: f for f in fstore.read(store) if f["kind"] == "pfc_unexpected_priority"}


def test_every_priority_lands_in_the_store(store: Store) -> None:
    s = _start()
    _poll_twice(store, s, {})
    rows = store.query_rows(
        f"SELECT port, priority, rx_pause_total, tx_pause_total FROM "
        f"{store.table('switch_priority_sample')} ORDER BY ts, port, priority"
    )
    assert len(rows) == 2 * 3 * 8
    db = json.loads((FIX / "counters_db.json").read_text())
    for port, p, rx, tx in rows[:24]:
        h = db[f"COUNTERS:{db['COUNTERS_PORT_NAME_MAP'][port]}"]
        assert (rx, tx) == (
            int(h[f"SAI_PORT_STAT_PFC_{p}_RX_PKTS"]),
            int(h[f"SAI_PORT_STAT_PFC_{p}_TX_PKTS"]),
        )


def test_pauses_on_a_cnp_priority_are_found_lossless_ones_are_not(store: Store) -> None:
    s = _start()
    _poll_twice(
        store,
        s,
        {
            ("Ethernet0", "SAI_PORT_STAT_PFC_3_RX_PKTS"): 50_000,  # lossless: expected
            ("Ethernet4", "SAI_PORT_STAT_PFC_3_TX_PKTS"): 20_000,
            ("Ethernet4", "SAI_PORT_STAT_PFC_6_TX_PKTS"): 500,  # CNP priority: never paused
            ("Ethernet8", "SAI_PORT_STAT_PFC_1_RX_PKTS"): 5,  # below unexpected_pauses
        },
    )
    f = _findings(store, s)
    assert set(f) == {"leaf1:Ethernet4"}
    e = f["leaf1:Ethernet4"]
    assert e["severity"] == "critical" and e["subject_type"] == "port"
    ev = json.loads(e["evidence"]) if isinstance(e["evidence"], str) else e["evidence"]
    assert ev["priorities"] == {"6": {"rx_pauses": 0, "tx_pauses": 500}}
    assert ev["lossless_priorities"] == [3] and ev["cnp_priorities"] == [6]


def test_lossless_priorities_come_from_config(store: Store) -> None:
    """The same fabric judged with RoCE on priority 4: priority 3's pauses are now the
    misconfiguration (and nothing is special about 3 in code)."""
    s = _start()
    _poll_twice(store, s, {("Ethernet0", "SAI_PORT_STAT_PFC_3_RX_PKTS"): 50_000})
    f = _findings(store, s, lossless_priorities=[4])
    assert set(f) == {"leaf1:Ethernet0"}
    assert f["leaf1:Ethernet0"]["severity"] == "warning"
    assert "priority 3," in f["leaf1:Ethernet0"]["summary"]


def test_nic_priorities_are_judged_alike(store: Store) -> None:
    s = _start()
    kind = KINDS["nic_priority_sample"]
    rows = [
        {"ts": int((s + timedelta(seconds=30 + 10 * i)).timestamp() * 1000), "cluster": "c",
         "node": "n1", "netdev": "eth2", "device": "mlx5_2", "priority": p,
         "rx_pause_total": 0, "tx_pause_total": (1000 * i if p == 5 else 7 if p == 3 else 0)}
        for i in range(4) for p in range(8)
    ]  # fmt: skip
    store.insert(kind, kind.to_arrow(rows))
    f = _findings(store, s)
    assert set(f) == {"n1/mlx5_2"}
    assert f["n1/mlx5_2"]["subject_type"] == "nic" and "priority 5," in f["n1/mlx5_2"]["summary"]
