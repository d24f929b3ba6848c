"""`ethtool -S` text parsing (replay) on the real mlx5 capture, and per-priority mapping."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporters.node.ethtool import EthtoolError, TextEthtool, parse_ethtool_s
from exporters.node.rdma import RdmaCollector

from .conftest import FIXTURES, NODE8

REAL = FIXTURES / "ethtool" / "mlx5_connectx4_ethtool_i_S_partial_ethq_issue8.txt"


def test_real_mlx5_capture_exact_values() -> None:
    text = REAL.read_text()
    s = parse_ethtool_s(text.split("# ethtool -S output", 1)[1])
    assert s["rx_packets"] == 845320277
    assert s["rx_bytes"] == 2195783498134
    assert s["tx_bytes"] == 2655285206479
    assert s["tx_csum_partial"] == 726606998
    assert s["tx_queue_stopped"] == 0
    assert "NIC statistics" not in s
    assert len(s) == 23


def test_names_with_a_colon_in_them() -> None:
    """be2net (a real capture) names its per-queue statistics "rxq0: rx_bytes", bnx2x
    "[0]: rx_bytes": the value is after the last colon, the name is the rest, as the ioctl's
    string table has it; what railscope's own captures write reads back the same."""
    s = parse_ethtool_s(
        (FIXTURES / "ethtool" / "be2net_oneconnect_netutils_issue208_partial.txt").read_text()
    )
    assert s["rxq0: rx_bytes"] == 176801830924270
    assert s["rxq0: rx_post_fail"] == 0
    assert s["rx_in_range_errors"] == 1430
    assert len(s) == 44
    stats = {"[0]: rx_bytes": 209487403324, "[0]: rx_ucast_packets": 194386668, "rx_bytes": 7}
    assert (
        parse_ethtool_s("NIC statistics:\n" + "".join(f"     {k}: {v}\n" for k, v in stats.items()))
        == stats
    )
    with pytest.raises(EthtoolError):
        parse_ethtool_s("     rxq0: rx_bytes: 12abc\n")


def test_malformed_line_is_an_error_naming_it() -> None:
    with pytest.raises(EthtoolError, match=r"x\.txt:3: not 'name: integer'") as e:
        parse_ethtool_s(
            "NIC statistics:\n     rx_packets: 1\n     rx_bytes: 12abc\n", source="x.txt"
        )
    assert e.value.reason == "malformed_ethtool"


def test_missing_capture_is_nothing(tmp_path: Path) -> None:
    assert TextEthtool(tmp_path).stats("eth9") == {}


def test_intel_ice_priority_names(problems) -> None:  # type: ignore[no-untyped-def]
    """Intel's ice driver (E810, irdma RoCE) names per-priority PFC `rx_priority_3_xoff.nic`
    (ice_ethtool.c; its out-of-tree build can say `port-rx-xoff_prio-3_events`): XOFF frames
    are the pauses, XON frames are not counted as pauses."""

    class Ice:
        def stats(self, netdev: str) -> dict[str, int]:
            out = {
                f"{d}_priority_{p}_{k}.nic": 0
                for d in ("rx", "tx")
                for p in range(8)
                for k in ("xon", "xoff")
            }
            out.update(
                {
                    "rx_priority_3_xoff.nic": 700,
                    "rx_priority_3_xon.nic": 650,
                    "tx_priority_3_xoff.nic": 40,
                }
            )
            return out if netdev == "ens5np0" else {"port-rx-xoff_prio-3_events": 9}

    nic, prio = RdmaCollector(NODE8, "n", Ice()).collect(1, problems)
    assert problems.items == []
    p3 = next(r for r in prio if r["netdev"] == "ens5np0" and r["priority"] == 3)
    assert (p3["rx_pause_total"], p3["tx_pause_total"]) == (700, 40)
    assert len([r for r in prio if r["netdev"] == "ens5np0"]) == 8
    n4 = next(r for r in nic if r["netdev"] == "ens5np0")
    assert (n4["pfc_rx_pause_total"], n4["pfc_tx_pause_total"]) == (700, 40)
    other = next(r for r in prio if r["netdev"] != "ens5np0" and r["priority"] == 3)
    assert other["rx_pause_total"] == 9 and "tx_pause_total" not in other


def test_link_level_pause(problems) -> None:  # type: ignore[no-untyped-def]
    """A real mlx5 port that sent 5.7 M link-level (802.3x) pause frames and no PFC: the global
    pause counters and time are on nic_sample; PFC stays absent (not 0: the driver printed no
    per-priority pause line)."""
    real = parse_ethtool_s(
        (FIXTURES / "ethtool" / "mlx5_ethtool_S_global_pause_bpf_list_kernel5.15.txt").read_text()
    )

    class One:
        def stats(self, netdev: str) -> dict[str, int]:
            return (
                real if netdev == "ens5np0" else {"link_xoff_rx.nic": 12, "port-tx-xoff_events": 3}
            )

    nic, _ = RdmaCollector(NODE8, "n", One()).collect(1, problems)
    assert problems.items == []
    n = next(r for r in nic if r["netdev"] == "ens5np0")
    assert n["global_tx_pause_total"] == 5745042
    assert n["global_tx_pause_duration_seconds_total"] == pytest.approx(771.10381)
    assert n.get("global_rx_pause_total") is None and n.get("pfc_tx_pause_total") is None
    assert n["rx_discards_phy_total"] == 58591428329
    ice = next(r for r in nic if r["netdev"] != "ens5np0")  # Intel ice's names
    assert (ice["global_rx_pause_total"], ice["global_tx_pause_total"]) == (12, 3)


def test_broadcom_bnxt_names(problems) -> None:  # type: ignore[no-untyped-def]
    """Broadcom's bnxt_en (Thor, bnxt_re RoCE) names, from the kernel's bnxt_ethtool.c: per
    priority `rx_pfc_ena_frames_pri3` and `pfc_pri3_rx_duration_us`, link-level
    `rx_pause_frames`. `rx_pfc_frames` (all priorities), the transitions (both directions, where
    mlx5 counts one) and `rx_bytes_pri3` (the CoS queue priority 3 maps to, shared with every
    priority on that queue) are not priority 3's pauses or bytes and are not read."""

    class Bnxt:
        def stats(self, netdev: str) -> dict[str, int]:
            out: dict[str, int] = {"rx_pause_frames": 0, "tx_pause_frames": 0}
            for d in ("rx", "tx"):
                out[f"{d}_pfc_frames"] = 9999
                for p in range(8):
                    out[f"{d}_pfc_ena_frames_pri{p}"] = 0
                    out[f"pfc_pri{p}_{d}_duration_us"] = 0
                    out[f"pfc_pri{p}_{d}_transitions"] = 5555
                    out[f"{d}_bytes_pri{p}"] = out[f"{d}_packets_pri{p}"] = 7777
                    out[f"{d}_bytes_cos{p}"] = out[f"{d}_packets_cos{p}"] = 7777
            out.update(
                {
                    "rx_pfc_ena_frames_pri3": 1200,
                    "tx_pfc_ena_frames_pri3": 30,
                    "pfc_pri3_rx_duration_us": 2_500_000,
                    "rx_pause_frames": 17,
                }
            )
            return out if netdev == "ens5np0" else {"tx_pauseframes": 4}  # Emulex be2net

    nic, prio = RdmaCollector(NODE8, "n", Bnxt()).collect(1, problems)
    assert problems.items == []
    mine = [r for r in prio if r["netdev"] == "ens5np0"]
    assert len(mine) == 8
    p3 = next(r for r in mine if r["priority"] == 3)
    assert (p3["rx_pause_total"], p3["tx_pause_total"]) == (1200, 30)
    assert p3["rx_pause_duration_seconds_total"] == pytest.approx(2.5)
    for field in ("rx_bytes_total", "rx_packets_total", "rx_pause_transitions_total"):
        assert field not in p3, field
    n = next(r for r in nic if r["netdev"] == "ens5np0")
    assert (n["pfc_rx_pause_total"], n["pfc_tx_pause_total"]) == (1200, 30)
    assert n["pfc_rx_pause_duration_seconds_total"] == pytest.approx(2.5)
    assert (n["global_rx_pause_total"], n["global_tx_pause_total"]) == (17, 0)
    be2 = next(r for r in nic if r["netdev"] != "ens5np0")
    assert be2["global_tx_pause_total"] == 4 and be2.get("global_rx_pause_total") is None


def test_per_priority_rows_and_nic_aggregates(problems) -> None:
    c = RdmaCollector(NODE8, "n", TextEthtool(NODE8 / "ethtool"))
    nic, prio = c.collect(1, problems)
    assert problems.items == []
    assert len(prio) == 8 * 8  # 8 netdevs x 8 priorities
    p3 = next(r for r in prio if r["netdev"] == "ens5np0" and r["priority"] == 3)
    i = 4  # ens5np0 is NIC 4 in make_node8.py
    assert p3["device"] == "mlx5_4"
    assert p3["rx_pause_total"] == 1500 * (i + 1)
    assert p3["tx_pause_total"] == 900 * (i + 1)
    assert p3["rx_pause_duration_seconds_total"] == pytest.approx(0.25 * (i + 1))
    assert p3["rx_discards_total"] == 77
    assert p3["rx_pause_transitions_total"] == 700 * (i + 1)
    n = next(r for r in nic if r["device"] == "mlx5_4")
    assert n["pfc_rx_pause_total"] == 1500 * (i + 1)
    assert "pfc_rx_pause_prio3_total" not in n  # per priority is nic_priority_sample alone
    assert n["pfc_rx_pause_duration_seconds_total"] == pytest.approx(0.25 * (i + 1))
    assert n["rx_discards_phy_total"] == 1234
    assert n["pci_stalled_total"] == 10 * i + 3 * i
    assert n["out_of_buffer_total"] == 912
    assert n["ecn_marked_packets_total"] == 7000 * (i + 1)
    assert next(r for r in nic if r["device"] == "mlx5_3")["pause_storm_events_total"] == 2
    assert next(r for r in nic if r["device"] == "mlx5_5").get("xmit_wait_total") is None  # N/A


def test_ethtool_reset_counted(node8_copy: Path, problems) -> None:
    eth = node8_copy / "ethtool" / "ens1np0.txt"
    c = RdmaCollector(node8_copy, "n", TextEthtool(node8_copy / "ethtool"))
    c.collect(1, problems)
    eth.write_text(eth.read_text().replace("rx_prio3_pause: 1500", "rx_prio3_pause: 10"))
    nic, prio = c.collect(2, problems)
    p3 = next(r for r in prio if r["netdev"] == "ens1np0" and r["priority"] == 3)
    assert p3["rx_pause_total"] == 1510
    assert p3["resets_total"] == 1
    assert next(r for r in nic if r["netdev"] == "ens1np0")["resets_total"] == 1
