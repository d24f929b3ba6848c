"""Fuzzing the decoder, CI-sized (`python bench/sflow.py --fuzz 1000000` runs 1,000,000): only
DecodeError may leave decode(), and a datagram that decodes gives rows that fit the kinds."""

from __future__ import annotations

import contextlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporters.sflow import encode as E
from exporters.sflow.decode import DecodeError, decode, scan
from exporters.sflow.ingest import SflowIngest
from telemetry.contracts import ComponentStats

SEEDS = [
    E.datagram([E.flow_sample(E.rocev2_frame("10.0.0.1", "10.0.0.2", 9)[:128], rate=512, vlan=3),
                E.counter_sample({"ifindex": 4, "in_octets": 9}, {"fcs_errors": 1})]),
    E.datagram([E.flow_sample(E.rocev2_frame("10.0.0.1", "10.0.0.2", 9, vlan=7)[:96], expanded=True)],
               agent="fd00::1"),
]  # fmt: skip


def _check(data: bytes) -> None:
    with contextlib.suppress(DecodeError):
        decode(data)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=600))
def test_random_bytes(data: bytes) -> None:
    _check(b"\0\0\0\x05" + data)
    _check(data)


@settings(max_examples=2500, deadline=None)
@given(st.sampled_from(SEEDS), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=8),
       st.integers(0, 400))  # fmt: skip
def test_mutated_datagrams(seed: bytes, flips: list[tuple[int, int]], cut: int) -> None:
    b = bytearray(seed)
    for pos, val in flips:
        b[pos % len(b)] = val
    data = bytes(b[: len(b) - cut]) if cut < len(b) else bytes(b)
    try:
        decode(data)
    except DecodeError:
        return
    ing = SflowIngest(ComponentStats("fuzz"))  # whatever decodes must also build valid rows
    ing.add(scan(data), "x", 0)
    ing.drain()
