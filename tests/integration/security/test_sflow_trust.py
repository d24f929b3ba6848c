"""Who may write sFlow: on real UDP sockets over loopback (127.0.0.2 is another sender on the
same host), datagrams from an address that is not a configured agent, or whose agent address is
not their source, are dropped and counted; with the check relaxed, per-agent state is bounded."""

from __future__ import annotations

import socket
import time
from typing import Any

from exporters.sflow import encode as E
from exporters.sflow.source import SflowSource


def _send(port: int, agent: str, seq: int, *, sender: str = "127.0.0.1") -> None:
    frame = E.rocev2_frame("10.0.0.1", "10.0.0.2", 1000, psn=seq)
    dgram = E.datagram(
        [E.flow_sample(frame[:128], rate=1, frame_length=1000)], agent=agent, seq=seq
    )
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((sender, 0))
        s.sendto(dgram, ("127.0.0.1", port))


def _settle(src: SflowSource, datagrams: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 10
    while src.stats.received < datagrams and time.monotonic() < deadline:
        time.sleep(0.02)
    rows: list[dict[str, Any]] = []
    for b in src.collect():
        if b.kind.name == "flow_sample":
            rows += b.table.to_pylist()
    return rows


def test_only_configured_agents_whose_source_is_their_agent_address() -> None:
    src = SflowSource(SflowSource.Config(bind="127.0.0.1:0", agents={"127.0.0.1": "leaf01"}))  # type: ignore[call-arg]
    _, port = src.start()
    try:
        _send(port, "127.0.0.1", 1)  # the agent itself
        _send(port, "10.66.0.1", 2)  # a forged agent address from the agent's host
        _send(port, "127.0.0.2", 3, sender="127.0.0.2")  # an address nobody configured
        rows = _settle(src, 3)
    finally:
        src.stop()
    assert [(r["agent"], r["switch"], r["psn"]) for r in rows] == [("127.0.0.1", "leaf01", 1)]
    assert src.stats.errors == {"agent_not_source": 1, "untrusted_source": 1}
    assert src.stats.dropped == 2


def test_cidr_allow_list_and_relaxed_agent_check_keep_agents_bounded() -> None:
    cfg = SflowSource.Config(  # type: ignore[call-arg]
        bind="127.0.0.1:0",
        allowed_sources=["127.0.0.0/30"],
        require_agent_is_source=False,
        max_agents=3,
    )
    src = SflowSource(cfg)
    _, port = src.start()
    try:
        for i in range(10):  # ten agent addresses behind one NAT'd source
            _send(port, f"10.0.0.{i + 1}", i + 1, sender="127.0.0.2")
        _send(port, "10.0.0.1", 11, sender="127.0.0.5")  # outside 127.0.0.0/30
        rows = _settle(src, 11)
    finally:
        src.stop()
    assert sorted({r["agent"] for r in rows}) == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    assert src.stats.errors == {"too_many_agents": 7, "untrusted_source": 1}


def test_open_collector_when_nothing_is_configured() -> None:
    src = SflowSource(SflowSource.Config(bind="127.0.0.1:0"))  # type: ignore[call-arg]
    _, port = src.start()
    try:
        _send(port, "127.0.0.2", 1, sender="127.0.0.2")
        _send(port, "10.7.7.7", 2, sender="127.0.0.2")  # any agent address: nothing to check it by
        rows = _settle(src, 2)
    finally:
        src.stop()
    assert sorted(r["agent"] for r in rows) == ["10.7.7.7", "127.0.0.2"] and not src.stats.errors


def test_workers_check_every_datagram_the_same_way() -> None:
    """`workers: 2`: each receiver process applies the same check before decoding."""
    cfg = SflowSource.Config(bind="127.0.0.1:0", agents={"127.0.0.1": "leaf01"}, workers=2)  # type: ignore[call-arg]
    src = SflowSource(cfg)
    _, port = src.start()
    rows: list[dict[str, Any]] = []
    try:
        _send(port, "127.0.0.1", 1)
        _send(port, "10.66.0.1", 2)
        _send(port, "127.0.0.2", 3, sender="127.0.0.2")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            for b in src.collect():
                if b.kind.name == "flow_sample":
                    rows += b.table.to_pylist()
            if rows and src.stats.failed >= 2:
                break
            time.sleep(0.2)
    finally:
        src.stop()
    assert [(r["agent"], r["switch"], r["psn"]) for r in rows] == [("127.0.0.1", "leaf01", 1)]
    assert src.stats.errors == {"agent_not_source": 1, "untrusted_source": 1}
