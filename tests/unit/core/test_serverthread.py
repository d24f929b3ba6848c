"""The one server thread every railscope HTTP server runs on (telemetry/serverthread.py): it
binds on its own loop, says in one line what it could not bind, and ends its thread on stop."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from telemetry.serverthread import ServerThread

Bind = Callable[[], Coroutine[Any, Any, tuple[str, int]]]


def echo_server(host: str, port: int) -> tuple[list[asyncio.Server], Bind]:
    servers: list[asyncio.Server] = []

    async def bind() -> tuple[str, int]:
        async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            w.write(await r.readline())
            await w.drain()
            w.close()

        srv = await asyncio.start_server(handle, host, port)
        servers.append(srv)
        got = srv.sockets[0].getsockname()
        return str(got[0]), int(got[1])

    return servers, bind


def test_serves_from_its_thread_and_stops() -> None:
    t = ServerThread("test-server", "echo")
    servers, bind = echo_server("127.0.0.1", 0)
    host, port = t.start(bind, "127.0.0.1", 0)
    assert port > 0 and t.running
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(b"hi\n")
        assert s.recv(16) == b"hi\n"
    closed = []

    async def close() -> None:
        servers[0].close()
        await servers[0].wait_closed()
        closed.append(True)

    t.stop(close, 5.0)
    assert closed and not t.running
    assert not [x for x in threading.enumerate() if x.name == "test-server"]
    with pytest.raises(OSError):
        socket.create_connection((host, port), timeout=1)


def test_a_port_in_use_is_one_line_naming_the_server() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        t = ServerThread("test-server-2", "/metrics")
        _, bind = echo_server("127.0.0.1", port)
        with pytest.raises(OSError) as e:
            t.start(bind, "127.0.0.1", port)
        assert str(e.value).startswith(f"cannot serve /metrics on 127.0.0.1:{port}: ")
        assert "\n" not in str(e.value)
        assert not t.running
