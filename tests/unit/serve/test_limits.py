"""serve's admission rules on their own: a user's queue over its cap, engine threads handed out in
turn between users, and the networks logins are throttled by."""

from __future__ import annotations

import asyncio

from telemetry.serve.limits import FairSlots, LoginThrottle, Running, source_net


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
