"""The fault soak, short: bench/soak.py for 60 s instead of 300 (`python bench/soak.py` runs the
5-minute one). `railscope sflow` writes to `railscope serve` through the store unreachable twice,
read-only once (TABLE_IS_READ_ONLY), the serve process SIGTERMed and restarted, the spool disk
filled to the last byte (a real tmpfs; root only), two collector SIGTERMs and restarts, and
malformed datagrams throughout; the spool is capped at 1 MiB, so outages drop its oldest
batches. Rows stored = samples sent - samples counted as dropped, none twice, every process
exits 0, no Traceback in any log, and every fault left its log line. A batch the store wrote
whose answer the proxy cut off, later evicted, is counted as unconfirmed, not dropped: stored
rows exceed sent - dropped by at most the unconfirmed ones (exact when there are none)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[3]


@pytest.mark.slow
def test_short_fault_soak_stores_what_was_sent_minus_what_was_counted() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "soak.py"), "--seconds", "60"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert res.stdout.strip(), res.stderr[-3000:]
    result = json.loads(res.stdout.strip().splitlines()[-1])
    print(json.dumps(result, indent=1))
    why = {k: result[k] for k in ("tracebacks_in", "collector_rcs", "serve_rcs", "fault_log_lines")}
    assert res.returncode == 0 and result["ok"], (why, res.stderr[-2000:])
    assert result["sent_samples"] > 100_000
    # the outages overflow the 1 MiB spool: the oldest batches are dropped, and counted
    assert result["counted_dropped"] > 0
    counted = result["sent_samples"] - result["counted_dropped"] - result["kernel_dropped_samples"]
    assert counted - result["counted_unconfirmed"] <= result["stored_rows"] <= counted
    assert result["stored_rows"] == result["distinct_rows"]
    assert result["collector_rcs"] == [0, 0, 0] and result["serve_rcs"] == [0, 0]
    assert result["tracebacks_in"] == {}
    faults = result["fault_log_lines"]
    assert faults["unreachable"] and faults["read_only"]
    if result["disk_full_fault"]:
        assert faults["spool_disk_full"]
