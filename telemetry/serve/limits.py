"""What keeps the query endpoint from being exhausted: open connections (per source network and in all),
request bodies held in memory, queries per user, failed logins per peer, and log lines per reason.

Everything here runs on the endpoint's event loop thread (no locks) except `LogLimiter`. Never
reads a request and never logs a credential: callers pass a reason and a peer address only.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import resource
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

# file descriptors kept free for what is not a query connection: the sinks' store handles and
# spool files, the sources' sockets, the engine's own files (parts, merges), /metrics
FD_RESERVE_MIN = 256


# A request head arrives in one go: one still arriving after HEAD_DEADLINE seconds is closed. A
# body must keep moving: no pause over BODY_IDLE seconds, and past BODY_GRACE seconds at least
# BODY_MIN_RATE bytes a second on average (a 1-byte-every-5-s body is cut off after 10 s).
HEAD_DEADLINE = 10.0
BODY_IDLE = 10.0
BODY_GRACE = 10.0
BODY_MIN_RATE = 16 << 10


# a connection that moved this recently (accepted, between two requests, its head just in) is
# not closed for a newcomer: its request is about to be served (Connections.admit)
IDLE_GRACE = 1.0
FRESH = 3  # Conn.rank of a connection that moved within IDLE_GRACE: not closed for a newcomer
TRIM_EVERY = 0.05  # seconds between looks at connections admitted over the cap in a burst

# heads still arriving and bodies still being read ("at the door") hold at most this share of the
# connection cap: the rest is kept for requests already in (authenticated, body read: being run or
# answered), idle keep-alive connections and /ping, however many connections trickle
DOOR_SHARE = 0.75


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

        gone = isinstance(exc, RuntimeError) and "connection closed" in str(exc).lower()
        if not gone and not isinstance(
            exc, HttpProcessingError | ConnectionError | asyncio.CancelledError
        ):
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
    """One accepted connection: its peer and the peer's network (source_net), when it last moved,
    whether a request is being served, and `lost` (set when the peer closes or half-closes: a
    running query is cancelled)."""

    peer: str
    transport: Any  # asyncio.Transport
    net: str = ""
    last_active: float = field(default_factory=time.monotonic)
    busy: int = 0
    # when the first byte of a request head not yet served came (None: between requests): a
    # head that trickles in is closed after HEAD_DEADLINE and is the first to be evicted
    head_started: float | None = None
    # when its request came in, until it is authenticated and its body is in (None otherwise):
    # a login being throttled or a body trickling is at the door and may be closed at a cap (a
    # request whose body is in, never)
    reading: float | None = None
    # its request head is all in (an empty line seen) and waits for its handler to run: the
    # server's turn, not the client's; `tail` holds the last bytes seen while looking for it
    head_in: bool = False
    tail: bytes = b""
    lost: asyncio.Event = field(default_factory=asyncio.Event)

    def at_door(self) -> bool:
        """A head still arriving or a body still being read: nothing of it is running yet."""
        return self.reading is not None or (not self.busy and self.head_started is not None)

    def evictable(self, now: float) -> bool:
        """Not while its request is served (its body in), nor while a head that came whole
        waits up to IDLE_GRACE for its handler (a flood of new connections accepted in one event
        loop turn would otherwise close a /ping or a SELECT 1 the server has not reached yet)."""
        if self.head_in and self.head_started is not None and now - self.head_started < IDLE_GRACE:
            return False
        return not self.busy or self.reading is not None

    def saw(self, data: bytes, now: float) -> None:
        """Bytes arrived: a request head starts (between requests) or may be complete."""
        self.last_active = now
        if self.busy:
            return
        if self.head_started is None:
            self.head_started, self.head_in, self.tail = now, False, b""
        if not self.head_in:
            seen = self.tail + data
            self.head_in = b"\r\n\r\n" in seen
            self.tail = seen[-3:]

    def served(self) -> None:
        """Its handler runs: the head is in and is no longer waiting."""
        self.head_started, self.head_in, self.tail = None, False, b""

    def rank(self, now: float) -> tuple[int, float]:
        """Which goes first at a cap: a head arriving for over IDLE_GRACE (oldest first), a
        connection idle for over IDLE_GRACE (longest idle), a request at the door (there longest).
        One that moved within IDLE_GRACE (FRESH: just accepted, its head just in) is not closed
        for a newcomer: in a burst of new connections accepted in one event loop turn the oldest
        of them is a /ping or a SELECT 1 the server has not read yet (Connections.admit)."""
        if self.reading is not None:
            return (2, self.reading)
        if self.head_started is not None:
            return (0 if now - self.head_started > IDLE_GRACE else FRESH, self.head_started)
        return (1 if now - self.last_active > IDLE_GRACE else FRESH, self.last_active)


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
            self.conn.saw(data, time.monotonic())
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


def _any_fresh(conns: Iterable[Conn]) -> bool:
    """Whether a cap is held up by connections not yet serving a request (FRESH: about to be
    read or run), not only by requests being served."""
    return any(not c.busy for c in conns)


class Connections:
    """The open connections, by source network (source_net: an IPv4 /24, an IPv6 /64, all of
    loopback), against `total` and `per_network` caps. At a cap a new connection closes another
    (Conn.rank): a head still arriving, the longest-idle one, a request at the door (a login or a
    body still arriving); a request whose body is in is never closed. Heads and bodies at the door
    hold at most DOOR_SHARE of `total`: past it the oldest of them is closed for the new one, so
    trickling connections never take the share kept for requests already in and /ping.

    Where every connection open is serving a request or moved within IDLE_GRACE, some of them the
    latter (a burst of new ones, nothing of them read yet), a newcomer is let in over `total` (or
    `per_network`), up to ACCEPT_BURST more (connection_cap keeps the descriptors for them), and
    the excess is closed by rank once their heads are read (trim): closing the oldest fresh one
    instead closed the /ping a flood's burst had arrived after, and refusing the newcomer refused
    the next one."""

    def __init__(self, total: int, per_network: int, note: Callable[[int, str, str], None]) -> None:
        self.total, self.per_network = total, per_network
        self.door_cap = max(1, int(total * DOOR_SHARE))
        self.note = note  # LogLimiter-style (level, reason, message)
        self.by_net: dict[str, set[Conn]] = defaultdict(set)
        self.by_transport: dict[int, Conn] = {}
        self.count = 0
        self.refused = 0
        self.evicted = 0
        self.burst = ACCEPT_BURST
        self._trimming: asyncio.TimerHandle | None = None

    def admit(self, transport: Any) -> Conn | None:
        peername = transport.get_extra_info("peername")
        peer = str(peername[0]) if peername else "?"
        net = source_net(peer)
        mine = self.by_net[net]
        if len(mine) >= self.per_network and not self._evict(mine, peer, "per network"):
            if len(mine) >= self.per_network + self.burst or not _any_fresh(mine):
                self._refuse(peer, f"its network {net} has {len(mine)} connections open")
                return None
            self._trim_later()
        door = [c for c in self.by_transport.values() if c.at_door()]
        if len(door) >= self.door_cap:
            self._evict(set(door), peer, "at the door")
        if self.count >= self.total:
            busiest = max(self.by_net.values(), key=len)
            if not self._evict(busiest, peer, "in all") and not self._evict(
                set(self.by_transport.values()), peer, "in all"
            ):
                if self.count >= self.total + self.burst or not _any_fresh(
                    self.by_transport.values()
                ):
                    self._refuse(peer, f"{self.count} connections open")
                    return None
                self._trim_later()
        conn = Conn(peer, transport, net)
        mine.add(conn)
        self.by_transport[id(transport)] = conn
        self.count += 1
        return conn

    def _trim_later(self) -> None:
        if self._trimming is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop (a unit test): the next trim() call does it
            return
        self._trimming = loop.call_later(TRIM_EVERY, self.trim)

    def trim(self) -> int:
        """Close connections by rank while more than `total` are open, or more than
        `per_network` of one network (admitted in a burst); look again after TRIM_EVERY while the
        excess is still all fresh. Returns how many."""
        self._trimming = None
        closed = 0
        for mine in [m for m in self.by_net.values() if len(m) > self.per_network]:
            while len(mine) > self.per_network and self._evict(mine, "a burst", "per network"):
                closed += 1
        while self.count > self.total and self._evict(
            set(self.by_transport.values()), "a burst", "in all"
        ):
            closed += 1
        if self.count > self.total or any(len(m) > self.per_network for m in self.by_net.values()):
            self._trim_later()
        return closed

    def _evict(self, pool: set[Conn], peer: str, cap: str) -> bool:
        now = time.monotonic()
        ranked = [(c.rank(now), c) for c in pool if c.evictable(now)]
        ranked = [rc for rc in ranked if rc[0][0] < FRESH]
        if not ranked:
            return False
        rank, first = min(ranked, key=lambda rc: rc[0])
        self.evicted += 1
        what = (
            "a trickling request head",
            "the longest-idle connection",
            "a request at the door (login or body)",
        )
        self.note(
            logging.WARNING,
            "conn_evicted",
            f"serve: connection limit reached ({cap}); closed {what[rank[0]]} (from "
            f"{first.peer}) for a new one from {peer} (serve.max_connections {self.total}, per "
            f"network {self.per_network}, {self.door_cap} at the door)",
        )
        self.release(first)
        first.transport.abort()
        return True

    def _refuse(self, peer: str, why: str) -> None:
        self.refused += 1
        self.note(
            logging.WARNING,
            "conn_refused",
            f"serve: refused a connection from {peer}: {why}, each serving a request or just "
            f"arrived (within {IDLE_GRACE:g} s)",
        )

    def release(self, conn: Conn) -> None:
        if self.by_transport.pop(id(conn.transport), None) is None:
            return
        mine = self.by_net.get(conn.net)
        if mine is not None:
            mine.discard(conn)
            if not mine:
                del self.by_net[conn.net]
        self.count -= 1

    def sweep(self, now: float, head_deadline: float) -> int:
        """Close every connection whose request head has been arriving for over `head_deadline`
        seconds (a slowloris head: a client sends a head in one go); returns how many."""
        slow = [
            c
            for c in self.by_transport.values()
            if not c.busy and c.head_started is not None and now - c.head_started > head_deadline
        ]
        for c in slow:
            self.release(c)
            c.transport.abort()
        if slow:
            self.evicted += len(slow)
            self.note(
                logging.WARNING,
                "slow_head",
                f"serve: closed {len(slow)} connection(s) whose request head took over "
                f"{head_deadline:g} s (from {slow[0].peer}, ...)",
            )
        return len(slow)

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
    """Queries running per user against the user's cap. Over the cap a query waits in its user's
    queue (first come, first served) up to `wait` seconds for one of that user's own to end, as
    ClickHouse's queue_max_wait_ms; only then is it refused (code 202). One user's queue never
    holds up another user's queries."""

    def __init__(self) -> None:
        self.by_user: dict[str, int] = defaultdict(int)
        self.waiting: dict[str, deque[asyncio.Future[None]]] = {}

    async def enter(self, user: str, cap: int, wait: float = 0.0) -> bool:
        if self.by_user[user] < cap and not self.waiting.get(user):
            self.by_user[user] += 1
            return True
        if wait <= 0:
            self._tidy(user)
            return False
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue = self.waiting.setdefault(user, deque())
        queue.append(fut)
        try:
            await asyncio.wait_for(asyncio.shield(fut), wait)
            return True  # leave() handed its slot over: by_user already counts it
        except TimeoutError:
            self._give_up(user, queue, fut)
            return False
        except asyncio.CancelledError:  # the client went away while it waited
            self._give_up(user, queue, fut)
            raise

    def _give_up(
        self, user: str, queue: deque[asyncio.Future[None]], fut: asyncio.Future[None]
    ) -> None:
        if fut.done() and not fut.cancelled():
            self.leave(user)  # handed over just as the wait ended: pass it on
        else:
            fut.cancel()
            with contextlib.suppress(ValueError):
                queue.remove(fut)
        self._tidy(user)

    def leave(self, user: str) -> None:
        queue = self.waiting.get(user)
        while queue:
            fut = queue.popleft()
            if not fut.done():
                fut.set_result(None)  # the slot goes to the next in line, still counted
                return
        self.by_user[user] -= 1
        self._tidy(user)

    def _tidy(self, user: str) -> None:
        if not self.waiting.get(user):
            self.waiting.pop(user, None)
        if self.by_user.get(user, 1) <= 0:
            del self.by_user[user]


class FairSlots:
    """`n` slots shared by users: a freed slot goes to the next user in turn (round robin over
    the users waiting), so one user's many queries never starve another's."""

    def __init__(self, n: int) -> None:
        self.free = n
        self.queues: dict[str, deque[asyncio.Future[None]]] = {}  # insertion order: the turn

    async def acquire(self, user: str) -> None:
        if self.free > 0 and not self.queues:
            self.free -= 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.queues.setdefault(user, deque()).append(fut)
        try:
            await asyncio.shield(fut)
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()
            else:
                fut.cancel()
                q = self.queues.get(user)
                if q is not None:
                    with contextlib.suppress(ValueError):
                        q.remove(fut)
                    if not q:
                        del self.queues[user]
            raise

    def release(self) -> None:
        while self.queues:
            user = next(iter(self.queues))
            q = self.queues.pop(user)
            fut = q.popleft() if q else None
            if q:
                self.queues[user] = q  # to the back of the turn
            if fut is not None and not fut.done():
                fut.set_result(None)
                return
        self.free += 1


def source_net(peer: str) -> str:
    """The network logins are throttled and connections counted by: an IPv4 address's /24, an
    IPv6 address's /64 (one host holds a whole /64; rotating addresses inside it is free), and
    all of loopback as one (any local process may use every address of 127.0.0.0/8)."""
    try:
        ip = ipaddress.ip_address(peer)
    except ValueError:
        return peer
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return "127.0.0.0/8" if ip.version == 4 else "::1/128"
    prefix = 24 if ip.version == 4 else 64
    return str(ipaddress.ip_network(f"{ip}/{prefix}", strict=False))


class LoginThrottle:
    """Failed logins per user name (whatever the source) and per source network (source_net):
    past `free` failures in `window` seconds, the answer to each further failure of that name or
    network waits for its turn, one per `interval` seconds per key, so a guesser who reads the
    answers gets one answer a second however many connections or addresses it uses. The password
    is always checked first, at a bounded cost (a constant-time digest compare): a correct one is
    let through at once however many wrong ones wait, so wrong guesses never lock the owner out.
    Every failure answers the same."""

    def __init__(
        self, free: int = 10, window: float = 60.0, interval: float = 1.0, max_wait: float = 10.0
    ) -> None:
        self.free, self.window, self.interval, self.max_wait = free, window, interval, max_wait
        self.failures: dict[str, deque[float]] = {}
        self.next_slot: dict[str, float] = {}
        self.max_keys = 100_000  # names and networks tracked at once: a flood cannot grow it

    def _recent(self, key: str, now: float) -> int:
        q = self.failures.get(key)
        if not q:
            return 0
        while q and now - q[0] > self.window:
            q.popleft()
        if not q:
            del self.failures[key]
            if self.next_slot.get(key, 0.0) <= now:
                self.next_slot.pop(key, None)
            return 0
        return len(q)

    def failed(self, *keys: str) -> int:
        """Count a failure against each key; returns the most recent failures of any of them."""
        now = time.monotonic()
        worst = 0
        for key in keys:
            q = self.failures.get(key)
            if q is None:
                if len(self.failures) >= self.max_keys:
                    self._forget(now)
                q = self.failures.setdefault(key, deque())
            q.append(now)
            if len(q) > 4 * self.free:
                q.popleft()
            worst = max(worst, self._recent(key, now))
        return worst

    async def delay(self, *keys: str) -> None:
        """After a failure: wait for each throttled key's turn (at most `max_wait` seconds; the
        turns are taken anyway, so a guesser who does not wait gains nothing)."""
        now = time.monotonic()
        until = now
        for key in keys:
            if self._recent(key, now) <= self.free:
                continue
            slot = max(now, self.next_slot.get(key, now))
            self.next_slot[key] = slot + self.interval
            until = max(until, slot)
        if until > now:
            await asyncio.sleep(min(until - now, self.max_wait))

    def _forget(self, now: float) -> None:
        for key in list(self.failures):
            self._recent(key, now)
        while len(self.failures) >= self.max_keys:
            key = next(iter(self.failures))
            del self.failures[key]
            self.next_slot.pop(key, None)

    def __len__(self) -> int:
        return len(self.failures)
