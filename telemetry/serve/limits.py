"""What keeps the query endpoint from being exhausted: open connections (per peer and in all),
request bodies held in memory, queries per user, failed logins per peer, and log lines per reason.

Everything here runs on the endpoint's event loop thread (no locks) except `LogLimiter`. Never
reads a request and never logs a credential: callers pass a reason and a peer address only.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# file descriptors kept free for what is not a query connection: the sinks' store handles and
# spool files, the sources' sockets, the engine's own files (parts, merges), /metrics
FD_RESERVE_MIN = 256


# connections accepted in one go before any of them is counted (asyncio accepts up to its listen
# backlog per event loop turn): the cap keeps room for one such burst too
ACCEPT_BURST = 128


def connection_cap(configured: int) -> int:
    """`configured`, lowered to fit the process's descriptor limit with a quarter of it (at least
    FD_RESERVE_MIN) kept for everything else, and room for one burst of accepts."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return configured
    room = soft - max(FD_RESERVE_MIN, soft // 4) - ACCEPT_BURST
    return max(8, min(configured, room))


class LogLimiter:
    """At most `burst` lines per reason per `every` seconds; the next line after a pause says how
    many were left out. A flood of bad requests costs a few lines a minute, not the disk."""

    def __init__(self, log: logging.Logger, every: float = 60.0, burst: int = 10) -> None:
        self.log, self.every, self.burst = log, every, burst
        self._sent: dict[str, deque[float]] = defaultdict(deque)
        self._skipped: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def __call__(self, level: int, reason: str, msg: str, *args: Any) -> None:
        now = time.monotonic()
        with self._lock:
            sent = self._sent[reason]
            while sent and now - sent[0] >= self.every:
                sent.popleft()
            if len(sent) >= self.burst:
                self._skipped[reason] += 1
                return
            sent.append(now)
            skipped = self._skipped.pop(reason, 0)
        if skipped:
            msg += f" ({skipped} more like it not logged)"
        self.log.log(level, msg, *args)


class QuietHttpErrors(logging.Filter):
    """On aiohttp's server logger: a request the HTTP parser refuses (a bad method, a header too
    long, CR/LF where none may be) is the client's error, answered 400 by aiohttp. Its record
    (a traceback quoting the request's bytes, credentials included) becomes one rate-limited line
    naming the peer and the kind of error."""

    def __init__(self, note: LogLimiter) -> None:
        super().__init__()
        self.note = note

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is None:
            return True
        from aiohttp.http_exceptions import HttpProcessingError

        if not isinstance(exc, HttpProcessingError | ConnectionError | asyncio.CancelledError):
            return True  # a fault of serve's own: its traceback is wanted
        try:
            peer = record.getMessage().rsplit(" ", 1)[-1]
        except Exception:
            peer = "?"
        self.note(
            logging.WARNING,
            "bad_request",
            "serve: refused a malformed HTTP request from %s (%s)",
            peer[:64],
            type(exc).__name__,
        )
        return False


class QuietAcceptErrors(logging.Filter):
    """On asyncio's logger: "socket.accept() out of system resource" (the process ran out of
    descriptors; asyncio stops accepting for a second) becomes one rate-limited line."""

    def __init__(self, note: LogLimiter) -> None:
        super().__init__()
        self.note = note

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("socket.accept() out of system resource"):
            return True
        exc = record.exc_info[1] if record.exc_info else None
        self.note(
            logging.ERROR,
            "accept_failed",
            "serve: cannot accept connections: %s (lower serve.max_connections or raise the "
            "descriptor limit)",
            exc or "out of resources",
        )
        return False


def quiet_http_errors(note: LogLimiter) -> None:
    """Install QuietHttpErrors on aiohttp's loggers, QuietAcceptErrors on asyncio's (once per
    process)."""
    for name, kind in (
        ("aiohttp.server", QuietHttpErrors),
        ("aiohttp.web", QuietHttpErrors),
        ("aiohttp.internal", QuietHttpErrors),
        ("asyncio", QuietAcceptErrors),
    ):
        logger = logging.getLogger(name)
        if not any(isinstance(f, kind) for f in logger.filters):
            logger.addFilter(kind(note))


# -- connections ---------------------------------------------------------------------------------
@dataclass(eq=False)
class Conn:
    """One accepted connection: its peer, when it last moved, whether a request is being served,
    and `lost` (set when the peer closes or half-closes: a running query is cancelled)."""

    peer: str
    transport: Any  # asyncio.Transport
    last_active: float = field(default_factory=time.monotonic)
    busy: int = 0
    lost: asyncio.Event = field(default_factory=asyncio.Event)


class Gate(asyncio.Protocol):
    """The protocol each accepted socket gets: counts it, closes the longest-idle connection when
    a cap is reached (a peer's own first, then anyone's), and hands everything on to aiohttp's
    protocol `inner`."""

    def __init__(self, inner: Any, conns: Connections) -> None:
        self.inner, self.conns = inner, conns
        self.conn: Conn | None = None

    def connection_made(self, transport: Any) -> None:
        self.conn = self.conns.admit(transport)
        if self.conn is None:
            transport.abort()
            return
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.conn is not None:
            self.conn.last_active = time.monotonic()
            self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        if self.conn is None:
            return None
        self.conn.lost.set()
        return self.inner.eof_received()  # type: ignore[no-any-return]

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn is None:
            return
        self.conn.lost.set()
        self.conns.release(self.conn)
        self.conn = None
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


class Connections:
    """The open connections, by peer, against `total` and `per_peer` caps."""

    def __init__(self, total: int, per_peer: int, note: Callable[[int, str, str], None]) -> None:
        self.total, self.per_peer = total, per_peer
        self.note = note  # LogLimiter-style (level, reason, message)
        self.by_peer: dict[str, set[Conn]] = defaultdict(set)
        self.by_transport: dict[int, Conn] = {}
        self.count = 0
        self.refused = 0
        self.evicted = 0

    def admit(self, transport: Any) -> Conn | None:
        peername = transport.get_extra_info("peername")
        peer = str(peername[0]) if peername else "?"
        mine = self.by_peer[peer]
        if len(mine) >= self.per_peer and not self._evict(mine, peer):
            self._refuse(peer, f"{peer} has {len(mine)} connections open")
            return None
        if self.count >= self.total:
            busiest = max(self.by_peer.values(), key=len)
            if not self._evict(busiest, peer) and not self._evict(
                {c for s in self.by_peer.values() for c in s}, peer
            ):
                self._refuse(peer, f"{self.count} connections open")
                return None
        conn = Conn(peer, transport)
        mine.add(conn)
        self.by_transport[id(transport)] = conn
        self.count += 1
        return conn

    def _evict(self, pool: set[Conn], peer: str) -> bool:
        idle = [c for c in pool if not c.busy]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c.last_active)
        self.evicted += 1
        self.note(
            logging.WARNING,
            "conn_evicted",
            f"serve: connection limit reached; closed the longest-idle connection (from "
            f"{oldest.peer}) for a new one from {peer} (serve.max_connections "
            f"{self.total}, per peer {self.per_peer})",
        )
        self.release(oldest)
        oldest.transport.abort()
        return True

    def _refuse(self, peer: str, why: str) -> None:
        self.refused += 1
        self.note(
            logging.WARNING,
            "conn_refused",
            f"serve: refused a connection from {peer}: {why}, every one serving a request",
        )

    def release(self, conn: Conn) -> None:
        if self.by_transport.pop(id(conn.transport), None) is None:
            return
        mine = self.by_peer.get(conn.peer)
        if mine is not None:
            mine.discard(conn)
            if not mine:
                del self.by_peer[conn.peer]
        self.count -= 1

    def of(self, transport: Any) -> Conn | None:
        return self.by_transport.get(id(transport)) if transport is not None else None


# -- bodies --------------------------------------------------------------------------------------
class BodyBudget:
    """Bytes of request bodies held at once, all requests together."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._freed = asyncio.Event()

    async def take(self, n: int, wait: float = 10.0) -> bool:
        """Reserve `n` bytes, waiting up to `wait` seconds for others to give theirs back."""
        deadline = time.monotonic() + wait
        while self.used + n > self.limit:
            left = deadline - time.monotonic()
            if left <= 0 or n > self.limit:
                return False
            self._freed.clear()
            try:
                await asyncio.wait_for(self._freed.wait(), left)
            except TimeoutError:
                return False
        self.used += n
        return True

    def give(self, n: int) -> None:
        self.used = max(0, self.used - n)
        self._freed.set()


# -- users ---------------------------------------------------------------------------------------
class Running:
    """Queries running per user."""

    def __init__(self) -> None:
        self.by_user: dict[str, int] = defaultdict(int)

    def enter(self, user: str, cap: int) -> bool:
        if self.by_user[user] >= cap:
            return False
        self.by_user[user] += 1
        return True

    def leave(self, user: str) -> None:
        self.by_user[user] -= 1
        if self.by_user[user] <= 0:
            del self.by_user[user]


class LoginThrottle:
    """Failed logins per peer: past `free` failures in `window` seconds a peer's logins are checked
    one per `interval` seconds (a login waiting longer than `max_wait` is refused as a failure),
    so guessing is slow however many connections a peer opens. Every failure answers the same."""

    def __init__(
        self, free: int = 10, window: float = 60.0, interval: float = 1.0, max_wait: float = 10.0
    ) -> None:
        self.free, self.window, self.interval, self.max_wait = free, window, interval, max_wait
        self.failures: dict[str, deque[float]] = {}
        self.next_slot: dict[str, float] = {}

    def _recent(self, peer: str, now: float) -> int:
        q = self.failures.get(peer)
        if not q:
            return 0
        while q and now - q[0] > self.window:
            q.popleft()
        if not q:
            del self.failures[peer]
            self.next_slot.pop(peer, None)
            return 0
        return len(q)

    async def wait(self, peer: str) -> bool:
        """Before checking a password from `peer`: False where it must be refused unchecked."""
        now = time.monotonic()
        if self._recent(peer, now) < self.free:
            return True
        slot = max(now, self.next_slot.get(peer, now))
        if slot - now > self.max_wait:
            return False
        self.next_slot[peer] = slot + self.interval
        await asyncio.sleep(slot - now)
        return True

    def failed(self, peer: str) -> int:
        """Count a failure; returns the peer's failures in the window."""
        now = time.monotonic()
        q = self.failures.setdefault(peer, deque())
        q.append(now)
        if len(q) > 4 * self.free:
            q.popleft()
        return self._recent(peer, now)

    def __len__(self) -> int:  # peers being tracked (bounded by the connection caps in practice)
        return len(self.failures)
