"""Secrets never reach output or logs: a set of CLI runs (config show/check, store errors with a
DSN password, Redis with a password, a malformed DSN, debug logging) is grepped for the test
passwords; every secret can come from a file (`<key>_file:`, $RAILSCOPE_DSN_FILE)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from telemetry.config import load_config, redact_text
from telemetry.errors import ConfigError
from telemetry.store.dsn import parse_dsn

ROOT = Path(__file__).parents[3]
DSN_PW = "DsnPw-7f3a/x"  # a '/' exercises URL quoting
REDIS_PW = "RedisPw-55e1"
SERVE_PW = "ServePw-91c2"
BAD_PW = "BadPortPw-0c1d"
FILE_DSN_PW = "FileDsnPw-a8b2"
SECRETS = (DSN_PW, "DsnPw-7f3a%2Fx", REDIS_PW, SERVE_PW, BAD_PW, FILE_DSN_PW)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_no_cli_output_or_log_line_carries_a_secret(tmp_path: Path) -> None:
    port = _closed_port()
    (tmp_path / "dsn-pw").write_text(DSN_PW + "\n")
    (tmp_path / "redis-pw").write_text(REDIS_PW + "\n")
    (tmp_path / "serve-pw").write_text(SERVE_PW + "\n")
    cfg = tmp_path / "railscope.yaml"
    cfg.write_text(
        f"store:\n  dsn: http://railscope@127.0.0.1:{port}/railscope\n"
        f"  password_file: {tmp_path / 'dsn-pw'}\n"
        f"serve:\n  users: [{{name: grafana, password_file: {tmp_path / 'serve-pw'}}}]\n"
        "sources:\n  switch:\n    switches:\n"
        f"      - {{name: leaf01, address: '127.0.0.1:{_closed_port()}', "
        f"password_file: {tmp_path / 'redis-pw'}}}\n"
    )
    (tmp_path / "dsn").write_text(f"http://u:{FILE_DSN_PW}@127.0.0.1:{port}/railscope\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAILSCOPE")}
    env["PYTHONPATH"] = str(ROOT)
    runs = [
        ["config", "show", str(cfg)],
        ["config", "check", str(cfg)],
        ["--config", str(cfg), "db", "status"],
        ["--config", str(cfg), "--log-level", "debug", "db", "migrate"],
        ["--config", str(cfg), "switch", "--once"],
        ["--config", str(cfg), "switch", "--once", "--dsn", f"http://u:{BAD_PW}@h:notaport/db"],
        ["db", "status", "--dsn", f"http://u:{BAD_PW}@127.0.0.1:{port}/db"],
    ]
    seen = []
    for argv in runs:
        out = subprocess.run([sys.executable, "-m", "telemetry.cli", *argv], capture_output=True,
                             text=True, env=env, timeout=120, cwd=tmp_path)  # fmt: skip
        seen.append((argv, out.returncode, out.stdout + out.stderr))
    out = subprocess.run([sys.executable, "-m", "telemetry.cli", "config", "show"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path,
                         env={**env, "RAILSCOPE_DSN_FILE": str(tmp_path / "dsn")})  # fmt: skip
    seen.append(
        (["config", "show", "(RAILSCOPE_DSN_FILE)"], out.returncode, out.stdout + out.stderr)
    )
    for argv, _, text in seen:
        for secret in SECRETS:
            assert secret not in text, f"{secret!r} printed by railscope {' '.join(argv)}:\n{text}"
    by_cmd = {" ".join(a): (rc, text) for a, rc, text in seen}
    rc, shown = by_cmd[f"config show {cfg}"]
    assert rc == 0 and f"http://railscope:***@127.0.0.1:{port}/railscope" in shown
    assert shown.count("password: '***'") == 2  # the Redis and the serve user's
    rc, text = by_cmd[f"--config {cfg} db status"]
    assert rc != 0 and "railscope:" in text  # failed to connect, and said so
    rc, text = by_cmd[f"--config {cfg} switch --once --dsn http://u:{BAD_PW}@h:notaport/db"]
    assert rc == 2 and "port is not a number" in text and "http://u:***@h:notaport/db" in text
    rc, text = by_cmd["config show (RAILSCOPE_DSN_FILE)"]
    assert rc == 0 and f"http://u:***@127.0.0.1:{port}/railscope" in text


def test_secret_files_feed_the_effective_config(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("p@ss/word\n")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"store: {{dsn: 'http://railscope@ch:8123/railscope', password_file: '{tmp_path / 'pw'}'}}\n"
        f"sources: {{switch: {{switches: [{{name: s, password_file: '{tmp_path / 'pw'}'}}]}}}}\n"
        f"serve: {{users: [{{name: g, password_file: '{tmp_path / 'serve-pw'}', readonly: 2}}]}}\n"
    )
    # the serve user's file goes through the same `<key>_file` as every other secret: its
    # whole content, whitespace at both ends dropped (trailing spaces included)
    (tmp_path / "serve-pw").write_text(" serve pw \t\n\n")
    c = load_config(cfg, env={})
    dsn = parse_dsn(c.store.dsn)
    assert (dsn.username, dsn.password, dsn.host) == ("railscope", "p@ss/word", "ch")
    assert c.sources["switch"]["switches"][0]["password"] == "p@ss/word"
    assert c.serve.users[0].password == "serve pw"
    assert c.serve.authenticate("g", "serve pw") is not None
    assert c.serve.authenticate("g", " serve pw \t") is None
    assert "serve pw" not in redact_text("login serve pw")  # remembered as a secret
    assert "p@ss/word" not in redact_text(f"connecting with {dsn.password} to {c.store.dsn}")
    cfg.write_text(f"store: {{password_file: '{tmp_path / 'missing'}'}}\n")
    with pytest.raises(ConfigError, match=r"store.password_file: cannot read .*missing"):
        load_config(cfg, env={})
    cfg.write_text(
        f"sources: {{switch: {{switches: [{{name: s, password: x, password_file: '{tmp_path / 'pw'}'}}]}}}}\n"
    )
    with pytest.raises(ConfigError, match="give password or password_file, not both"):
        load_config(cfg, env={})


def test_dsn_errors_never_repeat_the_password() -> None:
    for bad in (f"http://u:{BAD_PW}@h:notaport/db", f"http://u:{BAD_PW}@/db",
                f"ftp://u:{BAD_PW}@h/db", f"http://u:{BAD_PW}@h:1/bad-db!"):  # fmt: skip
        with pytest.raises(ConfigError) as e:
            parse_dsn(bad)
        assert BAD_PW not in str(e.value), str(e.value)
