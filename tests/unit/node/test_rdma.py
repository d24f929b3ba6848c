"""RDMA/netdev sysfs parsing on the real procfs fixture tree (mlx4_0, mlx5_0, hfi1_0)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from exporters.node.rdma import (
    Malformed,
    RdmaCollector,
    load_counters,
    parse_rate,
    read_int,
    sysfs_root,
)

from .conftest import PROCFS


def rows_by_port(rows: list[dict]) -> dict[tuple[str, int], dict]:
    return {(r["device"], r["port"]): r for r in rows}


def test_mlx4_counters_exact_and_data_times_four(problems) -> None:
    nic, prio = RdmaCollector(PROCFS, "n1").collect(1, problems)
    r = rows_by_port(nic)
    p1 = r[("mlx4_0", 1)]
    assert p1["rx_bytes_total"] == 2221223609 * 4
    assert p1["tx_bytes_total"] == 26509113295 * 4
    assert p1["rx_packets_total"] == 87169372
    assert p1["tx_packets_total"] == 85734114
    assert p1["xmit_wait_total"] == 3599
    assert p1["link_layer"] == "InfiniBand"
    assert p1["up"] == 1
    assert p1["rate_bytes_per_second"] == 40e9 / 8
    assert r[("mlx4_0", 2)]["rx_bytes_total"] == 2460436784 * 4
    assert r[("mlx4_0", 2)]["xmit_wait_total"] == 3846
    assert prio == []  # no ethtool reader
    assert problems.items == []


def test_mlx5_hw_counters_exact(problems) -> None:
    nic, _ = RdmaCollector(PROCFS, "n1").collect(1, problems)
    m = rows_by_port(nic)[("mlx5_0", 1)]
    assert m["rx_bytes_total"] == 18126345378 * 4
    assert m["tx_bytes_total"] == 2880761508848 * 4
    assert m["local_ack_timeout_errors_total"] == 131
    assert m["out_of_sequence_total"] == 1
    assert m["packet_seq_errors_total"] == 1
    assert m["out_of_buffer_total"] == 0
    assert m["rate_bytes_per_second"] == 25e9 / 8
    # Not in this fixture (older firmware): absent, never 0.
    assert "ecn_marked_packets_total" not in m and "cnp_sent_total" not in m
    assert m["netdev"] == ""  # the capture has no device/net link


def test_sysfs_root_accepts_capture_dir_and_sys() -> None:
    assert sysfs_root(PROCFS) == PROCFS / "sys"
    assert sysfs_root(PROCFS / "sys") == PROCFS / "sys"


# (sysfs file under class/infiniband, its text, the field left out, a field still read)
@pytest.mark.parametrize(
    ("counter", "text", "missing", "kept", "reasons"),
    [
        # 'N/A' (no PMA) is skipped quietly
        ("mlx4_0/ports/1/counters/port_xmit_wait", "N/A (no PMA)\n", "xmit_wait_total",
         ("rx_bytes_total", 2221223609 * 4), []),
        # a malformed file is named, and the rest of the device reports
        ("mlx5_0/ports/1/hw_counters/out_of_sequence", "0x-garbage\n", "out_of_sequence_total",
         ("packet_seq_errors_total", 1), ["malformed_sysfs"]),
    ],
)  # fmt: skip
def test_an_unreadable_counter_is_left_out(
    procfs_copy: Path, problems, counter: str, text: str, missing: str, kept: tuple[str, int],
    reasons: list[str],
) -> None:  # fmt: skip
    (procfs_copy / "sys/class/infiniband" / counter).write_text(text)
    nic, _ = RdmaCollector(procfs_copy, "n1").collect(1, problems)
    device, _, port = counter.split("/")[:3]
    row = rows_by_port(nic)[(device, int(port))]
    assert missing not in row and row[kept[0]] == kept[1]
    assert rows_by_port(nic)[("mlx4_0", 1)]["rx_packets_total"] == 87169372
    assert problems.reasons == reasons
    assert all(counter.rsplit("/", 1)[1] in message for _, message in problems.items)  # named


def test_missing_device_ports_is_named(procfs_copy: Path, problems) -> None:
    ghost = procfs_copy / "sys/class/infiniband/mlx5_9"
    ghost.mkdir()
    nic, _ = RdmaCollector(procfs_copy, "n1").collect(1, problems)
    assert ("mlx4_0", 1) in rows_by_port(nic)
    assert problems.reasons == ["missing_device"]
    assert "mlx5_9" in problems.items[0][1]


def test_no_infiniband_class_is_nothing_here(tmp_path: Path, problems) -> None:
    (tmp_path / "sys" / "class" / "net").mkdir(parents=True)
    assert RdmaCollector(tmp_path, "n1").collect(1, problems) == ([], [])
    assert problems.items == []


def test_wrap_and_reset_between_two_scrapes(procfs_copy: Path, problems) -> None:
    ports = procfs_copy / "sys/class/infiniband/mlx4_0/ports/1/counters"
    (ports / "port_rcv_data").write_text(f"{(1 << 32) - 100}\n")
    c = RdmaCollector(procfs_copy, "n1")
    first = rows_by_port(c.collect(1, problems)[0])[("mlx4_0", 1)]
    (ports / "port_rcv_data").write_text("50\n")  # 32-bit wrap: +150 words
    second = rows_by_port(c.collect(2, problems)[0])[("mlx4_0", 1)]
    assert second["rx_bytes_total"] - first["rx_bytes_total"] == 150 * 4
    assert second["resets_total"] == 0
    # NIC reset: everything restarts near zero (port_xmit_data was 26509113295 > 2^32).
    for name in ("port_xmit_data", "port_xmit_packets"):
        (ports / name).write_text("1000\n")
    third = rows_by_port(c.collect(3, problems)[0])[("mlx4_0", 1)]
    assert third["tx_bytes_total"] == (26509113295 + 1000) * 4
    assert third["tx_packets_total"] == 85734114 + 1000
    assert third["resets_total"] == 1
    assert third["tx_bytes_total"] >= second["tx_bytes_total"]  # never a negative rate
    assert problems.items == []


def test_helpers() -> None:
    assert parse_rate("400 Gb/sec (4X NDR)") == 50e9
    assert parse_rate("2.5 Gb/sec (1X SDR)") == 2.5e9 / 8
    assert parse_rate("garbage") is None
    names = {c.name for c in load_counters()}
    assert {"port_rcv_data", "np_ecn_marked_roce_packets", "rx_prio{p}_pause"} <= names


@pytest.mark.parametrize(
    ("content", "want"),
    [
        ("18126345378\n", 18126345378),
        ("0x1f\n", 31),  # some drivers print hex
        ("N/A (no PMA)\n", None),  # not implemented by this HCA: absent, never 0
        ("0\n", 0),
        (str(2**64 - 1) + "\n", 2**64 - 1),
    ],
)
def test_read_int_values(tmp_path: Path, content: str, want: int | None) -> None:
    f = tmp_path / "c"
    f.write_text(content)
    assert read_int(f) == want
    fd = os.open(f, os.O_RDONLY)  # the scrape path: pread on a kept-open fd
    try:
        assert read_int(f, fd) == want
        assert read_int(f, fd) == want  # read again from offset 0, same value
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    ("content", "message"),
    [("-5\n", "negative counter -5"), ("twelve\n", "not an integer: 'twelve'")],
)
def test_read_int_rejects_malformed_naming_the_file(
    tmp_path: Path, content: str, message: str
) -> None:
    f = tmp_path / "c"
    f.write_text(content)
    with pytest.raises(Malformed) as e:
        read_int(f)
    assert str(e.value) == f"{f}: {message}"


# node_exporter's infiniband metric -> railscope's nic_sample field (docs/node-exporter.md).
NODE_EXPORTER_NAMES = {
    "state_id": "state_id",
    "physical_state_id": "phys_state_id",
    "rate_bytes_per_second": "rate_bytes_per_second",
    "port_data_received_bytes_total": "rx_bytes_total",
    "port_data_transmitted_bytes_total": "tx_bytes_total",
    "port_packets_received_total": "rx_packets_total",
    "port_packets_transmitted_total": "tx_packets_total",
    "port_errors_received_total": "rx_errors_total",
    "port_discards_received_total": "rx_discards_total",
    "port_discards_transmitted_total": "tx_discards_total",
    "port_constraint_errors_received_total": "rx_constraint_errors_total",
    "port_constraint_errors_transmitted_total": "tx_constraint_errors_total",
    "port_receive_remote_physical_errors_total": "rx_remote_physical_errors_total",
    "port_receive_switch_relay_errors_total": "rx_switch_relay_errors_total",
    "port_transmit_wait_total": "xmit_wait_total",
    "unicast_packets_received_total": "rx_unicast_packets_total",
    "unicast_packets_transmitted_total": "tx_unicast_packets_total",
    "multicast_packets_received_total": "rx_multicast_packets_total",
    "multicast_packets_transmitted_total": "tx_multicast_packets_total",
    "link_downed_total": "link_downed_total",
    "link_error_recovery_total": "link_error_recovery_total",
    "local_link_integrity_errors_total": "local_link_integrity_errors_total",
    "excessive_buffer_overrun_errors_total": "excessive_buffer_overrun_errors_total",
    "symbol_error_total": "symbol_errors_total",
    "vl15_dropped_total": "vl15_dropped_total",
    "legacy_data_received_bytes_total": "ext_rx_bytes_total",
    "legacy_data_transmitted_bytes_total": "ext_tx_bytes_total",
    "legacy_packets_received_total": "ext_rx_packets_total",
    "legacy_packets_transmitted_total": "ext_tx_packets_total",
    "legacy_unicast_packets_received_total": "ext_rx_unicast_packets_total",
    "legacy_unicast_packets_transmitted_total": "ext_tx_unicast_packets_total",
    "legacy_multicast_packets_received_total": "ext_rx_multicast_packets_total",
    "legacy_multicast_packets_transmitted_total": "ext_tx_multicast_packets_total",
}
NE_FIXTURE = Path(__file__).parents[2] / "fixtures" / "sysfs"


def node_exporter_series(text: str) -> dict[tuple[str, str, int], float]:
    """{(metric without prefix, device, port): value} of node_infiniband_* lines (info left out)."""
    import re

    out = {}
    for m in re.finditer(
        r'^node_infiniband_(\w+)\{device="([^"]+)",port="(\d+)"\} (\S+)$', text, re.M
    ):
        out[(m[1], m[2], int(m[3]))] = float(m[4])
    return out


def railscope_series(rows: list[dict]) -> dict[tuple[str, str, int], float]:
    out = {}
    for r in rows:
        for ne, field in NODE_EXPORTER_NAMES.items():
            if r.get(field) is not None:
                out[(ne, r["device"], r["port"])] = float(r[field])
    return out


def test_every_node_exporter_infiniband_series_on_its_own_fixture(problems) -> None:
    want = node_exporter_series((NE_FIXTURE / "node_exporter-infiniband.prom").read_text())
    assert len(want) == 49 and len({k[0] for k in want}) == 27
    nic, _ = RdmaCollector(NE_FIXTURE / "node_exporter", "n1").collect(1, problems)
    got = railscope_series(nic)
    assert got == want  # every series, every value; nothing node_exporter does not report
    assert problems.items == []  # i40iw0's "N/A (no PMA)" counters are skipped quietly


def test_every_mlx5_hw_counter_read(problems) -> None:
    """Each hw_counters file of the procfs mlx5_0 fixture lands in a field with its exact value,
    except `lifespan` (the rdma core's read-cache period in ms, not a counter)."""
    hw = PROCFS / "sys" / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "hw_counters"
    by_name = {c.name: c.field for c in load_counters() if c.source == "hw_counters"}
    nic, _ = RdmaCollector(PROCFS, "n1").collect(1, problems)
    m = rows_by_port(nic)[("mlx5_0", 1)]
    files = sorted(os.listdir(hw))
    assert len(files) == 25
    for name in files:
        if name == "lifespan":
            continue
        assert m[by_name[name]] == int((hw / name).read_text()), name
    assert m["state_id"] == 4 and m["phys_state_id"] == 4  # the fixture says "4: ACTIVE" for both
    # every counter drivers/infiniband/hw/mlx5/counters.c names (basic, out_of_seq, retrans,
    # extended_err, roce_accl, cong, ext_ppcnt tables) has a row in nic_counters.csv
    kernel = [
        "rx_write_requests",
        "rx_read_requests",
        "rx_atomic_requests",
        "rx_dct_connect",
        "out_of_buffer",
        "out_of_sequence",
        "duplicate_request",
        "rnr_nak_retry_err",
        "packet_seq_err",
        "implied_nak_seq_err",
        "local_ack_timeout_err",
        "resp_local_length_error",
        "resp_cqe_error",
        "req_cqe_error",
        "req_remote_invalid_request",
        "req_remote_access_errors",
        "resp_remote_access_errors",
        "resp_cqe_flush_error",
        "req_cqe_flush_error",
        "roce_adp_retrans",
        "roce_adp_retrans_to",
        "roce_slow_restart",
        "roce_slow_restart_cnps",
        "roce_slow_restart_trans",
        "rp_cnp_ignored",
        "rp_cnp_handled",
        "np_ecn_marked_roce_packets",
        "np_cnp_sent",
        "rx_icrc_encapsulated",
    ]
    assert len(kernel) == 29 and set(kernel) <= set(by_name)
