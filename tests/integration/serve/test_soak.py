"""Soak (slow, ~100 s): `railscope serve` with node + sFlow + inventory at 1 s, correlate on 5 s
windows and 20 concurrent readers on the endpoint for a minute and a half: no reader error, no
error in serve's log, every reader served throughout, memory flat after the warm-up, SIGTERM
exits 0. bench/serve.py --soak runs the same for longer and reports the RSS."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.serve.soak import run_soak

WARMUP_SECONDS = 30


@pytest.mark.slow
def test_soak(tmp_path: Path) -> None:
    s = run_soak(tmp_path, seconds=90, readers=20)
    assert not s.errors, s.errors[:3]
    assert min(s.answered) > 10, s.answered  # every reader was served all along
    assert s.exit_code == 0, s.log[-3000:]
    assert " ERROR " not in s.log and "Traceback" not in s.log, s.log[-3000:]
    print(f"serve RSS MiB over the soak: {[round(k / 1024) for _, k in s.samples]}")
    after = [kib for t, kib in s.samples if t >= WARMUP_SECONDS]
    # flat after the warm-up: engine caches settle in the first windows; no steady growth after
    assert len(after) >= 5 and max(after) - after[0] < 0.25 * after[0], s.samples
