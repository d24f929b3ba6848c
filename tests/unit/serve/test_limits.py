"""serve's admission rules on their own: a user's queue over its cap, engine threads handed out in
turn between users, and the networks logins are throttled by."""

from __future__ import annotations

import asyncio

from telemetry.serve.limits import (
    ACCEPT_BURST,
    IDLE_GRACE,
    Connections,
    FairSlots,
    LoginThrottle,
    Running,
    source_net,
)


def test_over_the_cap_a_query_waits_then_is_refused() -> None:
    async def main() -> None:
        r = Running()
        assert await r.enter("g", 1)
        waiter = asyncio.create_task(r.enter("g", 1, wait=5))
        await asyncio.sleep(0.05)
        assert not waiter.done()
        assert await r.enter("other", 1)  # another user is not held up
        r.leave("g")  # the slot goes to the one waiting
        assert await waiter
        assert not await r.enter("g", 1, wait=0.1)  # refused only after the wait
        r.leave("g")
        r.leave("other")
        assert r.by_user == {} and r.waiting == {}

    asyncio.run(main())


def test_engine_threads_go_to_users_in_turn() -> None:
    async def main() -> None:
        slots = FairSlots(1)
        order: list[str] = []
        await slots.acquire("a")

        async def one(user: str) -> None:
            await slots.acquire(user)
            order.append(user)
            await asyncio.sleep(0)
            slots.release()

        tasks = [asyncio.create_task(one(u)) for u in ("a", "a", "a", "b")]
        await asyncio.sleep(0.05)
        slots.release()
        await asyncio.gather(*tasks)
        assert order.index("b") == 1  # not behind every one of a's
        assert slots.free == 1

    asyncio.run(main())


def test_logins_are_throttled_per_network() -> None:
    assert source_net("10.1.2.3") == source_net("10.1.2.200") == "10.1.2.0/24"
    assert source_net("::ffff:10.1.2.3") == "10.1.2.0/24"
    assert source_net("2001:db8::1") == source_net("2001:db8::ffff:1") == "2001:db8::/64"
    t = LoginThrottle(free=2, interval=1.0, max_wait=10.0)
    for _ in range(3):
        t.failed("user:a", "net:x")
    assert t.failed("user:a", "net:y") == 4  # the name counts whatever the network


def test_loopback_is_one_network() -> None:
    # any local process may bind any address of 127.0.0.0/8: rotating them is free
    assert source_net("127.0.0.1") == source_net("127.200.3.4") == "127.0.0.0/8"
    assert source_net("::ffff:127.9.9.9") == "127.0.0.0/8"
    assert source_net("::1") == "::1/128"


class _Transport:
    def __init__(self, peer: str) -> None:
        self.peer, self.aborted = peer, False

    def get_extra_info(self, name: str) -> tuple[str, int]:
        return (self.peer, 1)

    def abort(self) -> None:
        self.aborted = True


def _conns(total: int, per_network: int) -> Connections:
    return Connections(total, per_network, lambda *a: None)


def test_connections_are_capped_per_network_not_per_address() -> None:
    c = _conns(100, 4)
    first = [c.admit(_Transport(f"10.1.2.{i}")) for i in range(4)]
    for conn in first:
        assert conn is not None
        conn.busy, conn.head_started = 1, None  # each running a request: never closed
    assert c.admit(_Transport("10.1.2.99")) is None  # another address, the same /24
    assert c.admit(_Transport("10.1.3.1")) is not None  # another /24


def test_requests_at_the_door_keep_off_the_reserved_share() -> None:
    """Trickling bodies hold at most DOOR_SHARE of the cap; at it the oldest of them is closed
    for a new connection, while requests already in (authenticated, body read) are never."""
    c = _conns(8, 100)
    running = c.admit(_Transport("10.0.0.1"))
    assert running is not None
    running.busy = 1  # its body is in: being run
    bodies = []
    for i in range(c.door_cap):
        b = c.admit(_Transport(f"10.{i}.0.2"))
        assert b is not None
        b.busy, b.reading = 1, 100.0 + i  # authenticated or not, its body still trickling
        bodies.append(b)
    assert c.door_cap == 6
    ping = c.admit(_Transport("10.9.9.9"))  # a /ping: the door is full, the oldest body goes
    assert ping is not None and bodies[0].transport.aborted
    assert not any(b.transport.aborted for b in bodies[1:]) and not running.transport.aborted
    assert sum(x.at_door() for x in c.by_transport.values()) == c.door_cap - 1
    # at the total cap: a connection idle for over IDLE_GRACE goes before a request at the door,
    # one that just moved (accepted, about to send its head) after
    ping.last_active -= 2 * IDLE_GRACE
    new = c.admit(_Transport("10.8.8.8"))
    assert new is not None and c.count == 8
    assert c.admit(_Transport("10.7.7.7")) is not None
    assert ping.transport.aborted and not new.transport.aborted
    assert c.admit(_Transport("10.6.6.6")) is not None
    assert bodies[1].transport.aborted  # then the body at the door longest
    assert not new.transport.aborted  # just accepted: never closed for a newcomer


def test_a_whole_head_waiting_for_its_handler_is_not_closed() -> None:
    """A head that came whole (its empty line seen, across chunks too) waits for the server, not
    the client: for IDLE_GRACE it is not closed for a newcomer; one still arriving is."""
    c = _conns(2, 100)
    whole, partial = c.admit(_Transport("10.0.0.1")), c.admit(_Transport("10.0.0.2"))
    assert whole is not None and partial is not None
    now = whole.last_active
    whole.saw(b"GET /ping HTTP/1.1\r\nHost: x\r", now)
    whole.saw(b"\n\r\n", now)  # the empty line split over two reads
    partial.saw(b"POST / HTTP/1.1\r\nHost: x\r\n", now)
    assert whole.head_in and not partial.head_in
    assert not whole.evictable(now + 0.5) and partial.evictable(now + 0.5)
    assert whole.evictable(now + 2 * IDLE_GRACE)  # the handler never came: a slow head after all
    whole.served()
    assert whole.head_started is None and not whole.head_in


def test_a_burst_of_fresh_connections_is_let_in_over_the_cap_then_trimmed() -> None:
    """Where the cap is held by connections just accepted (nothing of them read yet), a newcomer
    is let in over it rather than closing the oldest of them (a /ping the server had not reached),
    up to ACCEPT_BURST more; trim() closes the excess once they rank (a body at the door)."""
    c = _conns(4, 100)
    first = [c.admit(_Transport(f"10.0.{i}.1")) for i in range(4)]
    extra = [c.admit(_Transport(f"10.1.{i}.1")) for i in range(ACCEPT_BURST)]
    assert all(x is not None for x in first + extra) and c.count == 4 + ACCEPT_BURST
    assert not any(x.transport.aborted for x in first + extra if x is not None)
    assert c.admit(_Transport("10.2.0.1")) is None  # past the burst allowance: refused
    assert c.trim() == 0 and c.count == 4 + ACCEPT_BURST  # all still fresh: kept
    for i, x in enumerate(extra):  # their handlers ran: bodies trickling at the door
        assert x is not None
        x.busy, x.reading = 1, 100.0 + i
    assert c.trim() == ACCEPT_BURST and c.count == 4
    assert not any(x.transport.aborted for x in first if x is not None)
    assert all(x.transport.aborted for x in extra if x is not None)


def test_a_cap_held_by_requests_being_served_refuses_at_once() -> None:
    """No burst allowance where every connection is serving a request (its body in)."""
    c = _conns(3, 100)
    for i in range(3):
        x = c.admit(_Transport(f"10.0.{i}.1"))
        assert x is not None
        x.busy = 1
    assert c.admit(_Transport("10.9.0.1")) is None and c.count == 3
