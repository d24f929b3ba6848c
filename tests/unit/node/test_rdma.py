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


def test_na_is_skipped_quietly(procfs_copy: Path, problems) -> None:
    f = procfs_copy / "sys/class/infiniband/mlx4_0/ports/1/counters/port_xmit_wait"
    f.write_text("N/A (no PMA)\n")
    nic, _ = RdmaCollector(procfs_copy, "n1").collect(1, problems)
    p1 = rows_by_port(nic)[("mlx4_0", 1)]
    assert "xmit_wait_total" not in p1
    assert p1["rx_bytes_total"] == 2221223609 * 4
    assert problems.items == []


def test_malformed_file_is_named_and_rest_reports(procfs_copy: Path, problems) -> None:
    bad = procfs_copy / "sys/class/infiniband/mlx5_0/ports/1/hw_counters/out_of_sequence"
    bad.write_text("0x-garbage\n")
    nic, _ = RdmaCollector(procfs_copy, "n1").collect(1, problems)
    m = rows_by_port(nic)[("mlx5_0", 1)]
    assert "out_of_sequence_total" not in m
    assert m["packet_seq_errors_total"] == 1
    assert rows_by_port(nic)[("mlx4_0", 1)]["rx_packets_total"] == 87169372
    assert problems.reasons == ["malformed_sysfs"]
    assert "out_of_sequence" in problems.items[0][1]


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
