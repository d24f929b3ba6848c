"""SonicGnmi's shortcut for whole updates (`_take`: msgspec reads only the mapped counters, one
numpy parse makes the columns) against the general way (`decode` + `_apply` + the poll reading
the hashes): the same updates into two caches, one with the shortcut switched off, must give
the same polls (every column, value for value, with the switch's times) and name the same
problems, for plain samples and for every odd update the shortcut hands on."""

from __future__ import annotations

import asyncio
import copy
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from exporters.switch import gnmi as G
from exporters.switch.config import GnmiConfig
from exporters.switch.gnmi_columns import whole_reader
from telemetry.sim.gnmi_target import Target
from tests.unit.switch.seen import Seen

FIX = Path(__file__).parents[2] / "fixtures" / "sonic"
PORTS, QUEUES = G.SONIC_SAMPLE


def _bench_db() -> dict[str, Any]:
    """A switch as bench/switch.py makes them (8 ports x 8 queues, every queue alike)."""
    from bench.switch import switch_db

    db = switch_db(8, 8, 3)
    return {k: v for k, v in db.items() if not k.startswith(("PORT_TABLE:", "LLDP_ENTRY"))}


def _dump_db() -> dict[str, Any]:
    """The shared SONiC dump (queues not alike: the PFC watchdog's counters on some)."""
    return json.loads((FIX / "counters_db.json").read_text())


@pytest.fixture(autouse=True, params=["learns", "in order", "reversed"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How the shortcut's cache decodes: learning the switch's key order from its first whole
    update (as it runs), already holding a decoder in the order the updates come, or one in
    the reverse order (a switch that changed its order: slower, the same values)."""
    monkeypatch.setattr(sys.modules[__name__], "_READER", request.param)
    return str(request.param)


_READER = "learns"


def _pair(counters: dict[str, Any]) -> tuple[G.SonicGnmi, G.SonicGnmi, Seen, Seen]:
    """Two caches of one switch: with the shortcut and without it (the general way)."""
    t = Target(counters, json.loads((FIX / "appl_db.json").read_text()), {})
    out: list[Any] = []
    for fast in (True, False):
        seen = Seen()
        st = G.SonicGnmi("leaf0", GnmiConfig(address="127.0.0.1:1"), 10.0, 5.0, seen)

        async def get(md: Any, target: str, paths: Any) -> list[Any]:
            return [t._notification(target, [G.parse_path(p) for p in paths])]

        st._get = get  # type: ignore[method-assign]
        asyncio.run(st._prepare([]))
        st._notification(t._notification("APPL_DB", [G.parse_path(p) for p in G.SONIC_ON_CHANGE]))
        if not fast:
            st._take = lambda *a: False  # type: ignore[method-assign]
        elif _READER != "learns":  # the key order of the db's first port / queue hash
            for kind, table in (("port", "COUNTERS_PORT_NAME_MAP"), ("queue", "COUNTERS_QUEUE_NAME_MAP")):  # fmt: skip
                keys = tuple(counters[f"COUNTERS:{next(iter(counters[table].values()))}"])
                layout = keys[::-1] if _READER == "reversed" else keys
                st._readers[kind] = whole_reader(kind, layout)
        out += [st, seen]
    return out[0], out[2], out[1], out[3]


def _update(path: str, value: Any, ts_ns: int = 1_700_000_000 * 10**9) -> Any:
    """One notification with one update; `value` as JSON text (bytes: sent as they are)."""
    pb = G.gnmi_pb()
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return pb.Notification(
        timestamp=ts_ns,
        prefix=pb.Path(target="COUNTERS_DB"),
        update=[pb.Update(path=G.parse_path(path), val=pb.TypedValue(json_ietf_val=raw))],
    )


def _whole(counters: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(ports, queues) updates as a SONiC target renders them from COUNTERS_DB hashes."""
    ports = {p: counters[f"COUNTERS:{o}"] for p, o in counters["COUNTERS_PORT_NAME_MAP"].items()}
    queues = {
        q: counters[f"COUNTERS:{o}"]
        for q, o in counters["COUNTERS_QUEUE_NAME_MAP"].items()
        if f"COUNTERS:{o}" in counters
    }
    return copy.deepcopy(ports), copy.deepcopy(queues)


def _plain(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def _same(fast: G.SonicGnmi, slow: G.SonicGnmi, fs: Seen, ss: Seen, *notes: Any) -> Any:
    """Both caches fed `notes`, polled: the same columns and problems; the fast poll."""
    for n in notes:
        fast._notification(n)
        slow._notification(n)
    for st in (fast, slow):
        st._synced()
    pf, ps = Seen(), Seen()
    got, want = fast.poll_columns(pf), slow.poll_columns(ps)
    assert _plain(got) == _plain(want)
    assert pf.got == ps.got and fs.got == ss.got
    assert (fast.values, fast.updates) == (slow.values, slow.updates)
    assert fast.port_ts == slow.port_ts and fast.queue_ts == slow.queue_ts
    return got


def _taken(st: G.SonicGnmi) -> tuple[bool, bool]:
    return st._pending["port"] is not None, st._pending["queue"] is not None


def test_plain_samples_are_taken_and_poll_as_the_hashes_do() -> None:
    counters = _bench_db()
    fast, slow, fs, ss = _pair(counters)
    ports, queues = _whole(counters)
    for q in list(queues)[::3]:  # the PFC watchdog's status on some queues, counters alike
        queues[q]["PFC_WD_STATUS"] = "operational"
    queues[next(iter(queues))]["PFC_WD_STATUS"] = "stormed"
    ports["Ethernet4"]["SAI_PORT_STAT_IF_IN_OCTETS"] = "18446744073709551"  # 17 digits
    ports["Ethernet8"]["SAI_PORT_STAT_IF_OUT_OCTETS"] = "0000000000000000042"  # 19: int() 42
    pc, prio, qc, _ = _same(fast, slow, fs, ss, _update(PORTS, ports), _update(QUEUES, queues))
    assert _taken(fast) == (True, True) and _taken(slow) == (False, False)
    i = pc["port"].index("Ethernet4")
    assert int(pc["rx_bytes_total"][i]) == 18446744073709551
    assert int(pc["tx_bytes_total"][pc["port"].index("Ethernet8")]) == 42
    assert list(qc["pfc_wd_storm_detected"]).count(1) == 1
    assert len(prio["port"]) == 8 * 8 and fast.port_h == {}  # the hashes never decoded
    # the next sample replaces the block; the values follow it
    ports["Ethernet4"]["SAI_PORT_STAT_IF_IN_OCTETS"] = "7"
    pc, _, _, _ = _same(fast, slow, fs, ss, _update(PORTS, ports, 1_700_000_010 * 10**9))
    assert int(pc["rx_bytes_total"][i]) == 7 and list(pc["ts"])[i] == 1_700_000_010_000


def test_the_dumps_ports_are_taken_its_unlike_queues_go_the_general_way() -> None:
    counters = _dump_db()
    fast, slow, fs, ss = _pair(counters)
    _same(
        fast,
        slow,
        fs,
        ss,
        *(_update(p, v) for p, v in zip((PORTS, QUEUES), _whole(counters), strict=True)),
    )
    assert _taken(fast) == (True, False)


ODD: list[tuple[str, Any]] = [
    ("lots", "a counter that is not a number"),
    ("18446744073709551615", "20 digits, the largest counter"),
    ("18446744073709551616", "past 64 bits"),
    (" 12", "a space (int() takes it)"),
    ("+5", "a sign"),
    ("-5", "negative"),
    ("1e3", "an exponent"),
    ("1.0", "a float"),
    ("", "empty"),
    ("1,2", "a comma"),
    ("\u0661\u0662", "non-ASCII digits (int() takes them)"),
    (5, "a JSON number"),
    (None, "JSON null"),
    ({"x": "1"}, "an object"),
]


@pytest.mark.parametrize(("value", "why"), ODD, ids=[w for _, w in ODD])
def test_an_odd_counter_goes_the_general_way(value: Any, why: str) -> None:
    counters = _bench_db()
    fast, slow, fs, ss = _pair(counters)
    ports, queues = _whole(counters)
    ports["Ethernet4"]["SAI_PORT_STAT_IF_IN_OCTETS"] = value
    queues["Ethernet0:3"]["SAI_QUEUE_STAT_PACKETS"] = value
    _same(fast, slow, fs, ss, _update(PORTS, ports), _update(QUEUES, queues))
    assert _taken(fast) == (False, False)


def test_odd_shapes_go_the_general_way_or_poll_the_same() -> None:
    counters = _bench_db()
    ports, queues = _whole(counters)
    cases: list[tuple[Any, bool]] = []
    p = copy.deepcopy(ports)
    del p["Ethernet8"]  # a port of the maps left out
    cases.append((p, False))
    p = copy.deepcopy(ports)
    del p["Ethernet8"]["SAI_PORT_STAT_IF_IN_OCTETS"]  # a counter on some ports only
    cases.append((p, False))
    p = copy.deepcopy(ports)
    p["Ethernet12"]["SAI_PORT_STAT_PFC_9_RX_PKTS"] = "1"  # irrelevant: not mapped
    p["Ethernet12"]["SAI_PORT_STAT_PFC_3_RX_PAUSE_DURATION_US"] = "9"  # absent on the others
    cases.append((p, False))
    p = copy.deepcopy(ports)
    p["Ethernet4"] = {}  # an empty hash: named missing by the poll
    cases.append((p, False))
    p = copy.deepcopy(ports)
    p["Ethernet0"] = {}  # ... the first port's
    cases.append((p, False))
    cases.append(({k: {"SAI_NOT_MAPPED": "1"} for k in ports}, False))  # no mapped counter
    p = copy.deepcopy(ports)
    p["Ethernet999"] = {"SAI_PORT_STAT_IF_IN_OCTETS": "lots"}  # a port the maps do not name
    cases.append((p, True))
    p = copy.deepcopy(ports)
    p["Ethernet4"]["SAI_SOME_OTHER_STAT"] = {"nested": [1.5, None]}  # not mapped: not read
    cases.append((p, True))
    cases.append((json.dumps(ports).encode().replace(b"Ethernet", b"Ethernet\xff", 1), False))
    cases.append((b'{"Ethernet0": ', False))  # not JSON
    cases.append((["Ethernet0"], False))
    for value, taken in cases:
        fast, slow, fs, ss = _pair(counters)
        _same(fast, slow, fs, ss, _update(PORTS, value), _update(QUEUES, queues))
        assert _taken(fast) == (taken, True), value


def test_later_updates_and_new_maps_see_a_taken_sample() -> None:
    counters = _bench_db()
    fast, slow, fs, ss = _pair(counters)
    ports, queues = _whole(counters)
    _same(fast, slow, fs, ss, _update(PORTS, ports), _update(QUEUES, queues))
    # one port alone, then its queues alone (a switch may send a path per port): the taken
    # sample's hashes are decoded first, this update lands on them
    one = dict(ports["Ethernet4"], SAI_PORT_STAT_IF_IN_OCTETS="777")
    q4 = {q: dict(h, SAI_QUEUE_STAT_PACKETS="5") for q, h in queues.items() if q.startswith("Ethernet4:")}  # fmt: skip
    pc, _, qc, _ = _same(
        fast, slow, fs, ss, _update("COUNTERS/Ethernet4", one), _update("COUNTERS/Ethernet4/Queues", q4)
    )  # fmt: skip
    assert _taken(fast) == (False, False) and len(fast.port_h) == 8
    assert int(pc["rx_bytes_total"][pc["port"].index("Ethernet4")]) == 777
    # a whole sample again, then a new session whose maps name a queue index that is none
    _same(fast, slow, fs, ss, _update(PORTS, ports), _update(QUEUES, queues))
    assert _taken(fast) == (True, True)
    for st in (fast, slow):
        st.maps = {}
        counters["COUNTERS_QUEUE_INDEX_MAP"] = dict(counters["COUNTERS_QUEUE_INDEX_MAP"])
        oid = counters["COUNTERS_QUEUE_NAME_MAP"]["Ethernet0:2"]
        counters["COUNTERS_QUEUE_INDEX_MAP"][oid] = "x"
        t = Target(counters, {}, {})

        async def get(md: Any, target: str, paths: Any, t: Any = t) -> list[Any]:
            return [t._notification(target, [G.parse_path(p) for p in paths])]

        st._get = get  # type: ignore[method-assign]
        asyncio.run(st._prepare([]))
    assert _taken(fast) == (False, False)  # read in the old maps' order: decoded
    _same(fast, slow, fs, ss)
    _same(fast, slow, fs, ss, _update(PORTS, ports), _update(QUEUES, queues))
    seen = Seen()
    _, _, qc, _ = fast.poll_columns(seen)  # the queue without an index: named, not a row
    assert ("bad_value", "COUNTERS_QUEUE_NAME_MAP Ethernet0:2='x'") in seen.got
    assert len(qc["port"]) == 8 * 8 - 1


@pytest.mark.parametrize("reader", ["learns"], indirect=True)
def test_the_first_whole_update_teaches_the_switchs_key_order(reader: str) -> None:
    """The cache learns the key order of a switch's hashes from its first whole update of a
    kind (sonic-gnmi sends them sorted), and again after new name maps (a new session)."""
    counters = _bench_db()
    fast, slow, fs, ss = _pair(counters)
    ports, queues = _whole(counters)
    ports = {p: dict(sorted(h.items())) for p, h in ports.items()}  # as Go's json.Marshal
    _same(fast, slow, fs, ss, _update(PORTS, ports), _update(QUEUES, queues))
    dec, _, _ = fast._readers["port"]
    assert dec is whole_reader("port", tuple(sorted(ports["Ethernet0"])))[0]
    assert fast._readers["queue"][0] is whole_reader("queue", tuple(queues["Ethernet0:0"]))[0]
    asyncio.run(fast._prepare([]))
    assert fast._readers == {}
