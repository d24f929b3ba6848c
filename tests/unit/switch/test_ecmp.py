"""ECMP group spread and membership."""

from __future__ import annotations

import math

import pytest

from exporters.switch import ecmp


def test_spread_values() -> None:
    rates = {"E0": 100.0, "E4": 300.0, "E8": 200.0, "E12": None}
    speeds = {"E0": 8000.0, "E4": 8000.0, "E8": 8000.0, "E12": 8000.0}
    s = ecmp.spread(rates, speeds, ["E0", "E4", "E8", "E12"])
    assert s is not None
    assert s["member_count"] == 3  # E12 had no rate: left out, not taken as 0
    assert s["hottest_member"] == "E4"
    assert s["max_mean_ratio"] == pytest.approx(1.5)
    assert s["cv_ratio"] == pytest.approx(math.sqrt(((100 - 200) ** 2 + 100**2 + 0) / 3) / 200)
    assert s["max_utilization_ratio"] == pytest.approx(300 * 8 / 8000)
    assert s["tx_bytes_per_second"] == 600.0


def test_idle_and_undersized_groups() -> None:
    assert ecmp.spread({"a": 0.0, "b": 0.0}, {}, ["a", "b"])["cv_ratio"] == 0.0  # type: ignore[index]
    assert ecmp.spread({"a": 5.0}, {}, ["a", "b"]) is None


def test_groups_from_lldp_and_merge() -> None:
    links = [
        {"local_device": "leaf1", "local_port": "Ethernet8", "remote_device": "spine2"},
        {"local_device": "leaf1", "local_port": "Ethernet4", "remote_device": "spine1"},
        {"local_device": "leaf1", "local_port": "Ethernet0", "remote_device": "gpu-node-1"},
        {
            "local_device": "leaf2",
            "local_port": "Ethernet4",
            "remote_device": "spine1",
        },  # one member only
    ]
    g = ecmp.groups_from_lldp(links, "^spine")
    assert g == {"leaf1": {"uplinks": ["Ethernet4", "Ethernet8"]}}
    merged = ecmp.merge_groups({"leaf1": {"uplinks": ["Ethernet100", "Ethernet104"]}}, g)
    assert merged["leaf1"]["uplinks"] == ["Ethernet100", "Ethernet104"]
    assert ecmp.member_index(merged) == {
        ("leaf1", "Ethernet100"): "uplinks",
        ("leaf1", "Ethernet104"): "uplinks",
    }
