"""One switch's gNMI session (`Stream`): connect, subscribe (stream -> poll -> get), reconnect
with backoff, read each notification into the dialect's cache; and `GnmiLoop`, the one asyncio
loop in one thread that runs every switch's session. What a dialect subscribes to and how an
update lands in its cache is the dialect's (gnmi_sonic, gnmi_openconfig).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from exporters.switch import counters as C
from exporters.switch.config import GnmiConfig
from exporters.switch.gnmi_decode import decode, format_path, gnmi_pb, parse_path, path_str
from exporters.switch.gnmi_paths import Served, Unit, units
from exporters.switch.sonic import SwitchDown
from telemetry.errors import UserError

log = logging.getLogger("exporters.switch.gnmi")

# What the gNMI transport can report besides the parse reasons.
REASONS = ("auth_failed", "bad_update", "stream_stalled", "unreachable", "path_refused")


class Stalled(Exception):
    """A SAMPLE stream sent nothing for two intervals."""


# -- the per-switch stream state -------------------------------------------------------------
class Stream:
    """One switch's gNMI session: connect, subscribe (stream -> poll -> get), reconnect with
    backoff. Subclasses say what to subscribe to and how an update lands in their cache."""

    sample_paths: tuple[str, ...] = ()
    change_paths: tuple[str, ...] = ()
    sample_target = ""
    change_target = ""

    def __init__(
        self,
        name: str,
        cfg: GnmiConfig,
        interval: float,
        timeout: float,
        problems: C.Problems,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name, self.cfg, self.interval, self.timeout = name, cfg, interval, timeout
        self.problems = problems
        self.clock = clock
        self.mode: str = cfg.mode
        self.lock = threading.Lock()
        self.last_update = 0.0  # monotonic time of the last sample received
        self.synced = threading.Event()  # a first full sample arrived
        self.error = "not connected yet"
        self.updates = 0  # gNMI updates applied
        self.values: float = 0  # port / queue counter sets refreshed by them (bench/switch.py)
        self._paths: dict[tuple[bytes, bytes], list[tuple[str, dict[str, str]]]] = {}
        self.stopped = False
        self.prepared = False
        self._unsynced: set[str] = set()
        # the paths the target refused this session: named once, the others go on (gnmi_paths)
        self.served = Served(name, cfg.address, problems)

    # -- what callers see
    def check_up(self) -> None:
        """Raise SwitchDown unless the switch streamed within two intervals."""
        age = time.monotonic() - self.last_update
        if not self.synced.is_set() or age > 2 * self.interval:
            if self.synced.is_set() and not self.error:
                self.error = f"no update for {age:.1f} s (interval {self.interval:g} s)"
                self.problems.add("stream_stalled", self.name, self.error)
            raise SwitchDown(f"gnmi {self.cfg.address}: {self.error}")

    # -- the session
    async def run(self) -> None:
        import grpc

        backoff = 0.5
        while not self.stopped:
            t0 = time.monotonic()
            try:
                await self._session()
            except asyncio.CancelledError:
                raise
            except grpc.aio.AioRpcError as e:
                if self._refused(e):
                    continue  # subscribed again at once, as the dialect now asks
                self._failed(e.code(), e.details() or "")
            except Stalled as e:
                self.error = str(e)
                self.problems.add("stream_stalled", self.name, self.error)
                self.last_update = 0.0
            except (OSError, ValueError, UserError, TimeoutError) as e:
                self._failed(None, f"{type(e).__name__}: {e}")
            if time.monotonic() - t0 > 4 * self.interval:
                backoff = 0.5  # it ran for a while: a fresh failure, not a flapping one
            await asyncio.sleep(backoff * (1 + random.random() / 4))
            backoff = min(backoff * 2, 30.0)

    def _refused(self, e: Any) -> bool:
        """True where the dialect changes what it asks for after this refusal (and is asked
        again at once); False: a failure like any other."""
        return False

    def _failed(self, code: Any, details: str) -> None:
        import grpc

        reason = {
            grpc.StatusCode.UNAUTHENTICATED: "auth_failed",
            grpc.StatusCode.PERMISSION_DENIED: "auth_failed",
            # it took the connection but did not answer the request in time: it hangs
            grpc.StatusCode.DEADLINE_EXCEEDED: "stream_stalled",
        }.get(code, "unreachable")
        self.error = f"{code.name if code else 'error'}: {details}".strip()
        # one line per reason per minute (Problems); the source logs down/up transitions
        self.problems.add(reason, self.name, self.error)
        self.last_update = 0.0

    async def _session(self) -> None:
        import grpc

        from exporters.switch.gnmi_tls import channel

        async with channel(self.cfg, self.timeout) as ch:
            await asyncio.wait_for(ch.channel_ready(), self.timeout)
            md = self._metadata()
            self.stub = pb_stub(ch)
            self.served.new_session()
            self.prepared = False  # a refusal from here on is one of the subscription's paths
            await self._prepare(md)
            self.prepared = True
            # stream, else poll, else get: a mode the switch refuses (UNIMPLEMENTED) is not
            # asked again in later sessions
            for mode, run, then in (("stream", self._stream, "poll"), ("poll", self._poll, "get")):
                if self.mode != mode:
                    continue
                try:
                    await run(md)
                    return
                except grpc.aio.AioRpcError as e:
                    if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                        raise
                    log.info(
                        "switch %s: gNMI %s refused (%s), using %s",
                        self.name, mode, e.details(), then,
                    )  # fmt: skip
                    self.mode = then
            while not self.stopped:
                t = time.monotonic()
                us = [u for u in self._units() if not self.served.all_refused([u])]
                for u in us:
                    try:
                        notes = await self._get(md, u.target, u.paths)
                    except grpc.aio.AioRpcError as e:
                        if not self._unit_refused(u, e, "get"):
                            raise
                        continue
                    for n in notes:
                        self._notification(n)
                if self.served.all_refused(self._units()):
                    self._all_refused()
                else:
                    self._synced()
                await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - t)))

    def _prefix(self, target: str) -> Any:
        """The prefix of every request: the dialect's target and the configured origin."""
        return gnmi_pb().Path(target=target, origin=self.cfg.origin or "")

    def _metadata(self) -> list[tuple[str, str]]:
        md = []
        if self.cfg.username:
            md.append(("username", self.cfg.username))
        pw = self.cfg.password
        if self.cfg.password_file:
            try:
                pw = Path(self.cfg.password_file).read_text().strip()
            except OSError as e:
                raise UserError(f"gnmi password_file {self.cfg.password_file}: {e}") from None
        if pw is not None:
            md.append(("password", pw))
        return md

    def _units(self) -> list[Unit]:
        """What is asked on its own: each path (gnmi_paths.units), so a path the target refuses
        leaves the others working."""
        return units(self.sample_target, self.sample_paths, self.change_target, self.change_paths)

    def _unit_refused(self, unit: Unit, e: Any, mode: str) -> bool:
        """True where `e` refuses `unit`'s paths alone (recorded, named once); False: a failure
        of the session (transport, credentials, the mode) or a refusal the dialect handles."""
        if self._refused_by_dialect(unit, e) or not self.served.is_refusal(e, mode):
            return False
        self.served.refuse(unit, e)
        return True

    def _refused_by_dialect(self, unit: Unit, e: Any) -> bool:
        """True where the dialect changes what it asks after this refusal (`_refused`)."""
        return False

    def _all_refused(self) -> None:
        self.error = "the target refused every path: " + self.served.note()

    def unserved(self) -> str:
        """The paths this switch did not serve this session, for its status row ("" if none)."""
        return self.served.note()

    async def _unit(self, unit: Unit, mode: str, run: Any) -> None:
        """Run one unit's call; a refusal of its paths ends it alone (and counts as synced, so
        the switch's first sample does not wait for a path that will never come)."""
        import grpc

        try:
            await run
        except grpc.aio.AioRpcError as e:
            if not self._unit_refused(unit, e, mode):
                raise
            self._unsynced.discard(unit.name)
            if self.served.all_refused(self._units()):
                self._all_refused()
            elif not self._unsynced:
                self._synced()

    async def _prepare(self, md: list[tuple[str, str]]) -> None:
        """What a dialect reads once per session before subscribing."""

    async def _stream(self, md: list[tuple[str, str]]) -> None:
        """STREAM: SAMPLE at the interval for counters, ON_CHANGE for status and LLDP; one
        Subscribe per target (the prefix names the database/target)."""
        pb = gnmi_pb()
        ns = int(self.interval * 1e9)
        calls, names = [], []
        for u in self._units():
            mode = pb.SubscriptionMode.ON_CHANGE if u.change else pb.SubscriptionMode.SAMPLE
            req = pb.SubscribeRequest(
                subscribe=pb.SubscriptionList(
                    prefix=self._prefix(u.target),
                    mode=pb.SubscriptionList.STREAM,
                    encoding=pb.Encoding.JSON_IETF,
                    subscription=[
                        pb.Subscription(
                            path=parse_path(p),
                            mode=mode,
                            sample_interval=ns if mode == pb.SubscriptionMode.SAMPLE else 0,
                        )
                        for p in u.paths
                    ],
                )
            )
            # a SAMPLE stream that goes quiet for two intervals is stalled: reconnect
            stall = 2 * self.interval if mode == pb.SubscriptionMode.SAMPLE else None
            call = self._consume(self.stub.Subscribe(_once(req), metadata=md), stall, u.name)
            calls.append(self._unit(u, "stream", call))
            names.append(u.name)
        # synced once every subscription has sent its first full sample (or been refused)
        self._unsynced = set(names)
        await asyncio.gather(*calls)

    async def _consume(self, call: Any, stall: float | None = None, name: str = "") -> None:
        it = call.__aiter__()
        while not self.stopped:
            try:  # a deadline, not a task per message (wait_for's): ~50 messages per interval
                async with asyncio.timeout(stall):
                    resp = await it.__anext__()
            except StopAsyncIteration:
                return
            except TimeoutError:
                call.cancel()
                raise Stalled(f"no update for {stall:g} s") from None
            which = resp.WhichOneof("response")
            if which == "update":
                self._notification(resp.update)
            elif which == "sync_response":
                self._unsynced.discard(name)
                if not self._unsynced:
                    self._synced()

    async def _poll(self, md: list[tuple[str, str]]) -> None:
        """POLL: one Subscribe per target, a Poll message every interval, each answered by a
        full sample."""
        us = self._units()
        self._unsynced = {u.name for u in us}
        await asyncio.gather(
            *(self._unit(u, "poll", self._poll_one(md, u.target, u.paths, u.name)) for u in us)
        )

    async def _poll_one(
        self, md: list[tuple[str, str]], target: str, paths: tuple[str, ...], name: str
    ) -> None:
        pb = gnmi_pb()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        await queue.put(
            pb.SubscribeRequest(
                subscribe=pb.SubscriptionList(
                    prefix=self._prefix(target),
                    mode=pb.SubscriptionList.POLL,
                    encoding=pb.Encoding.JSON_IETF,
                    subscription=[pb.Subscription(path=parse_path(p)) for p in paths],
                )
            )
        )

        async def requests() -> AsyncIterator[Any]:
            while True:
                yield await queue.get()

        async def ticker() -> None:
            while not self.stopped:
                await asyncio.sleep(self.interval)
                await queue.put(pb.SubscribeRequest(poll=pb.Poll()))

        tick = asyncio.ensure_future(ticker())
        try:
            call = self.stub.Subscribe(requests(), metadata=md)
            await self._consume(call, 2 * self.interval, name)
        finally:
            tick.cancel()

    def _synced(self) -> None:
        self.last_update = time.monotonic()
        if not self.synced.is_set():
            self.synced.set()
        self.error = ""

    def _notification(self, n: Any) -> None:
        # the switch's own time; a notification without one gets the arrival time
        ts_ms = n.timestamp // 1_000_000 if n.timestamp > 0 else int(self.clock() * 1000)
        for p in n.delete:  # what the switch no longer has (gNMI spec 2.1, 3.5.2.3)
            elems = path_str(n.prefix, p)
            with self.lock:
                if self._delete(elems):
                    self.updates += 1
        for elems, val in self._updates(n):
            if self._take(elems, val, ts_ms):  # read without decoding it whole
                self.updates += 1
                continue
            try:
                value = decode(val)
            except ValueError as e:
                self.problems.add("bad_update", f"{self.name} {format_path(elems)}", str(e))
                continue
            with self.lock:
                ok = self._apply(elems, value, ts_ms)
            if ok:
                self.updates += 1
            else:
                self.problems.add(
                    "bad_update",
                    f"{self.name} {format_path(elems)}",
                    f"unexpected value {value!r:.80}",
                )
        self.last_update = time.monotonic()

    def _updates(self, n: Any) -> Iterator[tuple[list[tuple[str, dict[str, str]]], Any]]:
        """(path elements, TypedValue) of each update of a notification."""
        paths = self._paths
        for u in n.update:
            # the same few paths arrive every interval: their elements parsed once (the
            # serialized path is the key: ~0.3 us against ~8 us for path_str)
            key = (n.prefix.SerializeToString(), u.path.SerializeToString())
            elems = paths.get(key)
            if elems is None:
                if len(paths) >= 4096:  # a target naming ever new paths: start over
                    paths.clear()
                elems = paths[key] = path_str(n.prefix, u.path)
            yield elems, u.val

    def _decoded(self, n: Any) -> Iterator[tuple[list[tuple[str, dict[str, str]]], Any]]:
        """(path elements, value) of each update that decodes; the others are named."""
        for elems, val in self._updates(n):
            try:
                yield elems, decode(val)
            except ValueError as e:
                self.problems.add("bad_update", f"{self.name} {format_path(elems)}", str(e))

    def _delete(self, elems: list[tuple[str, dict[str, str]]]) -> bool:
        """Forget what a deleted path held (under the lock); False: nothing cached there."""
        return False

    def _take(self, elems: list[tuple[str, dict[str, str]]], val: Any, ts_ms: int) -> bool:
        """A dialect's shortcut for an update it can read without `decode` and `_apply`
        (True: read and applied; False: it goes the general way)."""
        return False

    async def _get(self, md: list[tuple[str, str]], target: str, paths: Sequence[str]) -> Any:
        pb = gnmi_pb()
        req = pb.GetRequest(
            prefix=self._prefix(target),
            path=[parse_path(p) for p in paths],
            encoding=pb.Encoding.JSON_IETF,
        )
        return (await self.stub.Get(req, metadata=md, timeout=self.timeout)).notification

    def _apply(self, elems: list[tuple[str, dict[str, str]]], value: Any, ts_ms: int) -> bool:
        raise NotImplementedError

    def close(self) -> None:
        self.stopped = True


def pb_stub(ch: Any) -> Any:
    from pygnmi.spec.v080 import gnmi_pb2_grpc

    return gnmi_pb2_grpc.gNMIStub(ch)


async def _once(req: Any) -> AsyncIterator[Any]:
    yield req
    await (
        asyncio.Event().wait()
    )  # keep the request side open: closing it ends some servers' streams


class GnmiLoop:
    """One asyncio loop in one thread for every gNMI switch of a source."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="railscope-gnmi", daemon=True
        )
        self.thread.start()
        self.tasks: list[Any] = []

    def start(self, stream: Stream) -> None:
        self.tasks.append(asyncio.run_coroutine_threadsafe(stream.run(), self.loop))

    def close(self) -> None:
        """Cancel the streams, let them unwind, stop the loop. A second call does nothing (a
        coroutine handed to a stopped loop is never awaited: RuntimeWarning, and a 2 s wait)."""
        if not self.thread.is_alive():
            return
        for t in self.tasks:
            t.cancel()
        drained = asyncio.run_coroutine_threadsafe(asyncio.sleep(0), self.loop)
        with contextlib.suppress(Exception):
            drained.result(timeout=2)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=2)
