"""The switch source on the real COUNTERS_DB dump (mock-table and sonic-db-dump layouts)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from exporters.switch import counters as C
from exporters.switch.sonic import (
    DumpSonicDb,
    Target,
    db_ids_from_database_config,
    targets_from_dump,
)
from exporters.switch.source import SwitchSource
from telemetry.errors import UserError
from tests.unit.switch.expected import check_against_dump

FIX = Path(__file__).parents[2] / "fixtures" / "sonic"


def _by_kind(src: SwitchSource) -> dict[str, list[dict[str, Any]]]:
    return {b.kind.name: b.table.to_pylist() for b in src.collect()}


def _db() -> dict[str, Any]:
    return json.loads((FIX / "counters_db.json").read_text())


def test_dump_value_by_value() -> None:
    src = SwitchSource(targets_from_dump(FIX / "counters_db.json", "sw1"))
    rows = _by_kind(src)
    assert check_against_dump(rows, _db()) > 800
    [st] = rows["switch_status"]
    assert (st["switch"], st["up"], st["ports"], st["error"]) == ("sw1", 1, 3, "")


def test_appl_db_speed_status_lldp_and_ecmp(tmp_path: Path) -> None:
    d = tmp_path / "leaf01"
    d.mkdir()
    shutil.copy(FIX / "counters_db.json", d / "counters_db.json")
    shutil.copy(FIX / "appl_db.json", d / "appl_db.json")
    src = SwitchSource(targets_from_dump(tmp_path), SwitchSource.Config(uplink_neighbor="^spine"))
    rows = _by_kind(src)
    ports = {r["port"]: r for r in rows["switch_port_sample"]}
    assert (ports["Ethernet0"]["up"], ports["Ethernet0"]["speed_bps"]) == (1, 100e9)
    assert ports["Ethernet8"]["up"] == 0
    # RATES TX_BPS is bytes/s: 1.5e9 B/s on 100 Gb/s = 0.12
    assert ports["Ethernet0"]["tx_utilization_ratio"] == pytest.approx(1.5e9 * 8 / 100e9)
    lldp = {r["local_port"]: r for r in rows["lldp_link"]}
    assert (
        lldp["Ethernet0"]["remote_device"] == "spine01"
        and lldp["Ethernet0"]["remote_port"] == "Ethernet120"
    )
    assert lldp["Ethernet8"]["remote_port"] == "ens1f0np0"  # MAC port id -> description
    assert all(r["local_device"] == "leaf01" and r["source"] == "sonic" for r in rows["lldp_link"])
    [g] = rows["ecmp_group_sample"]
    assert (g["switch"], g["group"], g["members"]) == ("leaf01", "uplinks", "Ethernet0,Ethernet4")
    assert g["hottest_member"] == "Ethernet0"
    mean = (1.5e9 + 204848) / 2
    assert g["max_mean_ratio"] == pytest.approx(1.5e9 / mean)


def test_sonic_db_dump_layout_and_wrong_type(caplog) -> None:  # type: ignore[no-untyped-def]
    db = _db()
    wrapped: dict[str, Any] = {
        k: {"type": "hash", "value": v, "ttl": -0.001, "expireat": 0} for k, v in db.items()
    }
    oid = db["COUNTERS_PORT_NAME_MAP"]["Ethernet4"]
    wrapped[f"COUNTERS:{oid}"] = {
        "type": "string",
        "value": "garbage",
        "ttl": -0.001,
        "expireat": 0,
    }
    src = SwitchSource([Target("sw", "", "", DumpSonicDb({"COUNTERS_DB": wrapped}))])
    rows = _by_kind(src)
    assert {r["port"] for r in rows["switch_port_sample"]} == {
        "Ethernet0",
        "Ethernet8",
    }  # no guessed row
    # the label is the bounded reason; the key is named in the log line only
    assert src.stats.errors == {"wrong_type": 1, "missing_counters": 1}
    assert any(
        "wrong_type" in r.getMessage() and f"sw COUNTERS:{oid} (string)" in r.getMessage()
        for r in caplog.records
    )


def test_bad_value_is_null_and_named() -> None:
    db = _db()
    oid = db["COUNTERS_PORT_NAME_MAP"]["Ethernet0"]
    db[f"COUNTERS:{oid}"]["SAI_PORT_STAT_IF_IN_OCTETS"] = "12abc"
    db[f"COUNTERS:{oid}"]["SAI_PORT_STAT_PFC_5_RX_PKTS"] = "-3"
    src = SwitchSource([Target("sw", "", "", DumpSonicDb({"COUNTERS_DB": db}))])
    rows = _by_kind(src)
    p = {r["port"]: r for r in rows["switch_port_sample"]}["Ethernet0"]
    assert p["rx_bytes_total"] is None and p["pfc_rx_pause_total"] is None
    assert p["tx_bytes_total"] == 1000  # the rest of the port is still read
    prio = {(r["port"], r["priority"]): r for r in rows["switch_priority_sample"]}
    assert prio[("Ethernet0", 5)]["rx_pause_total"] is None  # not a negative number
    assert prio[("Ethernet0", 5)]["tx_pause_total"] == 215
    assert prio[("Ethernet0", 4)]["rx_pause_total"] == 204
    # IF_IN_OCTETS once; PFC_5_RX twice: in the all-priority sum and in priority 5's row
    assert src.stats.errors["bad_value"] == 3


def test_derived_rates_and_counter_reset() -> None:
    db = _db()
    for k in [k for k in db if k.startswith("RATES:")]:
        del db[k]
    oid = db["COUNTERS_PORT_NAME_MAP"]["Ethernet0"]
    h = db[f"COUNTERS:{oid}"]
    now = [1000.0]
    src = SwitchSource(
        [Target("sw", "", "", DumpSonicDb({"COUNTERS_DB": db}))], clock=lambda: now[0]
    )
    first = {r["port"]: r for r in _by_kind(src)["switch_port_sample"]}
    assert first["Ethernet0"]["tx_bytes_per_second"] is None  # nothing to compare with yet
    h["SAI_PORT_STAT_IF_IN_OCTETS"] = str(800 + 2000)  # +2000 B in 2 s
    h["SAI_PORT_STAT_IF_OUT_OCTETS"] = "10"  # went back: the counter was reset
    now[0] = 1002.0
    p = {r["port"]: r for r in _by_kind(src)["switch_port_sample"]}["Ethernet0"]
    assert p["rx_bytes_per_second"] == 1000.0
    assert p["tx_bytes_per_second"] is None  # never a negative rate
    assert p["tx_bytes_total"] == 10  # the raw counter is stored as read
    assert src.resets == 1 and src.stats.extra["counter_resets"] == 1


def test_dump_errors_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such file"):
        targets_from_dump(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(UserError, match="not JSON"):
        targets_from_dump(tmp_path / "bad.json")[0]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserError, match=r"no counters_db\.json"):
        targets_from_dump(empty)


def test_database_config_ids() -> None:
    ids = db_ids_from_database_config(FIX / "database_config.json")
    assert ids["COUNTERS_DB"] == 2 and ids["APPL_DB"] == 0


def test_mapping_file_covers_record_fields() -> None:
    from exporters.switch.gnmi_openconfig import OC_CSV
    from exporters.switch.snmp import COLUMNS, PFC_COLUMNS, SNMP_CSV
    from telemetry.records import KINDS

    for table in (C.CSV_PATH, OC_CSV, SNMP_CSV):  # one shape, one reader, three transports
        for m in C.load_mappings(table):
            assert m.field in KINDS[C.RECORD_KINDS[m.kind]].by_name, (table.name, m.field)
    # every SNMP object the mapping names is one the walk reads
    assert {t for m in C.load_mappings(SNMP_CSV) for alt in m.alternatives for t in alt} <= set(
        COLUMNS
    ) | set(PFC_COLUMNS)
    # every per-priority field is read for every priority
    prio = {m.field for m in C.load_mappings() if m.kind == "priority"}
    assert prio == {f.name for f in KINDS["switch_priority_sample"].values()}


def test_prom_shows_every_pfc_priority_counter_of_every_port() -> None:
    """Acceptance: each SAI_PORT_STAT_PFC_n_RX/TX_PKTS of every port in the dump is a sample
    with its priority as a label, value for value (the CLI, as an operator runs it)."""
    import re
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "telemetry.cli", "switch", "--from", str(FIX / "counters_db.json"),
         "--name", "sw1", "--once", "--output", "prom"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    got = {}
    for m in re.finditer(
        r"^railscope_switch_priority_(rx|tx)_pause_total\{([^}]*)\} (\S+)$", out, re.M
    ):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        got[(labels["port"], int(labels["priority"]), m.group(1))] = float(m.group(3))
    db = _db()
    want = {}
    for port, oid in db["COUNTERS_PORT_NAME_MAP"].items():
        for k, v in db[f"COUNTERS:{oid}"].items():
            pm = re.fullmatch(r"SAI_PORT_STAT_PFC_(\d)_(RX|TX)_PKTS", k)
            if pm:
                want[(port, int(pm.group(1)), pm.group(2).lower())] = float(v)
    assert len(want) == 3 * 8 * 2
    assert got == want
