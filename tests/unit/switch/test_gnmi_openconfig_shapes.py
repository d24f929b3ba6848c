"""OpenConfigGnmi's cache fed the shapes real targets send (no network): one leaf per update
with its own time (Arista EOS, a real gnmic capture), per-leaf queue and LLDP updates under a
prefix (the shape Cumulus documents), values wrapped in their own node's name (SONiC's translib),
deletes, queue names whose numbers collide, and newer speed identities."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from exporters.switch import gnmi as G
from exporters.switch.config import GnmiConfig
from tests.unit.switch.seen import Seen

FIX = Path(__file__).parents[2] / "fixtures" / "switch"
pb = G.gnmi_pb()


def _stream() -> tuple[G.OpenConfigGnmi, Seen]:
    seen = Seen()
    cfg = GnmiConfig(address="127.0.0.1:1", dialect="openconfig")  # type: ignore[arg-type]
    return G.OpenConfigGnmi("leaf0", cfg, 10.0, 5.0, seen), seen


def _tv(v: Any) -> Any:
    if isinstance(v, int):
        return pb.TypedValue(uint_val=v)
    if isinstance(v, str):
        return pb.TypedValue(string_val=v)
    return pb.TypedValue(json_ietf_val=json.dumps(v).encode())


def _note(
    ts_ns: int, updates: list[tuple[str, Any]], prefix: str = "", delete: tuple[str, ...] = ()
) -> Any:
    return pb.Notification(
        timestamp=ts_ns,
        prefix=G.parse_path(prefix) if prefix else None,
        update=[pb.Update(path=G.parse_path(p), val=_tv(v)) for p, v in updates],
        delete=[G.parse_path(p) for p in delete],
    )


def _poll(st: G.OpenConfigGnmi, seen: Seen) -> tuple[list[Any], ...]:
    st._synced()
    return st.poll(seen)  # type: ignore[arg-type]


def _gnmic(path: Path) -> list[Any]:
    """gnmic's JSON output (one object per notification) back to Notifications: a JSON integer
    was a uint_val, as gnmic prints it."""
    dec, text, i, out = json.JSONDecoder(), path.read_text(), 0, []
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        o, i = dec.raw_decode(text, i)
        ups = [(u["Path"], next(iter(u["values"].values()))) for u in o["updates"]]
        out.append(_note(o["timestamp"], ups))
    return out


def test_eos_per_leaf_updates_with_their_own_times() -> None:
    """EOS stamps each counter leaf with when it last changed (in-discards: 8 days before the
    rest): a port's row is as of its newest leaf, never stepping back as older leaves arrive."""
    notes = _gnmic(FIX / "arista_eos_gnmic_management1_per_leaf.json")
    assert len(notes) == 30
    st, seen = _stream()
    newest, times = 0, []
    for n in notes:
        st._notification(n)
        newest = max(newest, n.timestamp // 1_000_000)
        [row], _, _ = _poll(st, seen)
        times.append(row["ts"])
        assert row["ts"] == newest
    assert times == sorted(times) and times[0] == 1616116201161
    assert row["rx_bytes_total"] == 2585231070 and row["tx_bytes_total"] == 7377429265
    # the last value of each leaf: 21151566 + 2086739 + 1188816
    assert row["rx_packets_total"] == 21151566 + 2086739 + 1188816
    assert row["rx_discards_total"] == 0 and seen.got == []


def test_queue_and_lldp_leaves_one_per_update_under_a_prefix() -> None:
    """A prefix naming the list entry and one update per leaf (the Subscription Response shape
    Cumulus Linux documents): each leaf keeps its name."""
    st, seen = _stream()
    q = "qos/interfaces/interface[interface-id=swp1]/output/queues/queue[name=3]"
    st._notification(_note(10**18, [("state/transmit-pkts", 1457), ("state/transmit-octets", 93248),
                                     ("state/dropped-pkts", 2)], prefix=q))  # fmt: skip
    nb = "lldp/interfaces/interface[name=swp1]/neighbors/neighbor[id=swp51]"
    st._notification(_note(10**18, [("state/system-name", "spine01"), ("state/port-id", "swp1"),
                                     ("state/port-id-type", "INTERFACE_NAME"),
                                     ("state/chassis-id", "44:38:39:00:00:01")], prefix=nb))  # fmt: skip
    _, [qrow], [lrow] = _poll(st, seen)
    assert (qrow["port"], qrow["queue"]) == ("swp1", 3)
    assert (qrow["tx_packets_total"], qrow["tx_bytes_total"], qrow["dropped_packets_total"]) == (
        1457, 93248, 2
    )  # fmt: skip
    assert (lrow["local_port"], lrow["remote_device"], lrow["remote_port"]) == (
        "swp1", "spine01", "swp1"
    )  # fmt: skip
    assert lrow["remote_chassis_id"] == "44:38:39:00:00:01" and seen.got == []


def test_values_wrapped_in_their_own_name() -> None:
    """SONiC's translib answers a leaf path with {"module:leaf": value} and a container path
    with {"module:container": {...}}: read as the leaf / the container."""
    st, seen = _stream()
    i = "interfaces/interface[name=Ethernet0]"
    st._notification(_note(10**18, [
        (f"{i}/state/counters", {"openconfig-interfaces:counters": {"in-octets": "5", "out-octets": "7"}}),
        (f"{i}/state/oper-status", {"openconfig-interfaces:oper-status": "DOWN"}),
        (f"{i}/ethernet/state/port-speed",
         {"openconfig-if-ethernet:port-speed": "openconfig-if-ethernet:SPEED_1600GB"}),
    ]))  # fmt: skip
    [row], _, _ = _poll(st, seen)
    assert (row["rx_bytes_total"], row["tx_bytes_total"]) == (5, 7)
    assert row["up"] == 0 and row["speed_bps"] == 1.6e12 and seen.got == []


def test_deleted_neighbours_and_queues_are_forgotten() -> None:
    st, seen = _stream()
    nb = "lldp/interfaces/interface[name=swp1]/neighbors/neighbor[id={}]/state"
    st._notification(_note(10**18, [(nb.format("a"), {"system-name": "spine01", "port-id": "swp1"}),
                                     (nb.format("b"), {"system-name": "spine02", "port-id": "swp2"})]))  # fmt: skip
    assert len(_poll(st, seen)[2]) == 2
    gone = "lldp/interfaces/interface[name=swp1]/neighbors/neighbor[id=a]"
    st._notification(_note(2 * 10**18, [], delete=(gone,)))
    assert [r["remote_device"] for r in _poll(st, seen)[2]] == ["spine02"]
    st._notification(
        _note(3 * 10**18, [], delete=("lldp/interfaces/interface[name=swp1]/neighbors",))
    )
    assert _poll(st, seen)[2] == []
    # a leaf deleted below an entry does not drop the entry
    st._notification(_note(4 * 10**18, [(nb.format("c"), {"system-name": "spine03"})]))
    st._notification(_note(5 * 10**18, [], delete=(nb.format("c") + "/port-description",)))
    assert [r["remote_device"] for r in _poll(st, seen)[2]] == ["spine03"]


def test_queue_names_whose_numbers_collide_are_named_not_stored() -> None:
    """OpenConfig queue names are the operator's strings (SONiC-PINS: BE1, AF1..AF4, LLQ1, NC1):
    BE1, AF1 and NC1 would all be queue 1 of the port. Those are named; unambiguous ones kept."""
    st, seen = _stream()
    q = "qos/interfaces/interface[interface-id=Ethernet0]/output/queues/queue[name={}]/state"
    st._notification(_note(10**18, [(q.format(n), {"transmit-pkts": str(i)})
                                     for i, n in enumerate(["BE1", "AF1", "NC1", "AF2", "7"])]))  # fmt: skip
    _, qrows, _ = _poll(st, seen)
    assert sorted((r["queue"], r["tx_packets_total"]) for r in qrows) == [(2, 3), (7, 4)]
    assert sorted(s for r, s in seen.got if r == "bad_value") == [
        "leaf0 queue Ethernet0/'AF1'", "leaf0 queue Ethernet0/'BE1'", "leaf0 queue Ethernet0/'NC1'"
    ]  # fmt: skip


def test_origin_goes_in_every_prefix() -> None:
    cfg = GnmiConfig(address="127.0.0.1:1", dialect="openconfig", origin="openconfig")  # type: ignore[arg-type]
    st = G.OpenConfigGnmi("leaf0", cfg, 10.0, 5.0, Seen())
    assert st._prefix("").origin == "openconfig"
    plain, _ = _stream()
    assert plain._prefix("").origin == ""
