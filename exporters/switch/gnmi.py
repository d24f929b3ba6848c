"""gNMI dial-in to switches: one Subscribe per switch and database on one asyncio loop, the
streamed values cached per switch and read by the switch source's poll like any other database.

Two dialects behind one interface (`SonicGnmi`, `OpenConfigGnmi`, both with `poll()`):
SONiC telemetry (COUNTERS_DB virtual paths, decoded into the same SAI hashes the Redis path
reads, so `sonic_counters.csv` is the one mapping) and OpenConfig (openconfig-interfaces/-qos/
-lldp leaves through `openconfig_counters.csv`). It only reads. A value that is not a number,
an update that is not the JSON it should be, a wrong password or a switch that stops streaming
is counted by reason and named in one log line; it never becomes a stored number.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import logging
import random
import re
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import orjson

from exporters.switch import counters as C
from exporters.switch.config import GnmiConfig
from exporters.switch.gnmi_paths import Served, Unit, units
from exporters.switch.sonic import SwitchDown
from telemetry.errors import UserError
from telemetry.text import split_top_level

log = logging.getLogger(__name__)

OC_CSV = Path(__file__).with_name("openconfig_counters.csv")
# What the gNMI transport can report besides the parse reasons.
REASONS = ("auth_failed", "bad_update", "stream_stalled", "unreachable", "path_refused")

SONIC_MAPS = C.MAPS
SONIC_SAMPLE = ("COUNTERS/Ethernet*", "COUNTERS/Ethernet*/Queues")
# SONiC's virtual path for one counter of every port (sonic-gnmi sonic_data_client/virtual_db.go:
# COUNTERS_DB COUNTERS Ethernet* * -> v2rEthPortFieldStats); answered {port: {counter: "n"}}
SONIC_FIELD = "COUNTERS/Ethernet*/{}"
SONIC_ON_CHANGE = ("PORT_TABLE", "LLDP_ENTRY_TABLE")
OC_SAMPLE = (
    "interfaces/interface[name=*]/state/counters",
    "qos/interfaces/interface[interface-id=*]/output/queues/queue[name=*]/state",
)
# PFC per 802.1p priority: not in the OpenConfig models; Enterprise SONiC's management framework
# publishes it as openconfig-qos-ext (docs/switch-gnmi.md cites the model). Opt-in per switch
# (gnmi.openconfig_pfc): a switch without the model may refuse a Subscribe that names it.
OC_PFC = "qos/interfaces/interface[interface-id=*]/pfc/pfc-priorities/pfc-priority[dot1p=*]/state"
OC_ON_CHANGE = (
    "interfaces/interface[name=*]/state/oper-status",
    "interfaces/interface[name=*]/ethernet/state/port-speed",
    "lldp/interfaces/interface[name=*]/neighbors/neighbor[id=*]/state",
)


def gnmi_pb() -> Any:
    """pygnmi's compiled gnmi.proto (the one copy in the process: pygnmi's client uses it too)."""
    from pygnmi.spec.v080 import gnmi_pb2

    return gnmi_pb2


# -- paths -----------------------------------------------------------------------------------
_ELEM = re.compile(r"([^/\[]+)((?:\[[^=\]]+=[^\]]*\])*)")


def parse_path(s: str, target: str = "") -> Any:
    """'interfaces/interface[name=*]/state' -> gnmi.Path (elem with keys)."""
    pb = gnmi_pb()
    elems = []
    for part in split_top_level(s.strip("/"), "/", "[", "]"):
        m = _ELEM.fullmatch(part)
        if not m:
            raise UserError(f"gNMI path {s!r}: cannot read {part!r}")
        keys = dict(re.findall(r"\[([^=\]]+)=([^\]]*)\]", m.group(2)))
        elems.append(pb.PathElem(name=m.group(1), key=keys))
    return pb.Path(elem=elems, target=target)


def path_str(prefix: Any, path: Any) -> list[tuple[str, dict[str, str]]]:
    """Prefix + path as [(name, keys)]."""
    return [(e.name, dict(e.key)) for p in (prefix, path) if p is not None for e in p.elem]


def decode(value: Any) -> Any:
    """A TypedValue as Python: JSON (json_ietf_val / json_val) parsed, scalars as they are.
    Raises ValueError for what cannot be read (never guesses)."""
    kind = value.WhichOneof("value")
    if kind in ("json_ietf_val", "json_val"):
        return _json(getattr(value, kind), kind)
    if kind in ("string_val", "ascii_val", "uint_val", "int_val", "bool_val"):
        return getattr(value, kind)
    if kind in ("float_val", "double_val"):
        return getattr(value, kind)
    raise ValueError(f"unsupported value type {kind}")


def _json(raw: bytes | str, kind: str) -> Any:
    """JSON text as Python; ValueError (naming `kind`) where it is not JSON."""
    try:
        return orjson.loads(raw)  # a sample is ~0.5 MB of JSON per switch: 2x json's speed
    except orjson.JSONDecodeError:
        pass
    try:  # what orjson refuses but JSON allows (integers past 64 bits) is still JSON
        return json.loads(raw.decode() if isinstance(raw, bytes) else raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{kind} is not JSON: {e}") from None


def _str(v: Any) -> str:
    """Counter values travel as strings into the shared parser (which validates them)."""
    return v if isinstance(v, str) else json.dumps(v)


class Stalled(Exception):
    """A SAMPLE stream sent nothing for two intervals."""


# -- the per-switch stream state -------------------------------------------------------------
class _Stream:
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
                self.problems.add("bad_update", f"{self.name} {_fmt(elems)}", str(e))
                continue
            with self.lock:
                ok = self._apply(elems, value, ts_ms)
            if ok:
                self.updates += 1
            else:
                self.problems.add(
                    "bad_update", f"{self.name} {_fmt(elems)}", f"unexpected value {value!r:.80}"
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
                self.problems.add("bad_update", f"{self.name} {_fmt(elems)}", str(e))

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


def _fmt(elems: list[tuple[str, dict[str, str]]]) -> str:
    return "/".join(n + "".join(f"[{k}={v}]" for k, v in sorted(ks.items())) for n, ks in elems)


# -- SONiC telemetry ---------------------------------------------------------------------------
class SonicGnmi(_Stream):
    """SONiC's telemetry service: COUNTERS_DB name maps and CONFIG_DB `PORT` read once (Get),
    `COUNTERS/Ethernet*` and `COUNTERS/Ethernet*/Queues` SAMPLEd, APPL_DB `PORT_TABLE` /
    `LLDP_ENTRY_TABLE` ON_CHANGE.

    The telemetry service keys those answers by each port's vendor alias (CONFIG_DB
    `PORT|<name>` `alias`: `etp1`, `Ethernet1/1`), not by the SONiC name the name maps use
    (sonic-gnmi virtual_db.go v2rEthPortStats, v2rEthPortQueStats): the keys are turned back
    into SONiC names as each update arrives.

    An update's decoded JSON is kept as it came (port or queue name -> SAI counter hash): no
    per-value work when it arrives. A poll reads the cache column by column through
    `sonic_counters.csv` (`counters.field_columns`, the Redis path's mapping and rules).

    `sonic_paths: fields` (opt-in) subscribes, instead of `COUNTERS/Ethernet*`, one path per
    port counter the mapping reads (`COUNTERS/Ethernet*/<counter>`: 50 of a port's ~130): each
    of those updates is one counter of every port, one column. SONiC sends each path as a
    message of its own: ~50 per switch and interval, which cost more CPU than the values they
    spare (docs/switch-gnmi.md, Cost). A switch that refuses them (NOT_FOUND /
    INVALID_ARGUMENT before any answered) is asked for the whole hashes from then on, and the
    fallback logged once."""

    sample_target = "COUNTERS_DB"
    change_target = "APPL_DB"
    sample_paths: tuple[str, ...] = SONIC_SAMPLE
    change_paths = SONIC_ON_CHANGE

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.maps: dict[str, dict[str, str]] = {}
        self.appl: dict[str, dict[str, str]] = {}  # PORT_TABLE:<port>, LLDP_ENTRY_TABLE:<port>
        self.port_h: dict[str, Any] = {}  # port name -> its COUNTERS hash as streamed
        self.queue_h: dict[str, Any] = {}  # "Ethernet0:3" -> its COUNTERS hash as streamed
        self.port_ts: dict[str, int] = {}  # the switch's time of each hash's last update
        self.queue_ts: dict[str, int] = {}
        self.appl_ts = 0  # ... and of the last APPL_DB update
        # what the name maps say, as columns: ports (name, key) in natural order, queues
        # (name, port, index, type, key); queues whose index is not one (name, oid)
        self._ports: tuple[list[str], list[str]] = ([], [])
        self._queues: tuple[list[Any], ...] = ([], [], [], [], [])
        self._bad_queues: list[tuple[str, str]] = []
        # the port and queue names as the switch keys its answers (the vendor alias in place of
        # the port name), in the name maps' order, and back: key as sent -> SONiC name
        self._wire: dict[str, list[str]] = {"port": [], "queue": []}
        self._unwire: dict[str, str] = {}
        # lldp_link columns of `appl` (None: to be read); APPL_DB changes on change only
        self._lldp: dict[str, list[Any]] | None = None
        # the ports' (up, speed_bps) columns from PORT_TABLE, for the port names they were read
        # for and APPL_DB as of `_appl_version`, with the problems that read named (named again
        # by each poll that uses them, as a read would)
        self._appl_version = 0
        self._status: tuple[int, list[str], list[Any], list[Any], list[tuple[Any, ...]]] | None
        self._status = None
        self._prio_ports: tuple[Any, list[str]] = (None, [])  # (port names, ... x 8)
        # the counters of an update that brought every port (or queue), read as it arrives
        # (`counters.read_batch`, while its values are fresh in memory) and used by the polls
        # until the next update (which replaces them, or leaves None for the poll to read)
        self._block: dict[str, dict[str, Any] | None] = {"port": None, "queue": None}
        # ... with the queues' PFC_WD_STATUS in queue order (the one non-counter a poll reads)
        self._wd: list[Any] | None = None
        # a whole update read by `_take` (its counters in `_block`) is kept as its JSON text
        # and decoded into port_h / queue_h only when something needs the hashes
        # (`_materialize`): a poll that has the block never does
        self._pending: dict[str, bytes | None] = {"port": None, "queue": None}
        # per kind, `_whole_reader` for the key order this switch sends (learned from its
        # first whole update of the kind that `_take` read)
        self._readers: dict[str, Any] = {}
        # sonic_paths=fields: each port counter's last update as it came ({port: {counter: v}}),
        # its switch time, and its column in port order read on arrival (None: the poll reads it)
        self.fields = self.cfg.sonic_paths == "fields"
        self.field_h: dict[str, dict[str, Any]] = {}
        self.field_ts: dict[str, int] = {}
        self._fcols: dict[str, tuple[Sequence[Any], C.Column] | None] = {}
        self._field_seen = False  # a field path answered: a later refusal is not about them
        self._said: set[str] = set()  # refusals this dialect words itself, said once
        if self.fields:
            self.sample_paths = SONIC_FIELD_SAMPLE

    def _refused(self, e: Any) -> bool:
        import grpc

        if not (self.fields and self.prepared and not self._field_seen):
            return False
        if e.code() not in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT):
            return False
        log.warning(
            "switch %s: gNMI %s refused COUNTERS/Ethernet*/<counter> (%s: %s): subscribing "
            "COUNTERS/Ethernet* (every counter) instead",
            self.name, self.cfg.address, e.code().name, e.details(),
        )  # fmt: skip
        with self.lock:
            self.fields = False
            self.sample_paths = SONIC_SAMPLE
        return True

    def _units(self) -> list[Unit]:
        # the per-counter paths are asked (and refused, and replaced) as one: `_refused`
        together = frozenset(self.sample_paths[:-1]) if self.fields else frozenset()
        return units(
            self.sample_target, self.sample_paths, self.change_target, self.change_paths, together
        )

    def _refused_by_dialect(self, unit: Unit, e: Any) -> bool:
        return self.fields and SONIC_SAMPLE[1] not in unit.paths and len(unit.paths) > 1

    async def _maps(self, md: list[tuple[str, str]]) -> list[Any]:
        """The name maps' notifications: asked in one Get, and where the target refuses it, map
        by map (a switch without PG or queue counters has no such maps: the others still
        count)."""
        import grpc

        try:
            return list(await self._get(md, "COUNTERS_DB", SONIC_MAPS))
        except grpc.aio.AioRpcError as e:
            if not self.served.is_refusal(e, "get"):
                raise
        notes: list[Any] = []
        for m in SONIC_MAPS:
            try:
                notes += await self._get(md, "COUNTERS_DB", (m,))
            except grpc.aio.AioRpcError as e:
                if not self.served.is_refusal(e, "get"):
                    raise
                self.served.refuse(Unit("COUNTERS_DB", (m,), False), e)
        return notes

    async def _aliases(self, md: list[tuple[str, str]]) -> dict[str, str]:
        """SONiC port name -> its vendor alias, from CONFIG_DB `PORT` (the ports whose alias
        differs from the name; an alias two ports share, or that is another port's name, is
        left out: it would name either). A switch that does not let CONFIG_DB be read: none,
        said once per session."""
        import grpc

        try:
            notes = await self._get(md, "CONFIG_DB", ("PORT",))
        except grpc.aio.AioRpcError as e:
            transport = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                         grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAUTHENTICATED)  # fmt: skip
            if e.code() in transport:
                raise
            unit = Unit("CONFIG_DB", ("PORT",), False)
            if not self.served.refused.get("CONFIG_DB/PORT") and "CONFIG_DB/PORT" not in self._said:
                self._said.add("CONFIG_DB/PORT")  # once, not once per session
                log.warning(
                    "switch %s: gNMI %s did not give CONFIG_DB PORT (%s: %s): ports are matched "
                    "by their SONiC names; a telemetry service that keys COUNTERS by vendor "
                    "alias will show them as missing_counters",
                    self.name, self.cfg.address, e.code().name, e.details(),
                )  # fmt: skip
            self.served.refuse(unit, e, logged=False)
            return {}
        out: dict[str, str] = {}
        for n in notes:
            for elems, v in self._decoded(n):
                if [e[0] for e in elems] != ["PORT"] or not isinstance(v, dict):
                    continue
                for key, h in v.items():
                    name = str(key).removeprefix("PORT|")
                    alias = h.get("alias") if isinstance(h, dict) else None
                    if isinstance(alias, str) and alias and alias != name:
                        out[name] = alias
        twice = {a for a, k in Counter(out.values()).items() if k > 1}
        return {n: a for n, a in out.items() if a not in twice and a not in out}

    async def _prepare(self, md: list[tuple[str, str]]) -> None:
        maps: dict[str, dict[str, str]] = {}
        for n in await self._maps(md):
            for elems, v in self._decoded(n):
                if len(elems) == 1 and isinstance(v, dict):
                    maps[elems[0][0]] = {str(k): _str(x) for k, x in v.items()}
        alias = await self._aliases(md)
        pmap = maps.get(C.PORT_NAME_MAP, {})
        qtype, qindex = maps.get(C.QUEUE_TYPE_MAP, {}), maps.get(C.QUEUE_INDEX_MAP, {})
        queues: tuple[list[Any], ...] = ([], [], [], [], [])  # name, port, index, type, key
        bad = []
        for qname, oid in maps.get(C.QUEUE_NAME_MAP, {}).items():
            port, _, tail = qname.rpartition(":")
            raw = qindex.get(oid, tail)
            try:
                idx = int(raw)
            except ValueError:
                idx = -1
            if not 0 <= idx <= 255:
                bad.append((qname, oid))  # named by each poll that has its counters (C._split)
                continue
            t = qtype.get(oid, "")
            row = (
                qname,
                port,
                idx,
                C.QUEUE_TYPES.get(t, t.lower() or "unknown"),
                f"COUNTERS:{oid}",
            )
            for c, v in zip(queues, row, strict=True):
                c.append(v)
        ports = sorted(pmap.items(), key=lambda kv: C._natural(kv[0]))
        names = {"port": [n for n, _ in ports], "queue": queues[0]}
        wire = {
            "port": [alias.get(n, n) for n in names["port"]],
            "queue": [
                f"{alias.get(p, p)}:{q.rpartition(':')[2]}"
                for q, p in zip(queues[0], queues[1], strict=True)
            ],
        }
        unwire = {w: n for k in wire for w, n in zip(wire[k], names[k], strict=True) if w != n}
        with self.lock:
            self.maps = maps
            self._ports = (names["port"], [f"COUNTERS:{o}" for _, o in ports])
            self._queues = queues
            self._wire, self._unwire = wire, unwire
            self._bad_queues = bad
            for kind in ("port", "queue"):  # its block was read in the old maps' order
                self._materialize(kind)
            self._block = {"port": None, "queue": None}
            self._wd = None
            self._fcols = {}  # read in the previous maps' port order: the poll reads them
            self._readers = {}  # a new session: learn the key order again

    def _apply(self, elems: list[tuple[str, dict[str, str]]], value: Any, ts_ms: int) -> bool:
        names = [e[0] for e in elems]
        if not isinstance(value, dict):
            return False
        if names and names[0] in SONIC_ON_CHANGE:
            # PORT_TABLE[/Ethernet0] or LLDP_ENTRY_TABLE[/Ethernet0]: a table or one key
            table = names[0]
            rows = {names[1]: value} if len(names) > 1 else value
            for key, h in rows.items():
                if not isinstance(h, dict):
                    return False
                if not h:  # a key deleted (Redis keeps no empty hash): sonic-gnmi sends {key: {}}
                    self.appl.pop(f"{table}:{key}", None)
                    continue
                self.appl[f"{table}:{key}"] = {str(k): _str(x) for k, x in h.items()}
            self._lldp = None
            self._appl_version += 1
            self.appl_ts = max(self.appl_ts, ts_ms)
            return True
        # COUNTERS/Ethernet0 -> {SAI...}; COUNTERS/Ethernet0/Queues -> {"Ethernet0:3": {...}};
        # a wildcard answered in one update -> {"Ethernet0": {...}, ...}
        if names[:1] != ["COUNTERS"]:
            return False
        queues = names[-1] == "Queues"
        if len(names) == 3 and not queues and "*" in names[1]:
            return self._apply_field(names[2], value, ts_ms)
        port = names[1] if len(names) > 1 and "*" not in names[1] else None
        groups = {port: value} if port is not None and not queues else value
        if not all(type(h) is dict for h in groups.values()):
            return False
        groups = self._named(groups)
        kind = "queue" if queues else "port"
        self._materialize(kind)  # an update read by _take before this one goes first
        # the hashes are kept whole, never edited: a poll reads them without a copy; their
        # values are checked when a poll reads them (a bad one is named there, per counter)
        (self.queue_h if queues else self.port_h).update(groups)
        (self.queue_ts if queues else self.port_ts).update(dict.fromkeys(groups, ts_ms))
        self.values += len(groups)
        names = self._queues[0] if queues else self._ports[0]
        hashes: list[Any] = list(map(groups.get, names))
        cols = (
            C.read_batch(_QUEUE_TERMS if queues else _PORT_TERMS, hashes)
            if names and None not in hashes
            else None
        )
        self._block[kind] = cols
        return True

    def _delete(self, elems: list[tuple[str, dict[str, str]]]) -> bool:
        names = [e[0] for e in elems]
        if len(names) != 2 or names[0] not in SONIC_ON_CHANGE:
            return False
        if self.appl.pop(f"{names[0]}:{names[1]}", None) is None:
            return False
        self._lldp = None
        self._appl_version += 1
        return True

    def _named(self, d: dict[str, Any]) -> dict[str, Any]:
        """An answer's {port or queue key as the switch sent it: ...} keyed by SONiC names."""
        un = self._unwire
        return {un.get(k, k): v for k, v in d.items()} if un else d

    def _take(self, elems: list[tuple[str, dict[str, str]]], val: Any, ts_ms: int) -> bool:
        """A whole `COUNTERS/Ethernet*` or `COUNTERS/Ethernet*/Queues` update read straight into
        its counter columns (what `_apply` + `read_batch` would make of it, value for value),
        without decoding the hashes: msgspec reads only the counters the mapping names (~50 of
        a port's ~130) as strings, one numpy parse turns them into uint64 columns. Only where
        that is exact: JSON text, ASCII, every port/queue of the name maps there as an object,
        each counter on all of them or on none, every value 1-19 decimal digits (int()'s value,
        < 2**64), PFC_WD_STATUS a string. Anything else (a bad value, a port left out, a
        number, a 20-digit counter) returns False: `decode` + `_apply`, which name it."""
        kind = _whole_kind(elems)
        if kind is None:
            return False
        which = val.WhichOneof("value")
        if which not in ("json_ietf_val", "json_val"):
            return False
        raw = getattr(val, which)
        if not isinstance(raw, bytes):
            raw = raw.encode()
        names = self._wire[kind]  # the keys as the switch sends them
        if not names or not raw.isascii():  # ASCII: no UTF-8 for msgspec to judge otherwise
            return False
        reader = self._readers.get(kind)
        got = _read_whole(kind, raw, names, reader)
        if got is None:
            return False
        if reader is None:
            self._readers[kind] = _whole_reader(kind, _layout(raw))
        top, cols, wd = got
        with self.lock:
            self._pending[kind] = raw
            (self.queue_ts if kind == "queue" else self.port_ts).update(
                dict.fromkeys(self._named(top), ts_ms)
            )
            self.values += len(top)
            self._block[kind] = cols
            if kind == "queue":
                self._wd = wd
        return True

    def _materialize(self, kind: str) -> None:
        """The hashes of the last update `_take` read into port_h / queue_h (under the lock)."""
        raw = self._pending[kind]
        if raw is None:
            return
        self._pending[kind] = None
        # _take read it: JSON objects of objects (json.loads takes what orjson may refuse)
        (self.queue_h if kind == "queue" else self.port_h).update(
            self._named(_json(raw, "json_ietf_val"))
        )

    def _apply_field(self, field: str, value: dict[str, Any], ts_ms: int) -> bool:
        """`COUNTERS/Ethernet*/<field>` -> {port: {field: "n"}} (ports without the counter left
        out, as SONiC does): kept as it came, and read into one column in port order where
        every port is there (or none: a counter this switch model lacks)."""
        if not all(type(h) is dict for h in value.values()):
            return False
        value = self._named(value)
        self._field_seen = True
        self.field_h[field] = value
        self.field_ts[field] = ts_ms
        self.values += len(value) / len(_FIELD_TERMS)  # a port's counter set in all
        names = self._ports[0]
        col: tuple[Sequence[Any], C.Column] | None = None
        if not names:
            pass
        elif not value:  # a counter this switch model lacks
            col = ((None,) * len(names), [None] * len(names))
        else:  # read_batch's rules (int()'s, 0 <= n < 2**64) for one counter, its checks inlined
            try:
                raw = [h[field] for h in map(value.__getitem__, names)]
                if set(map(type, raw)) == _STR:
                    col = (C._Present(len(raw)), np.array(raw, dtype=np.uint64))
            except (KeyError, ValueError, OverflowError):
                col = None  # a port left out, or a value not a counter: the poll names it
        self._fcols[field] = col
        return True

    def caught_up(self, ts_ms: int) -> bool:
        """Every port's and queue's counters, and APPL_DB, streamed as of the switch's time
        `ts_ms` or later (a replayed switch's step has arrived)."""
        # APPL_DB the target does not serve (no oper status, no LLDP) is nothing to wait for
        appl_ok = self.appl_ts >= ts_ms or self.served.target_refused(self.change_target)
        with self.lock:
            if self.fields:
                return (
                    len(self.field_ts) == len(_FIELD_TERMS)
                    and min(self.field_ts.values()) >= ts_ms
                    and min(self.queue_ts.values(), default=ts_ms) >= ts_ms
                    and appl_ok
                )
            return (
                bool(self.port_ts)
                and min(self.port_ts.values()) >= ts_ms
                and min(self.queue_ts.values(), default=ts_ms) >= ts_ms
                and appl_ok
            )

    def poll_columns(self, problems: C.Problems, *, lldp: bool = True) -> tuple[Any, ...]:
        """(port columns, priority columns, queue columns, lldp rows): record fields as lists of
        equal length, `ts` the switch's time of each row's last update."""
        self.check_up()
        with self.lock:
            fields = self.fields
            if fields:
                field_h, fcols, fts = dict(self.field_h), dict(self._fcols), self.field_ts
                ts_all = max(fts.values(), default=0)  # the latest of the port counters
            if self._bad_queues:  # named by the hashes that have counters
                self._materialize("queue")
            # the last whole update read by _take, its hashes not decoded: its block has every
            # counter the poll reads, of every port (queue) of the maps, each with some
            taken = self._pending["port"] is not None
            qtaken = self._pending["queue"] is not None
            wd: list[Any] = self._wd if qtaken and self._wd is not None else []
            port_h, queue_h = dict(self.port_h), dict(self.queue_h)
            pre, qpre = self._block["port"] or {}, self._block["queue"] or {}  # read on arrival
            port_ts, queue_ts = dict(self.port_ts), dict(self.queue_ts)
            appl = self.appl
            ports, queues = self._ports, self._queues
            if lldp and self._lldp is None:
                self._lldp = _lldp_columns(C.lldp_rows(appl))  # APPL_DB changes on change only
            ll = self._lldp if lldp else {}  # shared: read only by the source
            appl_version, status = self._appl_version, self._status
        names, keys = ports
        hashes: list[Any]
        if fields and len(fcols) == len(_FIELD_TERMS) and None not in fcols.values():
            # every port counter read into a column as it arrived: no hash is read
            pre = {t: c for t, c in fcols.items() if c is not None}
            hashes = [True] * len(names)
        elif fields:  # a counter not read on arrival: the ports' hashes, merged, for the poll
            hashes = [{} for _ in names]
            for t, v in field_h.items():
                for h, fh in zip(hashes, map(v.get, names), strict=True):
                    if fh is not None and t in fh:
                        h[t] = fh[t]
            pre = {t: c for t, c in fcols.items() if c is not None}
        elif taken:
            hashes = [True] * len(names)
        else:
            hashes = list(map(port_h.get, names))
        if fields:
            port_ts = dict.fromkeys(names, ts_all)
        if not all(hashes):  # some port has not streamed (yet): without it
            have = [i for i, h in enumerate(hashes) if h]
            for i in sorted(set(range(len(names))) - set(have)):
                problems.add("missing_counters", keys[i])
            names, keys, hashes = ([c[i] for i in have] for c in (names, keys, hashes))
        # (read as they arrived: every port, none left out here)
        cache: dict[str, tuple[Sequence[Any], C.Column]] = (
            dict(pre) if len(names) == len(ports[0]) else {}
        )
        # the port and priority records read the same hashes: their counters in one batch
        C.read_counters(_PORT_TERMS, keys, hashes, problems, cache)
        pc: dict[str, C.Column] = {
            "port": names,
            "ts": _ts_column(list(map(port_ts.get, names))),
            **C.field_columns("port", keys, hashes, problems, cache=cache),
        }
        if status is None or status[0] != appl_version or status[1] != names:
            status = (appl_version, names, *_port_status(names, appl))
            with self.lock:
                if self._appl_version == appl_version:
                    self._status = status
        for args in status[4]:
            problems.add(*args)
        pc["up"], pc["speed_bps"] = status[2], status[3]
        chunks: dict[str, list[C.Column]] = {}  # priority fields, one chunk per priority
        for p in C.PRIORITIES:
            f = C.field_columns("priority", keys, hashes, problems, p, cache=cache)
            if any(C.full(c) for c in f.values()):  # a value on every port: every row
                part = {"port": names, "ts": pc["ts"], "priority": np.full(len(names), p), **f}
            else:
                have = [i for i in range(len(names)) if any(c[i] is not None for c in f.values())]
                part = {
                    k: [c[i] for i in have]
                    for k, c in (("port", names), ("ts", pc["ts"]), *f.items())
                }
                part["priority"] = [p] * len(have)
            for k, c in part.items():
                chunks.setdefault(k, []).append(c)
        prio = {k: _concat(c) for k, c in chunks.items() if k != "port"}
        if chunks and all(c is names for c in chunks["port"]):  # every priority on every port
            if self._prio_ports[0] is not names:  # the same list while the ports are
                self._prio_ports = (names, names * len(C.PRIORITIES))
            prio["port"] = self._prio_ports[1]
        elif chunks:
            prio["port"] = _concat(chunks["port"])
        qnames, qport, qidx, qtype, qkeys = queues
        qhashes: list[Any] = [True] * len(qnames) if qtaken else list(map(queue_h.get, qnames))
        if not all(qhashes):  # only the queues that streamed
            have = [i for i, h in enumerate(qhashes) if h]
            qnames, qport, qidx, qtype, qkeys, qhashes = (
                [c[i] for i in have] for c in (qnames, qport, qidx, qtype, qkeys, qhashes)
            )
        for qname, oid in self._bad_queues:
            if queue_h.get(qname):
                idx = self.maps.get(C.QUEUE_INDEX_MAP, {}).get(oid)
                C._split(qname, idx, problems, C.QUEUE_NAME_MAP)
        qc: dict[str, C.Column] = {
            "port": qport,
            "queue": np.asarray(qidx, dtype=np.int64),
            "queue_type": qtype,
            "ts": _ts_column(list(map(queue_ts.get, qnames))),
            **C.field_columns(
                "queue",
                qkeys,
                qhashes,
                problems,
                cache=dict(qpre) if len(qnames) == len(queues[0]) else {},
            ),
        }
        if not qtaken:
            wd = [h.get("PFC_WD_STATUS") for h in qhashes]
        if wd.count(None) != len(wd):
            qc["pfc_wd_storm_detected"] = [
                None if v is None else C.PFC_WD_STATUS.get(v) for v in wd
            ]
            for k, v in zip(qkeys, wd, strict=True):
                if v is not None and v not in C.PFC_WD_STATUS:
                    problems.add("bad_value", f"{k} PFC_WD_STATUS={v!r}")
        return pc, prio, qc, ll


# -- OpenConfig ------------------------------------------------------------------------------
class OpenConfigGnmi(_Stream):
    """OpenConfig: interface counters and queues SAMPLEd, oper status, speed and LLDP
    neighbours ON_CHANGE; leaves mapped to record fields by `openconfig_counters.csv`."""

    sample_paths: tuple[str, ...] = OC_SAMPLE
    change_paths = OC_ON_CHANGE

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        if self.cfg.openconfig_pfc:
            self.sample_paths = (*OC_SAMPLE, OC_PFC)
        self.ports: dict[str, dict[str, str]] = {}  # interface -> leaf -> value
        self.pfc: dict[tuple[str, int], dict[str, str]] = {}  # (interface, dot1p) -> leaf -> value
        self.port_ts: dict[str, int] = {}
        self.queues: dict[tuple[str, str], dict[str, str]] = {}
        self.lldp: dict[tuple[str, str], dict[str, str]] = {}

    def _apply(self, elems: list[tuple[str, dict[str, str]]], value: Any, ts_ms: int) -> bool:
        names = [e[0] for e in elems]
        # a target may send a container (.../state -> {"counters": {...}}), one leaf per update
        # (.../state/counters/in-octets -> 42, Arista, Cumulus) or either wrapped in its own
        # name (.../state/oper-status -> {"openconfig-interfaces:oper-status": "UP"}, SONiC's
        # translib): every leaf is named by its path below the list entry it belongs to
        leaves = _flatten(_unwrapped(value, names[-1] if names else ""))
        if leaves is None:
            return False
        where = self._entry(elems)
        if where is None:
            return False
        kind, key, at = where
        tail = "/".join(names[at + 1 :])
        got = {f"{tail}/{leaf}".strip("/"): v for leaf, v in leaves.items()}
        if kind == "port":
            self.ports.setdefault(key, {}).update(got)
            if "counters" in names or any("counters/" in k for k in got):
                # each leaf may carry its own time (EOS stamps a counter when it last changed):
                # the port's counters are as of the newest
                self.port_ts[key] = max(self.port_ts.get(key, 0), ts_ms)
            return True
        # queue, PFC and LLDP leaves are flat: named by their last element
        into: dict[Any, dict[str, str]] = self._caches()[kind]
        into.setdefault(key, {}).update((k.rsplit("/", 1)[-1], v) for k, v in got.items())
        return True

    def _caches(self) -> dict[str, dict[Any, dict[str, str]]]:
        return {"port": self.ports, "pfc": self.pfc, "queue": self.queues, "lldp": self.lldp}

    def _entry(self, elems: list[tuple[str, dict[str, str]]]) -> tuple[str, Any, int] | None:
        """(cache, its key, the index of the list entry's element) of a path, or None: not a
        path this dialect reads, or a wildcard or missing key where a name should be."""
        names = [e[0] for e in elems]
        if names[:2] == ["interfaces", "interface"]:
            port = elems[1][1].get("name", "")
            return None if not port or "*" in port else ("port", port, 1)
        if names[:3] == ["qos", "interfaces", "interface"] and "pfc-priority" in names:
            at = names.index("pfc-priority")
            port = elems[2][1].get("interface-id", "")
            dot1p = elems[at][1].get("dot1p", "")
            if not port or not dot1p.isdigit() or int(dot1p) > 7:
                return None
            return "pfc", (port, int(dot1p)), at
        if names[:3] == ["qos", "interfaces", "interface"] and "queue" in names:
            at = names.index("queue")
            port, q = elems[2][1].get("interface-id", ""), elems[at][1].get("name", "")
            return None if not port or not q else ("queue", (port, q), at)
        if names[:3] == ["lldp", "interfaces", "interface"] and "neighbor" in names:
            at = names.index("neighbor")
            port = elems[2][1].get("name", "")
            return None if not port else ("lldp", (port, elems[at][1].get("id", "")), at)
        return None

    def _delete(self, elems: list[tuple[str, dict[str, str]]]) -> bool:
        """A deleted list entry (an LLDP neighbour gone, an interface or queue removed), or a
        whole interface's neighbours, PFC priorities or queues: forgotten."""
        names = [e[0] for e in elems]
        where = self._entry(elems)
        if where is not None:
            kind, key, at = where
            if at != len(names) - 1:  # a leaf or container below an entry: kept until replaced
                return False
            gone = self._caches()[kind].pop(key, None) is not None
            if kind == "port":
                self.port_ts.pop(key, None)
            return gone
        # .../interface[name=X]/neighbors (or .../output/queues, .../pfc-priorities): every one
        if len(elems) >= 3 and names[:3] in (["lldp", "interfaces", "interface"],
                                             ["qos", "interfaces", "interface"]):  # fmt: skip
            port = elems[2][1].get("name") or elems[2][1].get("interface-id", "")
            of = {"neighbors": "lldp", "queues": "queue", "pfc-priorities": "pfc"}
            into = self._caches().get(of.get(names[-1], ""))
            if into is None or not port:
                return False
            keys = [k for k in into if k[0] == port]
            for k in keys:
                del into[k]
            return bool(keys)
        return False

    def poll(self, problems: C.Problems, *, lldp: bool = True) -> tuple[list[Any], ...]:
        self.check_up()
        with self.lock:
            ports = {p: dict(h) for p, h in self.ports.items()}
            queues = {k: dict(h) for k, h in self.queues.items()}
            neigh = {k: dict(h) for k, h in self.lldp.items()} if lldp else {}
            pts = dict(self.port_ts)
            pfc = {k: dict(h) for k, h in self.pfc.items()}
        prow = []
        for port in sorted(ports, key=C._natural):
            h = ports[port]
            counters = {k.rsplit("/", 1)[-1]: v for k, v in h.items() if "counters/" in k}
            if not counters:
                continue
            key = f"interfaces/interface[name={port}]"
            row: dict[str, Any] = {
                "port": port,
                **C.fields_from("port", key, counters, problems, table=OC_CSV),
            }
            row["priorities"] = prios = []
            for p in C.PRIORITIES:
                ph = pfc.get((port, p))
                if ph is None:
                    continue
                pkey = f"qos/interfaces/interface[interface-id={port}]/pfc/pfc-priorities/pfc-priority[dot1p={p}]"
                f = C.fields_from("priority", pkey, ph, problems, p, table=OC_CSV)
                if any(v is not None for v in f.values()):
                    prios.append({"priority": p, **f})
            row.update(C.pfc_sums(prios))
            status = h.get("state/oper-status")
            row["up"] = None if status is None else int(status == "UP")
            row["speed_bps"] = _oc_speed(h.get("ethernet/state/port-speed"))
            if port in pts:
                row["ts"] = pts[port]
            prow.append(row)
        qrow = []
        # a queue is stored by number: a name gives its trailing digits, and two names of one
        # port that give the same number (BE1, AF1, NC1) cannot be told apart: named, not stored
        index = {k: _queue_index(k[1]) for k in queues}
        twice = Counter((p, i) for (p, _), i in index.items() if i is not None)
        for (port, q), h in sorted(
            queues.items(), key=lambda kv: C._natural(kv[0][0] + ":" + kv[0][1])
        ):
            idx = index[(port, q)]
            if idx is None:
                problems.add("bad_value", f"{self.name} queue {port}/{q!r}")
                continue
            if twice[(port, idx)] > 1:
                problems.add(
                    "bad_value",
                    f"{self.name} queue {port}/{q!r}",
                    f"its number {idx} is also another queue's name's on {port}",
                )
                continue
            key = f"qos/interfaces/interface[interface-id={port}]/output/queues/queue[name={q}]"
            qrow.append({"port": port, "queue": idx, "queue_type": "unicast",
                         **C.fields_from("queue", key, h, problems, table=OC_CSV)})  # fmt: skip
        lrow = [
            {
                "local_port": port,
                "remote_device": h.get("system-name", ""),
                "remote_port": (
                    h.get("port-description", "")
                    if h.get("port-id-type") == "MAC_ADDRESS" and h.get("port-description")
                    else h.get("port-id", "")
                ),
                "remote_chassis_id": h.get("chassis-id", ""),
                "source": "gnmi",
            }
            for (port, _), h in sorted(neigh.items(), key=lambda kv: C._natural(kv[0][0]))
        ]
        return prow, qrow, lrow


_PORT_TERMS = tuple(
    t for k, p in [("port", None), *(("priority", p) for p in C.PRIORITIES)] for t in C.terms(k, p)
)
_QUEUE_TERMS = C.terms("queue")
_WD = "PFC_WD_STATUS"
_U64_MAX = np.uint64(2**64 - 1)


def _whole_kind(elems: list[tuple[str, dict[str, str]]]) -> str | None:
    """ "port" for `COUNTERS/Ethernet*`, "queue" for `COUNTERS/Ethernet*/Queues`, else None."""
    if len(elems) not in (2, 3) or elems[0][0] != "COUNTERS" or "*" not in elems[1][0]:
        return None
    if len(elems) == 2:
        return "port"
    return "queue" if elems[2][0] == "Queues" else None


@functools.lru_cache(maxsize=32)
def _whole_reader(
    kind: str, layout: tuple[str, ...] = ()
) -> tuple[Any, tuple[str, ...], dict[str, str]]:
    """A msgspec decoder of a whole update of `kind` ({name: {counter: "n"}}) that keeps only
    the counters the mapping reads (and PFC_WD_STATUS of queues), each a str or absent (None;
    JSON null or a number is refused); its counters; their struct attributes.

    `layout`: the keys of one hash in the order the switch sends them (`_layout`). The struct
    then has a field for each of them in that order, those the mapping does not read taking
    any JSON value and dropped with the struct: msgspec looks a key up at the field it expects
    next and searches every field only when that one is not it, so a key that is no field at
    all (80 of a SONiC port's ~130 counters) costs a search of all the struct's fields. One
    64-port SONiC update (sonic-gnmi sends its keys sorted: Go's json.Marshal of a map): 0.46 ms
    without the layout, 0.32 ms with it. Any order still decodes the same, only slower."""
    terms = tuple(dict.fromkeys(_QUEUE_TERMS if kind == "queue" else _PORT_TERMS))
    keys = (*terms, _WD) if kind == "queue" else terms
    attrs = {k: f"c{i}" for i, k in enumerate(keys)}  # counter names need not be identifiers
    sent = dict.fromkeys(layout)
    order = [*sent, *(k for k in keys if k not in sent)]
    fields = [
        (attrs[k], str, msgspec.field(default=None, name=k))
        if k in attrs
        else (f"x{i}", Any, msgspec.field(default=None, name=k))
        for i, k in enumerate(order)
    ]
    struct = msgspec.defstruct(f"_{kind}_counters", fields, gc=False)  # type: ignore[arg-type]
    return msgspec.json.Decoder(dict[str, struct]), terms, attrs  # type: ignore[valid-type]


def _layout(raw: bytes) -> tuple[str, ...]:
    """The keys of a whole update's first hash, in the order sent (once per switch and kind)."""
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        first = next(iter(_json(raw, "json_ietf_val").values()), None)
        if isinstance(first, dict):
            return tuple(first)
    return ()


def _read_whole(
    kind: str, raw: bytes, names: Sequence[str], reader: Any = None
) -> tuple[dict[str, Any], dict[str, tuple[Sequence[Any], C.Column]], list[Any] | None] | None:
    """(the update's {name: counters}, `read_batch`'s columns for `names`, the queues'
    PFC_WD_STATUS) of a whole update's JSON text, or None where `SonicGnmi._take` does not
    apply (see there). `reader`: `_whole_reader`'s answer for the switch's key order."""
    dec, terms, attrs = reader or _whole_reader(kind)
    try:
        top = dec.decode(raw)
    except msgspec.MsgspecError:  # not JSON, not objects of objects, a counter not a string
        return None
    structs = list(map(top.get, names))
    if None in structs:  # a port (queue) of the maps left out
        return None
    n = len(structs)
    have = [t for t in terms if getattr(structs[0], attrs[t]) is not None]
    if not have:  # no counter the mapping reads (or an empty hash): the general way
        return None
    rows = map(attrgetter(*(attrs[t] for t in have)), structs)
    arr = _uint64s(rows if len(have) == 1 else itertools.chain.from_iterable(rows), n * len(have))
    if arr is None:
        return None
    arr = arr.reshape(n, len(have)).T.copy()  # each counter's values contiguous, as read_batch
    present = C._Present(n)
    cols: dict[str, tuple[Sequence[Any], C.Column]] = {
        t: (present, arr[j]) for j, t in enumerate(have)
    }
    absent = [t for t in terms if t not in cols]
    if absent:  # counters the model lacks: on none of them
        get = attrgetter(*(attrs[t] for t in absent))
        vals = (
            map(get, structs)
            if len(absent) == 1
            else itertools.chain.from_iterable(map(get, structs))
        )
        if set(vals) - {None}:
            return None
        nones = (None,) * n
        cols.update((t, (nones, [None] * n)) for t in absent)
    wd = list(map(attrgetter(attrs[_WD]), structs)) if kind == "queue" else None
    return top, cols, wd


def _uint64s(values: Iterable[Any], count: int) -> np.ndarray[Any, Any] | None:
    """Counter strings as one uint64 array where every one is ASCII digits (int()'s value) and
    below 2**64 - 1 (`count` of them); None otherwise (one absent, empty, a sign, a space, a comma ...)."""
    try:
        text = ",".join(values).encode("ascii")
    except (TypeError, UnicodeEncodeError):  # None (absent on some), or not ASCII
        return None
    # bytes.isdigit: ASCII 0-9 only; an empty value leaves two commas side by side
    if not text.replace(b",", b"").isdigit() or b",," in text or text[:1] == b"," or text[-1:] == b",":  # fmt: skip
        return None
    arr = np.fromstring(text, dtype=np.uint64, sep=",")  # strtoull: saturates past 2**64 - 1
    if len(arr) != count or arr.max() == _U64_MAX:  # a comma in one / too large for sure
        return None
    return arr


_STR = frozenset((str,))
# sonic_paths=fields: one path per port counter the mapping reads (the port and priority rows',
# every alternative: which one a switch model has is known only from its answers); queues stay
# `COUNTERS/Ethernet*/Queues`, which has no per-counter form in SONiC's virtual paths
_FIELD_TERMS = tuple(dict.fromkeys(_PORT_TERMS))  # once each (the priority rows repeat some)
SONIC_FIELD_SAMPLE = (*(SONIC_FIELD.format(t) for t in _FIELD_TERMS), SONIC_SAMPLE[1])


def _port_status(
    names: Sequence[str], appl: dict[str, dict[str, str]]
) -> tuple[list[Any], list[Any], list[tuple[Any, ...]]]:
    """(up, speed_bps) of each port from APPL_DB PORT_TABLE (`counters.port_status`), and the
    problems that read named (reason, subject, detail, n)."""
    named: list[tuple[Any, ...]] = []
    rec = _Record(named)
    up, speed = [], []
    for n in names:
        u, sp = C.port_status(n, appl, rec)
        up.append(u)
        speed.append(sp)
    return up, speed, named


class _Record:
    """Problems kept to be named again (`C.Problems`)."""

    def __init__(self, into: list[tuple[Any, ...]]) -> None:
        self.into = into

    def add(self, reason: str, subject: str = "", detail: str = "", n: int = 1) -> None:
        self.into.append((reason, subject, detail, n))


_LLDP_FIELDS = ("local_port", "remote_device", "remote_port", "remote_chassis_id", "source")


def _lldp_columns(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """`counters.lldp_rows` as lldp_link columns ({} where there are none)."""
    if not rows:
        return {}
    return {f: [r[f] for r in rows] for f in _LLDP_FIELDS}


def _ts_column(ts: list[int | None]) -> C.Column:
    """Rows' update times: one array where they are one time (a notification's ports or
    queues, the common case), else the list."""
    if ts and ts[0] is not None and ts.count(ts[0]) == len(ts):
        return np.full(len(ts), ts[0], dtype=np.int64)
    return ts


def _concat(chunks: list[C.Column]) -> C.Column:
    """Columns end to end: one array when every chunk is one, else one list."""
    if all(isinstance(c, np.ndarray) for c in chunks):
        return np.concatenate(chunks)
    return [x for c in chunks for x in c]


def _unwrapped(v: Any, name: str) -> Any:
    """A value wrapped in its own node's name ({"openconfig-interfaces:oper-status": "UP"} at
    .../oper-status, as SONiC's translib answers) -> what it wraps; anything else as it is."""
    if isinstance(v, dict) and len(v) == 1:
        ((k, inner),) = v.items()
        if str(k).split(":", 1)[-1] == name:
            return inner
    return v


def _flatten(v: Any, prefix: str = "") -> dict[str, str] | None:
    """JSON-IETF container -> {leaf path: value string}; a bare leaf -> {'': value}. Module
    prefixes (openconfig-interfaces:counters) are dropped."""
    if isinstance(v, dict):
        out: dict[str, str] = {}
        for k, x in v.items():
            name = str(k).split(":", 1)[-1]
            sub = _flatten(x, f"{prefix}/{name}" if prefix else name)
            if sub is None:
                return None
            out.update(sub)
        return out
    if isinstance(v, list):
        return None
    return {prefix: _str(v) if not isinstance(v, str) else v}


_SPEEDS = {"10MB": 1e7, "100MB": 1e8, "1GB": 1e9, "2500MB": 2.5e9, "5GB": 5e9, "10GB": 1e10,
           "25GB": 2.5e10, "40GB": 4e10, "50GB": 5e10, "100GB": 1e11, "200GB": 2e11,
           "400GB": 4e11, "600GB": 6e11, "800GB": 8e11, "1600GB": 1.6e12}  # fmt: skip


def _oc_speed(v: str | None) -> float | None:
    """openconfig-if-ethernet ETHERNET_SPEED identities (SPEED_100GB) -> bits/s."""
    if not v:
        return None
    return _SPEEDS.get(v.split(":", 1)[-1].removeprefix("SPEED_"))


def _queue_index(name: str) -> int | None:
    """Queue names are vendor strings ('3', 'UC3', 'queue3', 'Ethernet0:3'): the trailing number."""
    m = re.search(r"(\d+)$", name)
    return int(m.group(1)) if m and int(m.group(1)) <= 255 else None


DIALECTS: dict[str, type[_Stream]] = {"sonic": SonicGnmi, "openconfig": OpenConfigGnmi}


class GnmiLoop:
    """One asyncio loop in one thread for every gNMI switch of a source."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="railscope-gnmi", daemon=True
        )
        self.thread.start()
        self.tasks: list[Any] = []

    def start(self, stream: _Stream) -> None:
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


__all__ = [
    "DIALECTS",
    "REASONS",
    "SONIC_FIELD_SAMPLE",
    "GnmiLoop",
    "OpenConfigGnmi",
    "SonicGnmi",
    "decode",
    "gnmi_pb",
    "parse_path",
]
