"""The gNMI switch source against a real gNMI target (grpcio + pygnmi's gnmi.proto on loopback):
first checked with pygnmi's own client, then railscope: SONiC and OpenConfig dialects, stream,
poll and Get, TLS with a self-signed CA, a wrong password, a hanging target, a target that
streams garbage, and the same records as the Redis path value by value."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exporters.switch.config import SwitchConfig, SwitchSourceConfig
from exporters.switch.source import SwitchSource
from tests.integration.switch.gnmi_target import Target, load_target, serve
from tests.integration.switch.once import once_kinds
from tests.unit.switch.expected import expected_ports, expected_priorities

FIX = Path(__file__).parents[2] / "fixtures"
INTERVAL = 0.5


@pytest.fixture
def target(request: pytest.FixtureRequest) -> Iterator[tuple[Target, int]]:
    kw = getattr(request, "param", {})
    t = load_target(**kw)
    server, port = serve(t)
    yield t, port
    server.stop(0)


def _source(port: int, **gnmi: Any) -> SwitchSource:
    sw = SwitchConfig(name="leaf01", role="leaf", gnmi={"address": f"127.0.0.1:{port}", **gnmi})
    cfg = SwitchSourceConfig(switches=[sw], timeout_seconds=3)
    return SwitchSource([], cfg, gnmi=[sw], interval=INTERVAL)


def _rows(src: SwitchSource) -> dict[str, list[dict[str, Any]]]:
    return {b.kind.name: b.table.to_pylist() for b in src.collect()}


# pygnmi reads a STREAM subscription in a thread of its own, which re-raises the CANCELLED its
# RPC ends with when the client closes the channel under it (pygnmi.client._Subscriber)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_fixture_answers_pygnmi_as_gnmi_specifies(target: tuple[Target, int]) -> None:
    """The fixture is a gNMI target a real client understands, before railscope meets it."""
    from pygnmi.client import gNMIclient

    t, port = target
    with gNMIclient(target=("127.0.0.1", port), insecure=True) as gc:
        caps = gc.capabilities()
        assert "json_ietf" in caps["supported_encodings"]
        got = gc.get(target="COUNTERS_DB", path=["COUNTERS/Ethernet*"], encoding="json_ietf")
        [n] = got["notification"]
        [u] = n["update"]
        oid = t.counters["COUNTERS_PORT_NAME_MAP"]["Ethernet4"]
        assert u["val"]["Ethernet4"] == t.counters[f"COUNTERS:{oid}"]
        assert n["timestamp"] == t.base_ns
        oc = gc.get(path=["interfaces/interface[name=*]/state/counters"], encoding="json_ietf")
        ups = oc["notification"][0]["update"]
        assert {u["path"] for u in ups} == {
            f"interfaces/interface[name={p}]/state/counters"
            for p in ("Ethernet0", "Ethernet4", "Ethernet8")
        }
        stream = gc.subscribe2(
            subscribe={
                "subscription": [{"path": "COUNTERS/Ethernet*", "mode": "sample",
                                  "sample_interval": int(INTERVAL * 1e9)}],
                "mode": "stream", "encoding": "json_ietf",
            },
            target="COUNTERS_DB",
        )  # fmt: skip
        first = next(stream)
        t0 = time.monotonic()
        assert first["update"]["update"][0]["val"]["Ethernet4"] == t.counters[f"COUNTERS:{oid}"]
        second = next(stream)  # the next SAMPLE, one interval later, with the switch's time
        while "update" not in second:  # pygnmi may hand the sync_response on too
            second = next(stream)
        assert time.monotonic() - t0 >= INTERVAL * 0.5
        assert second["update"]["timestamp"] > first["update"]["timestamp"]


def test_fixture_waits_for_the_next_state_without_polling(
    target: tuple[Target, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The target's streams wait on the state (set_state) and on the call's end, never by
    sleeping in a loop: bench/switch.py's 256 targets share two cores with the collector they
    feed, and polling every 5 ms took 1.3 of them. A SAMPLE an hour apart arrives at once when
    the state is replaced, stamped with the switch's time; ON_CHANGE carries APPL_DB again."""
    import grpc
    from pygnmi.spec.v080 import gnmi_pb2 as pb
    from pygnmi.spec.v080 import gnmi_pb2_grpc

    from exporters.switch.gnmi_decode import parse_path

    t, port = target
    sleeps: list[float] = []

    class Clock:
        """The target module's `time`, its sleeps recorded instead of slept (the `time` module
        itself is left alone: other threads of the test process keep their sleeps)."""

        def __getattr__(self, name: str) -> Any:
            return getattr(time, name)

        def sleep(self, s: float) -> None:
            sleeps.append(s)

    monkeypatch.setattr("telemetry.sim.gnmi_target.time", Clock())
    hour = 3600 * 10**9

    def subscribe(stub: Any, target: str, path: str, mode: Any) -> Any:
        sub = pb.Subscription(path=parse_path(path), mode=mode, sample_interval=hour)
        req = pb.SubscribeRequest(
            subscribe=pb.SubscriptionList(prefix=pb.Path(target=target), subscription=[sub],
                                          mode=pb.SubscriptionList.STREAM,
                                          encoding=pb.Encoding.JSON_IETF)
        )  # fmt: skip
        call = stub.Subscribe(iter([req]), timeout=60)
        first = [r.WhichOneof("response") for r in itertools.islice(call, 2)]
        assert first == ["update", "sync_response"]
        return call

    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        stub = gnmi_pb2_grpc.gNMIStub(ch)
        sample = subscribe(stub, "COUNTERS_DB", "COUNTERS/Ethernet*", pb.SubscriptionMode.SAMPLE)
        change = subscribe(stub, "APPL_DB", "PORT_TABLE", pb.SubscriptionMode.ON_CHANGE)
        oid = t.counters["COUNTERS_PORT_NAME_MAP"]["Ethernet4"]
        counters = {**t.counters, f"COUNTERS:{oid}": {"SAI_PORT_STAT_IF_IN_OCTETS": "42"}}
        appl = {**t.appl, "PORT_TABLE:Ethernet4": {"oper_status": "down"}}
        t.set_state(counters, appl, t.base_ns + hour // 2)
        got, table = next(sample).update, next(change).update
        for call in (sample, change):
            call.cancel()
    assert got.timestamp == table.timestamp == t.base_ns + hour // 2
    assert json.loads(got.update[0].val.json_ietf_val)["Ethernet4"] == {
        "SAI_PORT_STAT_IF_IN_OCTETS": "42"
    }
    assert json.loads(table.update[0].val.json_ietf_val)["Ethernet4"] == {"oper_status": "down"}
    assert sleeps == []


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # pygnmi
@pytest.mark.parametrize("target", [{"phase_s": 0.25}], indirect=True)
def test_fixture_phase_delays_the_second_sample_only(target: tuple[Target, int]) -> None:
    """bench/switch.py --phases spread: a target's SAMPLEs after the first come `phase_s`
    later, once; from then on one interval apart."""
    from pygnmi.client import gNMIclient

    t, port = target
    waits: list[float] = []
    changed = t._changed
    t._changed = lambda seen, within, context: waits.append(within) or changed(seen, 0, context)  # type: ignore[method-assign]
    with gNMIclient(target=("127.0.0.1", port), insecure=True) as gc:
        stream = gc.subscribe2(
            subscribe={"subscription": [{"path": "COUNTERS/Ethernet*", "mode": "sample",
                                         "sample_interval": int(INTERVAL * 1e9)}],
                       "mode": "stream", "encoding": "json_ietf"},
            target="COUNTERS_DB",
        )  # fmt: skip
        samples = 0
        while samples < 3:
            samples += "update" in next(stream)
    assert waits[:2] == [INTERVAL + 0.25, INTERVAL]


def test_fixture_serves_sonic_field_paths_as_sonic_does(target: tuple[Target, int]) -> None:
    """`COUNTERS/Ethernet*/<counter>` (sonic-gnmi virtual_db.go, v2rEthPortFieldStats): one
    counter of every port as {port: {counter: "n"}}; a STREAM sends each SAMPLE path in a
    notification of its own. Checked with pygnmi's client."""
    from pygnmi.client import gNMIclient

    t, port = target
    pfc3, octets = "SAI_PORT_STAT_PFC_3_RX_PKTS", "SAI_PORT_STAT_IF_IN_OCTETS"
    pmap = t.counters["COUNTERS_PORT_NAME_MAP"]
    with gNMIclient(target=("127.0.0.1", port), insecure=True) as gc:
        got = gc.get(
            target="COUNTERS_DB", path=[f"COUNTERS/Ethernet*/{pfc3}"], encoding="json_ietf"
        )
        [n] = got["notification"]
        [u] = n["update"]
        assert u["val"] == {p: {pfc3: t.counters[f"COUNTERS:{o}"][pfc3]} for p, o in pmap.items()}
        absent = gc.get(target="COUNTERS_DB", path=["COUNTERS/Ethernet*/NO_SUCH_COUNTER"],
                        encoding="json_ietf")  # fmt: skip
        assert absent["notification"][0]["update"][0]["val"] == {}  # no port has it: left out
        stream = gc.subscribe2(
            subscribe={
                "subscription": [{"path": f"COUNTERS/Ethernet*/{c}", "mode": "sample",
                                  "sample_interval": int(INTERVAL * 1e9)} for c in (pfc3, octets)],
                "mode": "stream", "encoding": "json_ietf",
            },
            target="COUNTERS_DB",
        )  # fmt: skip
        next(stream)  # pygnmi hands the updates before the sync_response on as one
        seen = []
        while len(seen) < 2:
            r = next(stream)
            if "update" in r:
                seen.append(r["update"]["update"])
        assert [len(ups) for ups in seen] == [1, 1]  # one path per notification
        assert {next(iter(ups[0]["val"]["Ethernet4"])) for ups in seen} == {pfc3, octets}


def test_sonic_stream_gives_the_dump_values(target: tuple[Target, int]) -> None:
    t, port = target
    src = _source(port)
    try:
        rows = _rows(src)
    finally:
        src.close()
    assert t.requests[:1] == ["Get"] and "STREAM" in t.requests
    ports = {r["port"]: r for r in rows["switch_port_sample"]}
    exp = expected_ports(t.counters)
    assert set(ports) == set(exp)
    n = 0
    for name, e in exp.items():
        for k, v in e.items():
            if k.endswith("_per_second"):
                continue  # RATES:* is not a telemetry path; rates are derived (docs)
            assert ports[name][k] == v, (name, k)
            n += 1
        # the switch's own update time (an hour behind us), not the collector's
        ts_ms = int(ports[name]["ts"].timestamp() * 1000)
        assert t.base_ns // 10**6 <= ts_ms <= t.base_ns // 10**6 + 10_000
    for q in rows["switch_queue_sample"]:  # queues too carry the switch's time
        assert t.base_ns // 10**6 <= int(q["ts"].timestamp() * 1000) <= t.base_ns // 10**6 + 10_000
    prios = {(r["port"], r["priority"]): r for r in rows["switch_priority_sample"]}
    for key, e in expected_priorities(t.counters).items():
        assert prios[key]["rx_pause_total"] == e["rx_pause_total"]
        assert prios[key]["tx_pause_total"] == e["tx_pause_total"]
        n += 2
    assert n >= 80
    assert ports["Ethernet0"]["up"] == 1 and ports["Ethernet0"]["speed_bps"] == 100e9
    assert {r["local_port"] for r in rows["lldp_link"]} == {"Ethernet0", "Ethernet4", "Ethernet8"}
    [st] = rows["switch_status"]
    assert st["up"] == 1 and st["ports"] == 3


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # pygnmi
@pytest.mark.parametrize("target", [{"aliases": True}], indirect=True)
def test_fixture_keys_counters_by_vendor_alias_as_sonic_gnmi_does(
    target: tuple[Target, int],
) -> None:
    """sonic-gnmi keys `COUNTERS/Ethernet*` (and its Queues and per-counter paths) by each
    port's CONFIG_DB alias, and answers a Get of CONFIG_DB `PORT` with the table's hashes by
    key. Checked with pygnmi's client on the sonic-utilities mock tables (Ethernet4 = etp2)."""
    from pygnmi.client import gNMIclient

    t, port = target
    oid = t.counters["COUNTERS_PORT_NAME_MAP"]["Ethernet4"]
    with gNMIclient(target=("127.0.0.1", port), insecure=True) as gc:

        def val(target: str, path: str) -> Any:
            got = gc.get(target=target, path=[path], encoding="json_ietf")
            return got["notification"][0]["update"][0]["val"]

        assert val("CONFIG_DB", "PORT")["Ethernet4"]["alias"] == "etp2"
        ports = val("COUNTERS_DB", "COUNTERS/Ethernet*")
        assert set(ports) == {"etp1", "etp2", "etp3"}
        assert ports["etp2"] == t.counters[f"COUNTERS:{oid}"]
        assert "etp2:3" in val("COUNTERS_DB", "COUNTERS/Ethernet*/Queues")
        assert set(val("COUNTERS_DB", "COUNTERS/Ethernet*/SAI_PORT_STAT_IF_IN_OCTETS")) == set(
            ports
        )


@pytest.mark.parametrize(
    ("target", "sonic_paths"),
    [
        ({}, "fields"),
        ({}, "whole"),
        ({"behaviour": "no_fields"}, "fields"),
        ({"aliases": True}, "whole"),
        ({"aliases": True}, "fields"),
    ],
    indirect=["target"],
)
def test_redis_and_gnmi_give_the_same_records(
    target: tuple[Target, int],
    sonic_redis: dict[str, Any],
    sonic_paths: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The two transports on the same switch state: every port, priority, queue and LLDP
    value equal (rates aside: Redis has RATES:*, gNMI derives them on the next poll), whether
    gNMI subscribes one path per counter (`sonic_paths: fields`), the whole hashes, or falls
    back to the whole hashes from a switch that refuses the per-counter paths; and whether
    the telemetry service keys its answers by SONiC name or, as sonic-gnmi does where CONFIG_DB
    gives ports an alias, by vendor alias (named back by CONFIG_DB `PORT`)."""
    from exporters.switch.gnmi_sonic import SONIC_FIELD_SAMPLE
    from exporters.switch.sonic import targets_from_config

    t, port = target
    rcfg = SwitchSourceConfig(
        switches=[{"name": "leaf01", "role": "leaf", "address": f"127.0.0.1:{sonic_redis['port']}"}]
    )
    redis_rows = _rows(SwitchSource(targets_from_config(rcfg), rcfg))
    caplog.set_level(logging.WARNING)
    src = _source(port, sonic_paths=sonic_paths)
    try:
        gnmi_rows = _rows(src)
    finally:
        src.close()
    fields = list(SONIC_FIELD_SAMPLE[:-1])
    refused = [
        r.getMessage() for r in caplog.records if "refused COUNTERS/Ethernet*/" in r.getMessage()
    ]
    if t.behaviour == "no_fields":  # asked once, refused, then the whole hashes
        assert t.paths.index(fields[0]) < t.paths.index("COUNTERS/Ethernet*")
        assert len(refused) == 1 and "leaf01" in refused[0] and "NOT_FOUND" in refused[0]
        assert src.stats.errors.get("unreachable", 0) == 0
    elif sonic_paths == "fields":
        assert set(fields) <= set(t.paths) and "COUNTERS/Ethernet*" not in t.paths
        assert "COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_5_TX_PKTS" in fields and not refused
    else:
        assert "COUNTERS/Ethernet*" in t.paths and not set(fields) & set(t.paths)
    skip = {"ts", "rx_bytes_per_second", "tx_bytes_per_second", "tx_utilization_ratio"}
    keys = {
        "switch_port_sample": ("port",),
        "switch_priority_sample": ("port", "priority"),
        "switch_queue_sample": ("port", "queue_type", "queue"),
        "lldp_link": ("local_port",),
    }
    compared = 0
    for kind, key in keys.items():
        a = {tuple(r[k] for k in key): r for r in redis_rows[kind]}
        b = {tuple(r[k] for k in key): r for r in gnmi_rows[kind]}
        if kind == "switch_queue_sample":
            # PG rows and USER_WATERMARKS are not telemetry paths: queues known only by their
            # watermark (no COUNTERS hash) have no gNMI row
            a = {
                k: v
                for k, v in a.items()
                if k[1] != "pg" and any(v[f] is not None for f in v if f.endswith("_total"))
            }
        assert set(a) == set(b), kind
        for k, r in a.items():
            for f, v in r.items():
                if f in skip or (kind == "switch_queue_sample" and f == "watermark_bytes"):
                    continue
                assert b[k][f] == v, (kind, k, f, b[k][f], v)
                compared += 1
    assert compared > 500


@pytest.mark.parametrize("target", [{"aliases": True, "behaviour": "no_config"}], indirect=True)
def test_alias_keys_without_config_db_are_named_not_guessed(
    target: tuple[Target, int], caplog: pytest.LogCaptureFixture
) -> None:
    """A switch that keys COUNTERS by alias but does not let CONFIG_DB be read: said once, and
    each port of the name maps is `missing_counters`; no alias becomes a port record."""
    _, port = target
    caplog.set_level(logging.WARNING)
    src = _source(port)
    try:
        rows = _rows(src)
    finally:
        src.close()
    said = [r.getMessage() for r in caplog.records if "CONFIG_DB PORT" in r.getMessage()]
    assert len(said) == 1 and "NOT_FOUND" in said[0] and "leaf01" in said[0]
    assert rows.get("switch_port_sample", []) == []
    assert src.stats.errors.get("missing_counters") == 3


def test_openconfig_dialect(target: tuple[Target, int]) -> None:
    t, port = target
    src = _source(port, dialect="openconfig")
    try:
        rows = _rows(src)
    finally:
        src.close()
    ports = {r["port"]: r for r in rows["switch_port_sample"]}
    exp = expected_ports(t.counters)
    for name in exp:
        for f in ("rx_bytes_total", "tx_bytes_total", "rx_packets_total", "rx_discards_total",
                  "rx_errors_total"):  # fmt: skip
            assert ports[name][f] == exp[name][f], (name, f)
        assert ports[name]["pfc_rx_pause_total"] is None  # no OpenConfig leaf: null, not 0
    assert ports["Ethernet0"]["speed_bps"] == 100e9 and ports["Ethernet0"]["up"] == 1
    q = {(r["port"], r["queue"]): r for r in rows["switch_queue_sample"]}
    oid = next(o for n, o in t.counters["COUNTERS_QUEUE_NAME_MAP"].items() if n == "Ethernet0:0")
    assert q[("Ethernet0", 0)]["tx_packets_total"] == int(
        t.counters[f"COUNTERS:{oid}"]["SAI_QUEUE_STAT_PACKETS"]
    )
    lldp = {r["local_port"]: r for r in rows["lldp_link"]}
    assert lldp["Ethernet0"]["remote_device"] == "spine01"
    assert lldp["Ethernet8"]["remote_port"] == "ens1f0np0"  # MAC port id -> description
    assert "switch_priority_sample" not in rows  # openconfig_pfc off: the path is not asked


def test_openconfig_pfc_per_priority(target: tuple[Target, int]) -> None:
    """openconfig_pfc: Enterprise SONiC's openconfig-qos-ext PFC statistics give every
    priority's pause frames, equal to the dump's SAI_PORT_STAT_PFC_n counters (what the Redis
    and SONiC-telemetry paths read), and the all-priority sums."""
    t, port = target
    src = _source(port, dialect="openconfig", openconfig_pfc=True)
    try:
        rows = _rows(src)
    finally:
        src.close()
    prios = {(r["port"], r["priority"]): r for r in rows["switch_priority_sample"]}
    exp = expected_priorities(t.counters)
    assert set(prios) == set(exp) and len(exp) == 24
    for key, e in exp.items():
        assert prios[key]["rx_pause_total"] == e["rx_pause_total"], key
        assert prios[key]["tx_pause_total"] == e["tx_pause_total"], key
    ports = {r["port"]: r for r in rows["switch_port_sample"]}
    for name, e in expected_ports(t.counters).items():
        assert ports[name]["pfc_rx_pause_total"] == e["pfc_rx_pause_total"], name
        assert ports[name]["pfc_tx_pause_total"] == e["pfc_tx_pause_total"], name


@pytest.mark.parametrize(
    ("target", "used"),
    [({"behaviour": "no_stream"}, "POLL"), ({"behaviour": "no_subscribe"}, "Get")],
    indirect=["target"],
)
def test_poll_and_get_fallbacks(target: tuple[Target, int], used: str) -> None:
    t, port = target
    src = _source(port)
    try:
        rows = _rows(src)
        time.sleep(INTERVAL * 2.5)
        again = _rows(src)
    finally:
        src.close()
    assert used in t.requests
    assert len(rows["switch_port_sample"]) == 3 and again["switch_status"][0]["up"] == 1
    if used == "POLL":
        assert "poll" in t.requests  # a Poll message per interval, answered


@pytest.mark.parametrize("target", [{"users": {"admin": "s3cret"}}], indirect=True)
def test_password_and_wrong_password(
    target: tuple[Target, int], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _, port = target
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")
    ok = _source(port, username="admin", password_file=str(pw))
    try:
        assert _rows(ok)["switch_status"][0]["up"] == 1
    finally:
        ok.close()
    caplog.set_level(logging.WARNING)
    bad = _source(port, username="admin", password="nope")
    try:
        rows = _rows(bad)
    finally:
        bad.close()
    [st] = rows["switch_status"]
    assert st["up"] == 0 and "UNAUTHENTICATED" in st["error"]
    assert "switch_port_sample" not in rows
    assert bad.stats.errors.get("auth_failed", 0) >= 1
    lines = [r.getMessage() for r in caplog.records if "auth_failed" in r.getMessage()]
    assert lines and "leaf01" in lines[0]


@pytest.mark.parametrize("target", [{"behaviour": "hang"}], indirect=True)
def test_hanging_target_is_down_not_stuck(target: tuple[Target, int]) -> None:
    _, port = target
    src = _source(port)
    t0 = time.monotonic()
    try:
        rows = _rows(src)
        time.sleep(1.0)
        again = _rows(src)
    finally:
        src.close()
    assert time.monotonic() - t0 < 15
    assert rows["switch_status"][0]["up"] == 0 and "switch_port_sample" not in rows
    assert again["switch_status"][0]["up"] == 0
    assert src.stats.errors.get("stream_stalled", 0) >= 1


@pytest.mark.parametrize("target", [{"behaviour": "garbage"}], indirect=True)
def test_garbage_is_named_never_stored(
    target: tuple[Target, int], caplog: pytest.LogCaptureFixture
) -> None:
    _, port = target
    caplog.set_level(logging.WARNING)
    src = _source(port)
    try:
        rows = _rows(src)
    finally:
        src.close()
    assert "switch_port_sample" not in rows  # the port counters were not JSON: no row at all
    for q in rows.get("switch_queue_sample", []):  # "lots" is not a number: null, never 0
        assert q["tx_packets_total"] is None and q["dropped_packets_total"] is None
    assert src.stats.errors.get("bad_update", 0) >= 1
    assert src.stats.errors.get("bad_value", 0) >= 1
    msgs = [r.getMessage() for r in caplog.records]
    assert any("bad_update" in m and "leaf01" in m and "COUNTERS" in m for m in msgs)


@pytest.mark.parametrize("target", [{"stop_after": 3}], indirect=True)
def test_a_switch_that_stops_streaming_is_down_within_two_intervals(
    target: tuple[Target, int],
) -> None:
    _, port = target
    src = _source(port)
    try:
        assert _rows(src)["switch_status"][0]["up"] == 1
        time.sleep(INTERVAL * 3)  # three samples sent (1 per interval), then silence
        deadline = time.monotonic() + INTERVAL * 2 + 0.3
        while _rows(src)["switch_status"][0]["up"] == 1:
            assert time.monotonic() < deadline, "still up two intervals after the last update"
            time.sleep(0.1)
    finally:
        src.close()


def _self_signed(tmp: Path) -> tuple[Path, Any]:
    """A CA and a server certificate for 127.0.0.1 signed by it (cryptography, test dep)."""
    import grpc
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def key() -> Any:
        return ec.generate_private_key(ec.SECP256R1())

    now = dt.datetime.now(dt.UTC)
    ca_key, srv_key = key(), key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "railscope test CA")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key()).serial_number(1)
        .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    srv = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "leaf01.test")]))
        .issuer_name(ca_name).public_key(srv_key.public_key()).serial_number(2)
        .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("leaf01.test")]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    pem = serialization.Encoding.PEM
    ca_path = tmp / "ca.pem"
    ca_path.write_bytes(ca.public_bytes(pem))
    creds = grpc.ssl_server_credentials(
        [(srv_key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()), srv.public_bytes(pem))]
    )  # fmt: skip
    return ca_path, creds


def test_tls_with_a_self_signed_ca(tmp_path: Path) -> None:
    ca, creds = _self_signed(tmp_path)
    t = load_target()
    server, port = serve(t, creds)
    try:
        good = _source(port, tls={"ca": str(ca), "server_name": "leaf01.test"})
        try:
            assert len(_rows(good)["switch_port_sample"]) == 3
        finally:
            good.close()
        # no CA given: the self-signed chain is not trusted -> down, nothing stored
        untrusted = _source(port, tls={"server_name": "leaf01.test"})
        try:
            rows = _rows(untrusted)
            assert rows["switch_status"][0]["up"] == 0 and "switch_port_sample" not in rows
        finally:
            untrusted.close()
        # ... unless verification is skipped, which only the config can say
        skip = _source(port, tls={"skip_verify": True})
        try:
            assert len(_rows(skip)["switch_port_sample"]) == 3
        finally:
            skip.close()
        plain = _source(port)  # plaintext against a TLS server: down
        try:
            assert _rows(plain)["switch_status"][0]["up"] == 0
        finally:
            plain.close()
    finally:
        server.stop(0)


def test_many_switches_on_one_loop() -> None:
    """Twenty switches, one asyncio loop thread: all up, each with its own values."""
    import threading

    servers = []
    try:
        switches = []
        for i in range(20):
            t = load_target()
            oid = t.counters["COUNTERS_PORT_NAME_MAP"]["Ethernet0"]
            t.counters[f"COUNTERS:{oid}"]["SAI_PORT_STAT_IF_IN_OCTETS"] = str(1000 + i)
            server, port = serve(t)
            servers.append(server)
            switches.append(
                SwitchConfig(name=f"leaf{i:02d}", gnmi={"address": f"127.0.0.1:{port}"})
            )
        before = threading.active_count()
        cfg = SwitchSourceConfig(switches=switches, timeout_seconds=5)
        src = SwitchSource([], cfg, gnmi=switches, interval=INTERVAL)
        try:
            assert threading.active_count() - before <= 3  # one loop thread (+ grpc's own)
            rows = _rows(src)
        finally:
            src.close()
        assert sum(s["up"] for s in rows["switch_status"]) == 20
        got = {
            r["switch"]: r["rx_bytes_total"]
            for r in rows["switch_port_sample"]
            if r["port"] == "Ethernet0"
        }
        assert got == {f"leaf{i:02d}": 1000 + i for i in range(20)}
    finally:
        for s in servers:
            s.stop(0)


def test_cli_gnmi_flag(target: tuple[Target, int], tmp_path: Path) -> None:
    kinds = once_kinds(tmp_path, "--gnmi", f"leaf01=127.0.0.1:{target[1]}")
    assert kinds.count("switch_port_sample") == 3 and kinds.count("switch_priority_sample") == 24


def test_reconnects_after_the_switch_comes_back(caplog: pytest.LogCaptureFixture) -> None:
    """The target goes away (down within two intervals, one log line) and comes back on the
    same port: the session reconnects with backoff and the switch is up again."""
    caplog.set_level(logging.WARNING)
    server, port = serve(load_target())
    src = _source(port)
    try:
        assert _rows(src)["switch_status"][0]["up"] == 1
        server.stop(0)
        deadline = time.monotonic() + INTERVAL * 2 + 3
        while _rows(src)["switch_status"][0]["up"] == 1:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        server, _ = serve(load_target(), port=port)
        deadline = time.monotonic() + 20  # backoff is at most a few seconds by now
        while (st := _rows(src)["switch_status"][0])["up"] == 0:
            assert time.monotonic() < deadline, st["error"]
            time.sleep(0.2)
    finally:
        src.close()
        server.stop(0)
    msgs = [r.getMessage() for r in caplog.records]
    assert any("leaf01: down" in m for m in msgs) and any("answering again" in m for m in msgs)
