"""`railscope` as an operator runs it, for tests: a separate process (`python -m telemetry.cli`)
on this checkout's code, reading no store DSN or config file from the caller's environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def rs(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """`railscope ARGS` (output captured as text); `env` adds variables, and may set
    RAILSCOPE_DSN / RAILSCOPE_CONFIG again."""
    e = {k: v for k, v in os.environ.items() if k not in ("RAILSCOPE_DSN", "RAILSCOPE_CONFIG")}
    e.update({"PYTHONPATH": str(ROOT), **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "telemetry.cli", *args],
        capture_output=True,
        text=True,
        env=e,
        cwd=cwd,
        timeout=timeout,
    )
