"""The sFlow decoder against tcpdump's own decode of a real capture, and on built datagrams."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from exporters.sflow import encode as E
from exporters.sflow.decode import DecodeError, decode
from exporters.sflow.pcap import read_udp

FIX = Path(__file__).parents[2] / "fixtures" / "sflow"
PCAP = FIX / "tcpdump_sflow-print-v6.pcap"
OUT = FIX / "tcpdump_sflow-print-v6.out"


def _ints(s: str) -> dict[str, int]:
    """'in octets 0, unicast pkts 5' -> {'in octets': 0, 'unicast pkts': 5} (tcpdump's labels)."""
    return {k.strip(): int(v) for k, v in re.findall(r"([A-Za-z][A-Za-z ]*?):? (\d+)(?=,|$)", s)}


def parse_tcpdump(text: str) -> list[dict]:
    """tcpdump -vvv sFlow output -> one dict per datagram with its samples, in order."""
    dgrams: list[dict] = []
    cur: dict | None = None
    sample: dict | None = None
    for line in text.splitlines():
        m = re.search(
            r"sFlowv5, IPv6 agent (\S+), agent-id (\d+), seqnum (\d+), uptime (\d+), samples (\d+)",
            line,
        )
        if m:
            cur = {"agent": m[1], "sub": int(m[2]), "seq": int(m[3]), "uptime": int(m[4]),
                   "n": int(m[5]), "samples": []}  # fmt: skip
            dgrams.append(cur)
            continue
        m = re.search(r"flow sample \(1\), length \d+, seqnum (\d+), type (\d+), idx (\d+), rate (\d+), "
                      r"pool (\d+), drops (\d+), input (\d+) output (\d+)", line)  # fmt: skip
        if m:
            sample = {"kind": "flow", **dict(zip(("seq", "type", "idx", "rate", "pool", "drops", "input",
                                                  "output"), map(int, m.groups()), strict=True))}  # fmt: skip
            assert cur is not None
            cur["samples"].append(sample)
            continue
        m = re.search(
            r"counter sample \(2\), length \d+, seqnum (\d+), type (\d+), idx (\d+)", line
        )
        if m:
            sample = {
                "kind": "counter",
                "seq": int(m[1]),
                "type": int(m[2]),
                "idx": int(m[3]),
                "vals": {},
            }
            assert cur is not None
            cur["samples"].append(sample)
            continue
        assert sample is not None or not line.startswith("\t ")
        m = re.search(r"src vlan (\d+), src pri (\d+), dst vlan (\d+), dst pri (\d+)", line)
        if m and sample:
            sample.update(
                src_vlan=int(m[1]), src_pri=int(m[2]), dst_vlan=int(m[3]), dst_pri=int(m[4])
            )
            continue
        m = re.search(
            r"protocol Ethernet \(1\), length (\d+), stripped bytes (\d+), header_size (\d+)", line
        )
        if m and sample:
            sample.update(frame=int(m[1]), stripped=int(m[2]), header_size=int(m[3]))
            continue
        if sample and sample["kind"] == "counter" and line.startswith("\t      "):
            body = line.strip().replace("ifstatus", "ifstatus").replace(" (full-duplex)", "")
            body = re.sub(r"adminstatus: \w+, operstatus: \w+", "", body)
            sample["vals"].update(_ints(body))
    return dgrams


TCPDUMP_GENERIC = {  # tcpdump's label -> our field (the order tcpdump prints the in/out blocks)
    "ifindex": "ifindex", "iftype": "iftype", "ifspeed": "ifspeed", "ifdirection": "ifdirection",
    "ifstatus": "ifstatus", "In octets": "in_octets", "Out octets": "out_octets",
    "In errors": "in_errors", "Out errors": "out_errors", "unknown protos": "in_unknown_protos",
    "promisc mode": "promiscuous_mode",
}  # fmt: skip
TCPDUMP_ETHERNET = {
    "align errors": "align_errors", "fcs errors": "fcs_errors", "single collision": "single_collision_frames",
    "multiple collision": "multiple_collision_frames", "test error": "sqe_test_errors",
    "deferred": "deferred_transmissions", "late collision": "late_collisions",
    "excessive collision": "excessive_collisions", "mac trans error": "internal_mac_transmit_errors",
    "carrier error": "carrier_sense_errors", "frames too long": "frame_too_longs",
    "mac receive errors": "internal_mac_receive_errors", "symbol errors": "symbol_errors",
}  # fmt: skip


def test_real_capture_matches_tcpdump_decode() -> None:
    expected = parse_tcpdump(OUT.read_text())
    got = [decode(u.payload) for u in read_udp(PCAP)]
    assert len(got) == len(expected) == 25
    nflow = ncounter = 0
    for d, e in zip(got, expected, strict=True):
        assert (d["agent"], d["sub_agent"], d["seq"], d["uptime_ms"]) == (
            e["agent"],
            e["sub"],
            e["seq"],
            e["uptime"],
        )
        assert len(d["flows"]) + len(d["counters"]) == e["n"] == len(e["samples"])
        flows = iter(d["flows"])
        counters = iter(d["counters"])
        for s in e["samples"]:
            if s["kind"] == "flow":
                nflow += 1
                f = next(flows)
                output = f["output_format"] << 30 | f["output"]
                assert (f["seq"], f["source_type"], f["source_index"], f["sampling_rate"], f["pool"],
                        f["drops"], f["input"], output) == (s["seq"], s["type"], s["idx"], s["rate"],
                                                           s["pool"], s["drops"], s["input"], s["output"])  # fmt: skip
                assert (f["frame_bytes"], f["stripped"], f["header_size"]) == (
                    s["frame"],
                    s["stripped"],
                    s["header_size"],
                )
                assert (f["src_vlan"], f["src_priority"], f["dst_vlan"], f["dst_priority"]) == (
                    s["src_vlan"], s["src_pri"], s["dst_vlan"], s["dst_pri"])  # fmt: skip
                assert f["bytes"] == s["frame"] * s["rate"]
            else:
                ncounter += 1
                c = next(counters)
                assert (c["seq"], c["source_type"], c["source_index"]) == (
                    s["seq"],
                    s["type"],
                    s["idx"],
                )
                v = s["vals"]
                for label, ours in TCPDUMP_GENERIC.items():
                    assert c["generic"][ours] == v[label], label
                for label, ours in TCPDUMP_ETHERNET.items():
                    assert c["ethernet"][ours] == v[label], label
    assert (nflow, ncounter) == (13, 48)


def test_unknown_vlan_keeps_the_sample() -> None:
    """A real Juniper-style datagram (akvorado's data-1140.pcap): extended switch records with
    VLAN 0xFFFFFFFF (unknown) on a routed port. All five flow samples are read, as akvorado's
    own decode of it (root_test.go) has them; the unknown VLAN is None, not 4294967295 (and
    never truncated to 16 bits)."""
    (u,) = read_udp(FIX / "akvorado_data-1140.pcap")
    d = decode(u.payload)
    assert d["agent"] == "172.16.0.3" and d["counters"] == []
    got = [
        (f["src_ip"], f["dst_ip"], f["in_port"], f["out_port"], f["src_vlan"], f["dst_vlan"])
        for f in d["flows"]
    ]
    v6 = ("2a0c:8880:2:0:185:21:130:38", "2a0c:8880:2:0:185:21:130:39", "27", "28", 100, 100)
    assert got == [
        v6,
        ("104.26.8.24", "45.90.161.46", "49001", "25", None, 100),
        v6,
        ("45.90.161.148", "191.87.91.27", "28", "49001", 100, None),
        v6,
    ]
    assert {f["sampling_rate"] for f in d["flows"]} == {1024}
    assert [f["frame_bytes"] for f in d["flows"]] == [1518, 439, 1518, 64, 1518]


def test_sampled_header_fields_match_scapy() -> None:
    """The L2-L4 + BTH fields agree with scapy's own dissection of the same frame."""
    scapy = pytest.importorskip("scapy.all")
    from scapy.contrib.roce import BTH

    pkt = (
        scapy.Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / scapy.Dot1Q(vlan=301) / scapy.IP(src="10.8.1.2", dst="10.9.3.4", tos=(46 << 2) | 3)
        / scapy.UDP(sport=61234, dport=4791) / BTH(opcode=6, dqpn=0xABCDE, psn=0x654321) / scapy.Raw(b"x" * 64)
    )  # fmt: skip
    raw = bytes(pkt)
    d = decode(E.datagram([E.flow_sample(raw[:128], rate=4096, frame_length=len(raw) + 4)]))
    f = d["flows"][0]
    assert f["vlan"] == pkt[scapy.Dot1Q].vlan
    assert (f["src_ip"], f["dst_ip"]) == (pkt[scapy.IP].src, pkt[scapy.IP].dst)
    assert (f["dscp"], f["ecn"]) == (pkt[scapy.IP].tos >> 2, pkt[scapy.IP].tos & 3)
    assert (f["src_port"], f["dst_port"], f["protocol"]) == (61234, 4791, 17)
    assert (f["bth_opcode"], f["dest_qp"], f["psn"]) == (
        pkt[BTH].opcode,
        pkt[BTH].dqpn,
        pkt[BTH].psn,
    )
    assert f["bytes"] == (len(raw) + 4) * 4096 and f["packets"] == 4096


def test_ipv6_and_expanded_sample() -> None:
    scapy = pytest.importorskip("scapy.all")
    pkt = scapy.Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / scapy.IPv6(src="fd00::1", dst="fd00::2", tc=0x68) / scapy.UDP(sport=1, dport=4791) / (
        b"\x04\x00\xff\xff\x00\x00\x00\x2a\x00\x00\x00\x07" + b"\0" * 16)  # fmt: skip
    d = decode(
        E.datagram(
            [E.flow_sample(bytes(pkt), expanded=True, rate=10, input=7, output=9)], agent="fd00::99"
        )
    )
    f = d["flows"][0]
    assert d["agent"] == "fd00::99"
    assert (f["src_ip"], f["dst_ip"], f["dscp"], f["ecn"]) == ("fd00::1", "fd00::2", 0x68 >> 2, 0)
    assert (f["bth_opcode"], f["dest_qp"], f["psn"]) == (4, 42, 7)
    assert (f["in_port"], f["out_port"], f["sampling_rate"]) == ("7", "9", 10)


def test_non_rocev2_udp_has_no_bth() -> None:
    frame = E.rocev2_frame("10.0.0.1", "10.0.0.2", 5)
    frame = frame[:36] + (4790).to_bytes(2, "big") + frame[38:]  # UDP dport
    f = decode(E.datagram([E.flow_sample(frame[:128])]))["flows"][0]
    assert f["dst_port"] == 4790 and "dest_qp" not in f


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (E.datagram([], version=4), "bad_version"),
        (b"\0\0\0\x05", "truncated_header"),
        (E.datagram([E.flow_sample(b"\0" * 64)])[:-10], "truncated_sample"),
        (E.datagram([E.flow_sample(b"\0" * 64)]) + b"\0\0\0\0", "trailing_bytes"),
        (b"\0\0\0\x05\0\0\0\x09" + b"\0" * 40, "bad_agent_address"),
    ],
)
def test_malformed_is_a_decode_error_with_reason(data: bytes, reason: str) -> None:
    with pytest.raises(DecodeError) as ei:
        decode(data)
    assert ei.value.reason == reason


def test_unknown_records_are_skipped_by_length() -> None:
    frame = E.rocev2_frame("10.0.0.1", "10.0.0.2", 77)
    s = E.flow_sample(frame[:128])
    # splice an unknown enterprise record (format 4242) in front of the sampled header
    fixed, recs = s[8 : 8 + 28], s[8 + 32 :]  # 7 words before the record count, then records
    unknown = (4242).to_bytes(4, "big") + (8).to_bytes(4, "big") + b"\1" * 8
    body = fixed + (2).to_bytes(4, "big") + unknown + recs
    sample = (1).to_bytes(4, "big") + len(body).to_bytes(4, "big") + body
    f = decode(E.datagram([sample]))["flows"][0]
    assert f["dest_qp"] == 77
