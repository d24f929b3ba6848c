"""gNMI pieces that need no target: paths, typed values, OpenConfig leaves."""

from __future__ import annotations

import pytest

from exporters.switch import gnmi as G
from exporters.switch import gnmi_openconfig as OC
from telemetry.errors import UserError


def test_parse_path_with_keys_and_slashes_inside_them() -> None:
    p = G.parse_path("interfaces/interface[name=Ethernet1/1]/state/counters", target="T")
    assert [(e.name, dict(e.key)) for e in p.elem] == [
        ("interfaces", {}),
        ("interface", {"name": "Ethernet1/1"}),
        ("state", {}),
        ("counters", {}),
    ]
    assert p.target == "T"
    with pytest.raises(UserError):
        G.parse_path("a/[x=1]")


def test_decode_typed_values() -> None:
    pb = G.gnmi_pb()
    assert G.decode(pb.TypedValue(json_ietf_val=b'{"a": "1"}')) == {"a": "1"}
    assert G.decode(pb.TypedValue(uint_val=7)) == 7
    assert G.decode(pb.TypedValue(string_val="UP")) == "UP"
    for bad in (pb.TypedValue(json_ietf_val=b"{nope"), pb.TypedValue(json_ietf_val=b"\xff"),
                pb.TypedValue(bytes_val=b"x")):  # fmt: skip
        with pytest.raises(ValueError):
            G.decode(bad)


def test_openconfig_leaves() -> None:
    assert OC._flatten({"openconfig-interfaces:counters": {"in-octets": "5", "x": {"y": 1}}}) == {
        "counters/in-octets": "5",
        "counters/x/y": "1",
    }
    assert OC._flatten({"a": [1]}) is None  # a list is not what a counters container holds
    assert OC._oc_speed("openconfig-if-ethernet:SPEED_400GB") == 4e11
    assert OC._oc_speed("SPEED_UNKNOWN") is None
    assert [OC._queue_index(n) for n in ("3", "UC7", "Ethernet0:5", "BE", "999")] == [
        3, 7, 5, None, None,
    ]  # fmt: skip
