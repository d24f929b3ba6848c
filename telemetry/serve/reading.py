"""Reading a request of the query endpoint: who sent it (authentication, failed logins throttled
per user name and per source network) and its body or form, each byte held counted against serve.max_buffered_bytes and every
decompression stopped just past serve.max_request_bytes.

Never logs a credential or a body: a failed login is logged with the peer and, only where it is a
configured one, the user name.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import time
from concurrent.futures import ThreadPoolExecutor

from aiohttp import BodyPartReader, web

from telemetry.errors import EngineError
from telemetry.serve.compression import decompressor
from telemetry.serve.config import ServeConfig, ServeUser
from telemetry.serve.limits import (
    BODY_GRACE,
    BODY_IDLE,
    BODY_MIN_RATE,
    BodyBudget,
    Conn,
    LoginThrottle,
    LogLimiter,
    source_net,
)


class RequestReader:
    """Authentication and bodies for the endpoint's handlers (on its event loop)."""

    def __init__(self, config: ServeConfig, pool: ThreadPoolExecutor, note: LogLimiter) -> None:
        self.config, self.pool, self.note = config, pool, note
        self.logins = LoginThrottle()
        self.budget: BodyBudget | None = None  # made on the event loop (BodyBudget waits on it)
        self.body_wait = 10.0  # seconds a body waits for room in serve.max_buffered_bytes

    async def user(self, request: web.Request, conn: Conn | None = None) -> ServeUser:
        """The request's user. Every failure answers the same text (no user enumeration); a name or
        network with many recent failures has its failures answered one per second (LoginThrottle)."""
        q = request.query
        name, password = "default", ""
        auth = request.headers.get("Authorization", "")
        decoded = True
        if auth.lower().startswith("basic "):
            try:
                name, _, password = base64.b64decode(auth[6:].strip()).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError, ValueError):
                decoded = False
        elif "X-ClickHouse-User" in request.headers:
            name = request.headers["X-ClickHouse-User"]
            password = request.headers.get("X-ClickHouse-Key", "")
        elif "user" in q:
            name, password = q["user"], q.get("password", "")
        peer = request.remote or "?"
        # the password first, at a bounded cost: a correct one passes however many wrong ones
        # wait (LoginThrottle)
        user = self.config.authenticate(name or "default", password) if decoded else None
        if user is not None:
            return user
        keys = (f"user:{name[:128]}", f"net:{source_net(peer)}")
        failures = self.logins.failed(*keys)
        if conn is not None and conn.reading is None:  # a throttled login is at the door
            conn.reading = time.monotonic()
        await self.logins.delay(*keys)
        known = any(u.name == name for u in self.config.users) or (
            not self.config.users and name == "default"
        )
        # the name only where it is a configured one: never what a client typed there (a password
        # pasted into the user field would be logged)
        self.note(
            logging.WARNING,
            "login_failed",
            "serve: failed login from %s as %s (%d failures of that name or network in the last "
            "minute)",
            peer,
            repr(name) if known else "an unknown user",
            failures,
        )
        shown = name if known else _printable(name)
        raise EngineError(
            516,
            f"{shown}: Authentication failed: password is incorrect, or there is no user with "
            "such name.",
            "AUTHENTICATION_FAILED",
        )

    async def _read(self, request: web.Request, reserved: list[int]) -> bytes:
        """The request body, each chunk reserved against serve.max_buffered_bytes first."""
        limit = self.config.max_request_bytes
        too_big = EngineError(
            229,
            f"Request body is larger than serve.max_request_bytes ({limit} bytes)",
            "QUERY_IS_TOO_LARGE",
        )
        if request.content_length is not None and request.content_length > limit:
            raise too_big
        await self._reserve(request.content_length or 0, reserved)
        parts, size = [], 0
        start = time.monotonic()
        while True:
            try:
                chunk = await asyncio.wait_for(request.content.readany(), BODY_IDLE)
            except TimeoutError:
                raise self._slow(request, size, start) from None
            if not chunk:
                break
            size += len(chunk)
            took = time.monotonic() - start
            if took > BODY_GRACE and size < BODY_MIN_RATE * took:
                raise self._slow(request, size, start)
            if size > limit:
                raise too_big
            if size > reserved[0]:
                await self._reserve(size - reserved[0], reserved)
            parts.append(chunk)
        return b"".join(parts)

    def _slow(self, request: web.Request, size: int, start: float) -> EngineError:
        took = time.monotonic() - start
        self.note(
            logging.WARNING,
            "slow_body",
            "serve: cut off a request body from %s sent too slowly (%d bytes in %.0f s)",
            request.remote,
            size,
            took,
        )
        if request.transport is not None:  # the connection goes too: it was trickling
            request.transport.close()
        return EngineError(
            209,
            f"the request body came too slowly ({size} bytes in {took:.0f} s; at least "
            f"{BODY_MIN_RATE} bytes a second after {BODY_GRACE:g} s, no pause over {BODY_IDLE:g} s)",
            "SOCKET_TIMEOUT",
        )

    async def _reserve(self, n: int, reserved: list[int]) -> None:
        assert self.budget is not None
        if n <= 0:
            return
        if not await self.budget.take(n, self.body_wait):
            raise EngineError(
                241,
                f"serve holds {self.budget.used} bytes of request bodies (serve.max_buffered_"
                f"bytes {self.budget.limit}): this one must wait for others; retry",
                "MEMORY_LIMIT_EXCEEDED",
            )
        reserved[0] += n

    async def body(self, request: web.Request, reserved: list[int]) -> bytes:
        data = await self._read(request, reserved)
        encoding = request.headers.get("Content-Encoding", "").strip().lower()
        if data and encoding and encoding != "identity":
            limit = self.config.max_request_bytes
            decompress = decompressor(encoding)
            try:
                data = await asyncio.get_running_loop().run_in_executor(
                    self.pool, decompress, data, limit
                )
            except EngineError:
                raise
            except Exception as e:
                raise EngineError(
                    271, f"Cannot decompress the {encoding} request body: {e}", "CANNOT_DECOMPRESS"
                ) from None
            if len(data) > limit:
                raise EngineError(
                    229,
                    f"Request body is larger than serve.max_request_bytes ({limit} bytes)",
                    "QUERY_IS_TOO_LARGE",
                )
            if len(data) > reserved[0]:
                await self._reserve(len(data) - reserved[0], reserved)
        return data

    async def form(self, request: web.Request, reserved: list[int]) -> dict[str, str]:
        """A multipart form (clickhouse-connect sends long queries and parameters this way)."""
        limit, size, out = self.config.max_request_bytes, 0, {}
        reader = await request.multipart()
        async for part in reader:
            if not isinstance(part, BodyPartReader) or not part.name:
                continue
            if part.filename is not None:
                raise EngineError(
                    48,
                    "External data (query files) is not supported by railscope serve",
                    "NOT_IMPLEMENTED",
                )
            value = await part.read(decode=True)
            size += len(value)
            if size > limit:
                raise EngineError(
                    229,
                    f"Request body is larger than serve.max_request_bytes ({limit} bytes)",
                    "QUERY_IS_TOO_LARGE",
                )
            if size > reserved[0]:
                await self._reserve(size - reserved[0], reserved)
            try:
                out[part.name] = value.decode()
            except UnicodeDecodeError:
                raise EngineError(
                    27,
                    f"form field {part.name!r} is not UTF-8",
                    "CANNOT_PARSE_INPUT_ASSERTION_FAILED",
                ) from None
        return out


def _printable(name: str) -> str:
    """A user name a client typed, as it may appear in an answer (never in a log line)."""
    clean = "".join(c if c.isprintable() else "?" for c in name)
    return clean[:64] + ("..." if len(clean) > 64 else "")
