"""The switch source against a real redis-server holding SONiC's COUNTERS_DB and APPL_DB."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import redis

from exporters.switch.sonic import targets_from_config
from exporters.switch.source import SwitchSource
from tests.conftest import now_ms
from tests.integration.switch.conftest import FIX, load
from tests.integration.switch.once import once_kinds
from tests.unit.switch.expected import check_against_dump


def _source(port: int, **cfg: Any) -> SwitchSource:
    c = (
        SwitchSource.Config(**cfg)
        if cfg
        else SwitchSource.Config(
            switches=[{"name": "leaf01", "address": f"127.0.0.1:{port}", "role": "leaf"}],  # type: ignore[list-item]
            database_config=str(FIX / "database_config.json"),
        )
    )
    return SwitchSource(targets_from_config(c), c)


def _rows(src: SwitchSource) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for b in src.collect():
        out.setdefault(b.kind.name, []).extend(b.table.to_pylist())
    return out


def test_values_match_the_dump(sonic_redis: dict[str, Any]) -> None:
    src = _source(sonic_redis["port"])
    rows = _rows(src)
    assert check_against_dump(rows, sonic_redis["counters"]) > 800
    ports = {r["port"]: r for r in rows["switch_port_sample"]}
    assert ports["Ethernet0"]["speed_bps"] == 100e9 and ports["Ethernet0"]["role"] == "leaf"
    assert {r["local_port"]: r["remote_device"] for r in rows["lldp_link"]} == {
        "Ethernet0": "spine01", "Ethernet4": "spine02", "Ethernet8": "gpu-node-07"}  # fmt: skip
    assert rows["switch_status"][0]["up"] == 1
    assert src.stats.failed == 0


def test_wrong_type_key_is_named_and_skipped(sonic_redis: dict[str, Any], caplog) -> None:  # type: ignore[no-untyped-def]
    oid = sonic_redis["counters"]["COUNTERS_PORT_NAME_MAP"]["Ethernet8"]
    c = redis.Redis(port=sonic_redis["port"], db=2)
    c.delete(f"COUNTERS:{oid}")
    c.set(f"COUNTERS:{oid}", "12345")
    src = _source(sonic_redis["port"])
    rows = _rows(src)
    assert "Ethernet8" not in {r["port"] for r in rows["switch_port_sample"]}
    assert {r["port"] for r in rows["switch_port_sample"]} == {"Ethernet0", "Ethernet4"}
    assert src.stats.errors["wrong_type"] == 1 and set(src.stats.errors) <= set(src.reasons)
    assert any(f"leaf01 COUNTERS:{oid} (string)" in r.getMessage() for r in caplog.records)


def _silent_server() -> tuple[socket.socket, int]:
    """Accepts TCP connections and never answers: a switch whose redis hangs."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    # never accept(): the kernel completes the handshake from the backlog, then silence
    return s, s.getsockname()[1]


def test_down_switches_reported_while_others_go_on(
    sonic_redis: dict[str, Any], free_port: int, caplog: Any
) -> None:
    hung, hung_port = _silent_server()
    try:
        src = _source(
            0,
            switches=[
                {"name": "leaf01", "address": f"127.0.0.1:{sonic_redis['port']}"},
                {"name": "refused", "address": f"127.0.0.1:{free_port}"},
                {"name": "hung", "address": f"127.0.0.1:{hung_port}"},
            ],
            timeout_seconds=0.5,
        )
        rows = _rows(src)
        _rows(src)  # a second poll: still down, counted again, but not logged again
    finally:
        hung.close()
    st = {r["switch"]: r for r in rows["switch_status"]}
    assert st["leaf01"]["up"] == 1 and st["refused"]["up"] == 0 and st["hung"]["up"] == 0
    assert (
        "refused" in st["refused"]["error"].lower() or "connect" in st["refused"]["error"].lower()
    )
    assert "timeout" in st["hung"]["error"].lower() or "timed out" in st["hung"]["error"].lower()
    assert {r["switch"] for r in rows["switch_port_sample"]} == {"leaf01"}
    assert len(rows["switch_port_sample"]) == 3
    assert src.stats.extra["switches_down"] == 2
    assert src.stats.errors["switch_down"] == 4
    down_lines = [r.getMessage() for r in caplog.records if ": down:" in r.getMessage()]
    assert sorted(m.split(":")[0] for m in down_lines) == ["switch hung", "switch refused"]


def test_multi_asic(sonic_redis: dict[str, Any]) -> None:
    counters = json.loads(json.dumps(sonic_redis["counters"]))
    oid = counters["COUNTERS_PORT_NAME_MAP"]["Ethernet0"]
    counters[f"COUNTERS:{oid}"]["SAI_PORT_STAT_IF_IN_OCTETS"] = "777"
    load(redis.Redis(port=sonic_redis["port"], db=12), counters)
    p = sonic_redis["port"]
    src = _source(0, switches=[{"name": "spine01", "asics": [
        {"name": "asic0", "address": f"127.0.0.1:{p}"},
        {"name": "asic1", "address": f"127.0.0.1:{p}", "counters_db": 12, "appl_db": 13}]}])  # fmt: skip
    rows = _rows(src)
    got = {(r["asic"], r["port"]): r["rx_bytes_total"] for r in rows["switch_port_sample"]}
    assert got[("asic0", "Ethernet0")] == 800 and got[("asic1", "Ethernet0")] == 777
    assert {(r["asic"], r["up"]) for r in rows["switch_status"]} == {("asic0", 1), ("asic1", 1)}


def test_rows_land_in_the_store(sonic_redis: dict[str, Any], store: Any) -> None:
    src = _source(sonic_redis["port"], **{})
    for b in src.collect():  # stamped with the poll time: recent, so the table TTL keeps them
        assert abs(b.table.column("ts")[0].value - now_ms()) < 60_000
        store.insert(b.kind, b.table)
    q = store.query_rows(
        f"SELECT port, rx_bytes_total, pfc_rx_pause_total FROM {store.table('switch_port_sample')} ORDER BY port"
    )
    assert q == [("Ethernet0", 800, 2628), ("Ethernet4", 400, 4228), ("Ethernet8", 600, 7428)]


def test_cli_once_jsonl(sonic_redis: dict[str, Any], tmp_path: Path) -> None:
    kinds = once_kinds(tmp_path, "--switch", f"leaf01=127.0.0.1:{sonic_redis['port']}")
    assert kinds.count("switch_port_sample") == 3 and "lldp_link" in kinds
