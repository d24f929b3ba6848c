"""Fuzzing the node exporter's text parsers with inputs seeded from the real fixtures: sysfs
counter files (only Malformed escapes; the collector counts it as rdma:malformed_sysfs), port
state / phys_state / rate files (never raise), and `ethtool -S` text (only EthtoolError escapes;
counted as ethtool:malformed_ethtool). >= 100,000 inputs per parser; marked slow."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from exporters.node.ethtool import EthtoolError, parse_ethtool_s
from exporters.node.rdma import Malformed, parse_counter, parse_rate, state_id
from tests.fuzz import PER_EXAMPLE, fuzz, inputs

pytestmark = pytest.mark.slow
FIX = Path(__file__).parents[2] / "fixtures"


def _sysfs_seeds() -> list[str]:
    out = set()
    for tree in ("sysfs/procfs/sys/class/infiniband", "sysfs/node_exporter/sys/class/infiniband"):
        for p in (FIX / tree).rglob("*"):
            if p.is_file():
                out.add(p.read_text(errors="replace"))
    return sorted(out)


SYSFS = _sysfs_seeds()
ETHTOOL = [
    ln for p in (FIX / "ethtool").glob("*.txt") for ln in p.read_text().splitlines() if ln.strip()
]


def test_sysfs_files_let_only_malformed_out() -> None:
    def check(rnd: random.Random) -> int:
        for text in inputs(rnd, SYSFS, PER_EXAMPLE):
            raw = text.encode("utf-8", errors="surrogateescape")
            try:
                v = parse_counter(raw, "f")
                assert v is None or v >= 0
            except Malformed:
                pass
            r = parse_rate(text)
            assert r is None or r >= 0
            s = state_id(text)
            assert s is None or 0 <= s < 256
        return PER_EXAMPLE

    fuzz(check)
    assert parse_rate("1.2.3 Gb/sec") is None and parse_rate(". Gb/sec (4X)") is None


def test_ethtool_text_lets_only_ethtool_error_out() -> None:
    def check(rnd: random.Random) -> int:
        dumps = [inputs(rnd, ETHTOOL, 25) for _ in range(PER_EXAMPLE // 25)]  # `ethtool -S` x 25
        for lines in dumps:
            try:
                stats = parse_ethtool_s("\n".join(lines))
            except EthtoolError as e:
                assert e.reason == "malformed_ethtool"
                continue
            assert all(isinstance(v, int) for v in stats.values())
        return sum(map(len, dumps))

    fuzz(check)
