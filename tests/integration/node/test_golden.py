"""Golden end-to-end: `railscope node --from node8 --gpu-backend fake --output prom` against the
checked-in expected /metrics text, and `promtool check metrics` on it.

RAILSCOPE_UPDATE_GOLDEN=1 rewrites tests/golden/node/node8.prom; review the diff before committing.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli import rs
from tests.sysfs_fixture import node8

ROOT = Path(__file__).resolve().parents[3]
NODE8 = node8()
GOLDEN = ROOT / "tests" / "golden" / "node" / "node8.prom"
# Durations are the only values that differ run to run.
_DURATION = re.compile(
    r"^(railscope_collector_duration_seconds\{[^}]*\}) \S+$",
    re.M,
)


def normalise(text: str) -> str:
    return _DURATION.sub(r"\1 <duration>", text)


def scrape_output() -> str:
    out = rs("node", "--from", str(NODE8), "--gpu-backend", "fake", "--output", "prom",
             "--node-name", "gpu-node-01", env={"RAILSCOPE_CLUSTER": "golden"})  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_golden_metrics() -> None:
    got = normalise(scrape_output())
    if os.environ.get("RAILSCOPE_UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(got)
    want = GOLDEN.read_text()
    if got != want:
        diff = "".join(
            difflib.unified_diff(want.splitlines(True), got.splitlines(True), "golden", "got", n=1)
        )
        pytest.fail(
            f"/metrics differs from {GOLDEN} (RAILSCOPE_UPDATE_GOLDEN=1 to accept):\n{diff[:6000]}"
        )


def test_golden_is_valid_for_promtool() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package `prometheus`)")
    text = scrape_output()
    r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_golden_spot_values() -> None:
    """Values a reader can check against the fixture by hand (make_node8.py)."""
    text = GOLDEN.read_text()

    def value(prefix: str) -> float:
        for line in text.splitlines():
            if line.startswith(prefix):
                return float(line.rsplit(" ", 1)[1])
        raise AssertionError(f"no series starting with {prefix}")

    # mlx5_0: port_rcv_data = 4_000_000_000 + 1_000_003 * 17 words, x4 bytes
    assert (
        value('railscope_nic_rx_bytes_total{cluster="golden",container="trainer",device="mlx5_0"')
        == (4_000_000_000 + 1_000_003 * 17) * 4
    )
    assert value('railscope_gpu_power_watts{cluster="golden",gpu="5"') == 655.0
    assert value('railscope_gpu_nic_affinity_direct_nic{cluster="golden",gpu="7"') == 0.0
    assert value('railscope_gpu_xid_errors_total{cluster="golden",gpu="2"') == 1.0
    assert (
        value(
            'railscope_nic_priority_rx_pause_total{cluster="golden",device="mlx5_2",netdev="ens3np0",node="gpu-node-01",priority="3"}'
        )
        == 4500.0
    )
    assert (
        'railscope_gpu_memory_temperature_celsius{cluster="golden",gpu="7"' not in text
    )  # unsupported: absent
    assert (
        'railscope_nic_xmit_wait_total{cluster="golden",container="",device="mlx5_5"' not in text
    )  # N/A
