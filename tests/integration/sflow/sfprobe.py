"""A real sFlow agent for the tests: pmacct's pmacctd with the sfprobe plugin (sampling 1)
replaying a scapy-made pcap of RoCEv2 packets to a collector on loopback."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest


@dataclass
class Sent:
    """What the pcap holds, per RoCEv2 destination QP."""

    packets: Counter[int] = field(default_factory=Counter)
    bytes: Counter[int] = field(default_factory=Counter)
    frames: dict[int, tuple[int, int]] = field(default_factory=dict)  # psn -> (dest QP, bytes)

    @property
    def total(self) -> int:
        return sum(self.packets.values())


def roce_pcap(
    path: Path,
    *,
    srcs: list[str],
    dst: str,
    n: int,
    qp_base: int,
    size: int = 256,
    vary_size: bool = False,
) -> Sent:
    """`n` RoCEv2 packets (BTH opcode 10) from `srcs` (round robin) to `dst`, one QP per source;
    explicit MACs, so scapy never looks up a neighbour."""
    scapy = pytest.importorskip("scapy.all")
    from scapy.contrib.roce import BTH

    sent, pkts, t0 = Sent(), [], time.time() - 10
    for i in range(n):
        k = i % len(srcs)
        qp = qp_base + k
        payload = size * (1 + i % 4) if vary_size else size
        p = (scapy.Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
             / scapy.IP(src=srcs[k], dst=dst, tos=(26 << 2) | 2)
             / scapy.UDP(sport=49152 + k, dport=4791) / BTH(opcode=10, dqpn=qp, psn=i)
             / scapy.Raw(b"\0" * payload))  # fmt: skip
        p.time = t0 + i * 0.001
        pkts.append(p)
        sent.packets[qp] += 1
        sent.bytes[qp] += len(bytes(p))
        sent.frames[i] = (qp, len(bytes(p)))
    scapy.wrpcap(str(path), pkts)
    return sent


def replay(pcap: Path, port: int, workdir: Path, agent: str = "127.0.0.1") -> str:
    """Run pmacctd once over `pcap`, exporting sFlow to 127.0.0.1:`port` as agent `agent`;
    returns its stderr. Skips when pmacct is not installed."""
    if shutil.which("pmacctd") is None:
        pytest.skip("pmacctd is not installed (Debian package pmacct)")
    conf = workdir / "pmacctd.conf"
    conf.write_text(
        f"daemonize: false\npcap_savefile: {pcap}\npcap_savefile_wait: false\n"
        f"plugins: sfprobe[sf]\nsfprobe_receiver[sf]: 127.0.0.1:{port}\n"
        f"sfprobe_agentip[sf]: {agent}\nsampling_rate[sf]: 1\n"
    )
    proc = subprocess.run(["pmacctd", "-f", str(conf)], capture_output=True, text=True, timeout=60)
    # pmacctd 1.7.7 sometimes exits 1 at end of file when its core loses the sfprobe plugin in the
    # shutdown race ("connection lost to 'sf-sfprobe'") after everything was sent: what counts is
    # what arrived, which the callers check.
    assert "Exporting flows" in proc.stderr, proc.stderr
    return proc.stderr
