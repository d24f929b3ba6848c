"""`railscope switch --once` as a separate process, for the Redis and gNMI source tests."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli import rs


def once_kinds(tmp_path: Path, flag: str, spec: str) -> list[str]:
    """The record kinds `switch --once --output jsonl FLAG SPEC` prints, in order; it must exit 0.
    Then the same flag given a spec without `=HOST:PORT` must be refused in one line."""
    env = {"RAILSCOPE_DSN": f"chdb://{tmp_path}/unused"}
    out = rs("switch", "--once", "--output", "jsonl", flag, spec, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    bad = rs("switch", "--once", flag, spec.split("=")[0], env=env, timeout=60)
    assert bad.returncode == 2 and "NAME=HOST:PORT" in bad.stderr and "Traceback" not in bad.stderr
    return [json.loads(line)["_kind"] for line in out.stdout.splitlines()]
