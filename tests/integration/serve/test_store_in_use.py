"""A command on an embedded store another process holds: one line naming the store, the holder's
pid and the `--dsn http://...` to use instead; exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.integration.serve.conftest import railscope

HOLD = (
    "import chdb, sys; c = chdb.connect(sys.argv[1]); print('held', flush=True); sys.stdin.read()"
)


def _hold(path: Path) -> subprocess.Popen[str]:
    p = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


def test_store_held_by_another_process_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "store"
    holder = _hold(path)
    try:
        r = railscope("db", "status", "--dsn", f"chdb://{path}")
        assert r.returncode == 2
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, r.stderr  # not the engine's own "Cannot lock file" line too
        assert lines[0].startswith(f"railscope: error: embedded store {path} is in use")
        assert f"by pid {holder.pid}" in lines[0]
        assert "--dsn http://127.0.0.1:8123" in lines[0]
        # a running `railscope serve` says where its endpoint is
        (path / "railscope-serve.url").write_text("http://127.0.0.1:18123\n")
        r = railscope("db", "status", "--dsn", f"chdb://{path}")
        assert r.returncode == 2 and "--dsn http://127.0.0.1:18123 instead" in r.stderr
    finally:
        holder.kill()
        holder.wait()
    # the holder is gone (killed: its status file stays behind); the store opens again
    (path / "railscope-serve.url").unlink()
    assert (path / "status").exists()
    r = railscope("db", "status", "--dsn", f"chdb://{path}")
    assert r.returncode == 0, r.stderr
    assert "in use" not in r.stderr
