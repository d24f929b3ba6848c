"""SONiC telemetry over gNMI (`SonicGnmi`): the COUNTERS_DB name maps and CONFIG_DB port aliases
read once per session, the COUNTERS paths SAMPLEd (whole hashes, or one path per counter),
APPL_DB PORT_TABLE / LLDP_ENTRY_TABLE ON_CHANGE, and a poll that reads the cache column by
column through `sonic_counters.csv`.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from exporters.switch import counters as C
from exporters.switch.gnmi_columns import (
    FIELD_TERMS,
    PORT_TERMS,
    QUEUE_TERMS,
    STR_TYPES,
    concat_columns,
    layout,
    lldp_columns,
    port_status,
    read_whole,
    ts_column,
    whole_kind,
    whole_reader,
)
from exporters.switch.gnmi_decode import json_value, text_of
from exporters.switch.gnmi_paths import Unit, units
from exporters.switch.gnmi_stream import Stream

log = logging.getLogger("exporters.switch.gnmi")

SONIC_MAPS = C.MAPS
SONIC_SAMPLE = ("COUNTERS/Ethernet*", "COUNTERS/Ethernet*/Queues")
# SONiC's virtual path for one counter of every port (sonic-gnmi sonic_data_client/virtual_db.go:
# COUNTERS_DB COUNTERS Ethernet* * -> v2rEthPortFieldStats); answered {port: {counter: "n"}}
SONIC_FIELD = "COUNTERS/Ethernet*/{}"
SONIC_ON_CHANGE = ("PORT_TABLE", "LLDP_ENTRY_TABLE")
# sonic_paths=fields: one path per port counter the mapping reads (the port and priority rows',
# every alternative: which one a switch model has is known only from its answers); queues stay
# `COUNTERS/Ethernet*/Queues`, which has no per-counter form in SONiC's virtual paths
SONIC_FIELD_SAMPLE = (*(SONIC_FIELD.format(t) for t in FIELD_TERMS), SONIC_SAMPLE[1])


# -- SONiC telemetry ---------------------------------------------------------------------------
class SonicGnmi(Stream):
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
        # per kind, `whole_reader` for the key order this switch sends (learned from its
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
                    maps[elems[0][0]] = {str(k): text_of(x) for k, x in v.items()}
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
                self.appl[f"{table}:{key}"] = {str(k): text_of(x) for k, x in h.items()}
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
            C.read_batch(QUEUE_TERMS if queues else PORT_TERMS, hashes)
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
        kind = whole_kind(elems)
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
        got = read_whole(kind, raw, names, reader)
        if got is None:
            return False
        if reader is None:
            self._readers[kind] = whole_reader(kind, layout(raw))
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
            self._named(json_value(raw, "json_ietf_val"))
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
        self.values += len(value) / len(FIELD_TERMS)  # a port's counter set in all
        names = self._ports[0]
        col: tuple[Sequence[Any], C.Column] | None = None
        if not names:
            pass
        elif not value:  # a counter this switch model lacks
            col = ((None,) * len(names), [None] * len(names))
        else:  # read_batch's rules (int()'s, 0 <= n < 2**64) for one counter, its checks inlined
            try:
                raw = [h[field] for h in map(value.__getitem__, names)]
                if set(map(type, raw)) == STR_TYPES:
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
                    len(self.field_ts) == len(FIELD_TERMS)
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
                self._lldp = lldp_columns(C.lldp_rows(appl))  # APPL_DB changes on change only
            ll = self._lldp if lldp else {}  # shared: read only by the source
            appl_version, status = self._appl_version, self._status
        names, keys = ports
        hashes: list[Any]
        if fields and len(fcols) == len(FIELD_TERMS) and None not in fcols.values():
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
        C.read_counters(PORT_TERMS, keys, hashes, problems, cache)
        pc: dict[str, C.Column] = {
            "port": names,
            "ts": ts_column(list(map(port_ts.get, names))),
            **C.field_columns("port", keys, hashes, problems, cache=cache),
        }
        if status is None or status[0] != appl_version or status[1] != names:
            status = (appl_version, names, *port_status(names, appl))
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
        prio = {k: concat_columns(c) for k, c in chunks.items() if k != "port"}
        if chunks and all(c is names for c in chunks["port"]):  # every priority on every port
            if self._prio_ports[0] is not names:  # the same list while the ports are
                self._prio_ports = (names, names * len(C.PRIORITIES))
            prio["port"] = self._prio_ports[1]
        elif chunks:
            prio["port"] = concat_columns(chunks["port"])
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
            "ts": ts_column(list(map(queue_ts.get, qnames))),
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
