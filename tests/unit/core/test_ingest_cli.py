"""`railscope ingest` as an operator starts it: what it refuses before it opens anything, in one
line, and its help."""

from __future__ import annotations

from pathlib import Path

from tests.cli import rs


def test_a_gateway_open_to_the_network_needs_users(tmp_path: Path) -> None:
    r = rs("ingest", "--dsn", f"chdb://{tmp_path / 's'}", "--ingest-listen", "0.0.0.0:8124")
    assert r.returncode == 2
    assert r.stderr.strip() == (
        "railscope: error: ingest: listening on 0.0.0.0:8124 without ingest.users would let "
        "anyone who reaches it write to the store: configure ingest.users or listen on 127.0.0.1"
    )
    assert not (tmp_path / "s").exists()  # refused before the store was opened


def test_the_ingest_section_is_checked_up_front(tmp_path: Path) -> None:
    cfg = tmp_path / "railscope.yaml"
    cfg.write_text("ingest:\n  flush_seconds: 0\n")
    r = rs("config", "check", str(cfg))
    assert r.returncode == 2 and "ingest.flush_seconds" in r.stderr
    assert r.stderr.strip().count("\n") == 0
    cfg.write_text("ingest:\n  tls_cert_file: /nonexistent.pem\n")
    r = rs("config", "check", str(cfg))
    assert r.returncode == 2 and "tls_cert_file and tls_key_file go together" in r.stderr


def test_help_says_what_it_takes_and_gives() -> None:
    r = rs("ingest", "--help")
    assert r.returncode == 0
    assert "--ingest-listen" in r.stdout and "ingest.flush_seconds" in r.stdout
    assert "nothing is lost and nothing is stored twice" in " ".join(r.stdout.split())
