"""A real redis-server on a free loopback port, for the switch tests and bench/switch.py."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def redis_server(exe: str, databases: int, workdir: str | Path) -> Iterator[int]:
    """Run `exe` (redis-server) with `databases` databases and no persistence, files under
    `workdir`; yields its port once it answers PING (RuntimeError if it never does)."""
    import redis

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--databases", str(databases), "--dir", str(workdir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(100):
            try:
                redis.Redis(port=port).ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        else:
            raise RuntimeError("redis-server did not start")
        yield port
    finally:
        proc.terminate()
        proc.wait(10)
