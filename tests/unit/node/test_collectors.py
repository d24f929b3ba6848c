"""The node source's collectors switched one by one: from config (`collectors:`, the older
`ethtool:` key) and from flags (`--collector.X` / `--no-collector.X`), through the same
build_source the CLI and `railscope serve` use."""

from __future__ import annotations

from pathlib import Path

import pytest

from telemetry.cli import build_parser
from telemetry.commands.sources import source_from_args
from telemetry.config import load_config
from telemetry.registry import build_source

from .conftest import NODE8

ALL = {"gpu_sample", "gpu_event", "nic_sample", "nic_priority_sample", "gpu_nic_affinity"}


def collect(argv: list[str], config: str | None = None) -> tuple[set[str], set[str], list]:
    args = build_parser().parse_args(["node", "--from", str(NODE8), *argv, "--output", "jsonl"])
    src = source_from_args(args, load_config(config, env={}))
    try:
        batches = src.collect()
    finally:
        src.close()  # type: ignore[attr-defined]
    return {b.kind.name for b in batches}, set(src.stats.collectors), batches


def test_all_collectors_by_default() -> None:
    kinds, ran, _ = collect([])
    assert kinds == ALL
    assert ran == {"gpu", "rdma", "ethtool", "pcie", "podresources", "processes"}


@pytest.mark.parametrize(
    ("flags", "kinds", "ran"),
    [
        # processes runs with gpu only (node8's fake GPUs run no process: no gpu_process rows)
        (["--no-collector.gpu"], ALL - {"gpu_sample", "gpu_event"}, {"rdma", "ethtool", "pcie", "podresources"}),
        (["--no-collector.rdma"], {"gpu_sample", "gpu_event", "gpu_nic_affinity"}, {"gpu", "pcie", "podresources", "processes"}),
        (["--no-collector.ethtool"], ALL - {"nic_priority_sample"}, {"gpu", "rdma", "pcie", "podresources", "processes"}),
        (["--no-ethtool"], ALL - {"nic_priority_sample"}, {"gpu", "rdma", "pcie", "podresources", "processes"}),
        (["--no-collector.pcie"], ALL - {"gpu_nic_affinity"}, {"gpu", "rdma", "ethtool", "podresources", "processes"}),
        (["--no-collector.podresources"], ALL, {"gpu", "rdma", "ethtool", "pcie", "processes"}),
        (["--no-collector.processes"], ALL, {"gpu", "rdma", "ethtool", "pcie", "podresources"}),
    ],
)  # fmt: skip
def test_no_collector_flag_switches_one_off(
    flags: list[str], kinds: set[str], ran: set[str]
) -> None:
    got_kinds, got_ran, _ = collect(flags)
    assert (got_kinds, got_ran) == (kinds, ran)


def test_podresources_off_leaves_pods_unset() -> None:
    _, _, on = collect([])
    _, _, off = collect(["--no-collector.podresources"])

    def pods(batches: list) -> set[str]:
        return {
            r["pod"] for b in batches if b.kind.name == "gpu_sample" for r in b.table.to_pylist()
        }

    assert pods(on) == {"llama-train-worker-0", ""} and pods(off) == {""}


def test_config_switches_and_the_flag_turns_one_back_on(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(
        "sources:\n  node:\n    collectors: {gpu: false, pcie: false}\n    ethtool: false\n"
    )
    kinds, ran, _ = collect([], str(f))
    assert ran == {"rdma", "podresources"}
    assert kinds == {"nic_sample"}
    kinds, ran, _ = collect(["--collector.gpu", "--collector.ethtool"], str(f))
    assert ran == {"gpu", "rdma", "ethtool", "podresources", "processes"}
    assert kinds == ALL - {"gpu_nic_affinity"}


def test_serve_builds_the_same_source_from_config(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(f"sources:\n  node:\n    from: {NODE8}\n    collectors: {{gpu: false}}\n")
    src = build_source("node", load_config(str(f), env={}))
    try:
        assert {b.kind.name for b in src.collect()} == ALL - {"gpu_sample", "gpu_event"}
    finally:
        src.close()  # type: ignore[attr-defined]
