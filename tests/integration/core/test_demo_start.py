"""`railscope demo --start` older than the tables' TTL is refused in one line before anything is
stored (the store would drop those rows as it merges, and the demo would score on what is left)."""

from __future__ import annotations

from pathlib import Path

from tests.cli import rs


def test_a_start_older_than_the_ttl_is_refused_before_storing(tmp_path: Path) -> None:
    data = tmp_path / "demo"
    r = rs("demo", "--data", str(data), "--minutes", "1", "--start", "2020-01-01T00:00:00Z")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "older than the tables' TTL" in r.stderr and "keeps" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not data.exists()  # refused before the store was opened
