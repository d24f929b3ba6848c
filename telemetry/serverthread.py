"""One HTTP server's event loop on a thread of its own: what every railscope HTTP server shares
(the ClickHouse endpoint of `railscope serve` and of the ingest gateway, serve/http.py, and
/metrics, sinks/prometheus.py). The caller's coroutine binds (with the TLS context telemetry/tls.py
loads) and returns the bound address; a bind error reaches the caller as one line; stopping runs
the caller's close coroutine on the loop, then ends the loop and its thread. Never handles a
request itself.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger(__name__)


class ServerThread:
    """`start(bind, host, port)` runs `bind()` on a new loop in a thread named `name` and serves
    until `stop(close)`. `what` names the server in errors ("/metrics")."""

    def __init__(self, name: str, what: str) -> None:
        self.name, self.what = name, what
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(
        self,
        bind: Callable[[], Coroutine[Any, Any, tuple[str, int]]],
        host: str,
        port: int,
        wait: float = 30.0,
    ) -> tuple[str, int]:
        """Bind and serve from the thread. Returns the bound (host, port); OSError (one line)
        where it cannot bind."""
        ready = threading.Event()
        got: list[tuple[str, int] | BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self.loop = loop
            asyncio.set_event_loop(loop)
            try:
                got.append(loop.run_until_complete(bind()))
            except BaseException as e:  # the bind error reaches the caller
                got.append(OSError(f"cannot serve {self.what} on {host}:{port}: {e}"))
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._thread.start()
        if not ready.wait(wait):
            raise OSError(f"cannot serve {self.what} on {host}:{port}: not bound in {wait:g} s")
        result = got[0]
        if isinstance(result, BaseException):
            raise result
        return result

    @property
    def running(self) -> bool:
        return self.loop is not None and self.loop.is_running()

    def call_soon(self, fn: Callable[[], object]) -> None:
        """Run `fn` on the loop (from any thread), if it is serving."""
        loop = self.loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(fn)

    def stop(self, close: Callable[[], Coroutine[Any, Any, None]], timeout: float = 10.0) -> None:
        """Run `close()` on the loop (at most `timeout` s: handlers still running are closed
        with the loop), then end the loop and the thread."""
        loop = self.loop
        if loop is not None and loop.is_running():
            try:
                asyncio.run_coroutine_threadsafe(close(), loop).result(timeout)
            except Exception as e:
                log.warning("%s did not close in time: %s", self.what, e or type(e))
            finally:
                loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
