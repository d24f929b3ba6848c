"""The `railscope switch` source: SONiC switches' COUNTERS_DB (and APPL_DB) over Redis, or dumps.

Reads port/queue/PG counters, RATES, watermarks and PFC watchdog state from COUNTERS_DB, port
speed/oper status and LLDP neighbours from APPL_DB, of many switches (and every ASIC of a
multi-ASIC switch) concurrently, with pipelined reads. It never writes to a switch, never
stores a number it could not read as such (a wrong-type key or bad value is named in a
self-metric and a log line instead), and never derives a negative rate across a reset.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from exporters.switch import counters as C
from exporters.switch import ecmp
from telemetry.errors import NotBuilt, UserError
from telemetry.pipeline import BaseSource, Batch, register_source

log = logging.getLogger(__name__)

DEFAULT_DB_IDS = {"APPL_DB": 0, "COUNTERS_DB": 2}


class SwitchDown(Exception):
    """The switch's Redis did not answer (refused, timed out, closed)."""


class SonicDb(Protocol):
    """Narrow access to one switch ASIC's SONiC databases."""

    def hgetall_many(self, db: str, keys: Sequence[str]) -> list[C.Hash | C.WrongType]: ...

    def keys(self, db: str, prefix: str) -> list[str]: ...

    def close(self) -> None: ...


class RedisSonicDb:
    """The real one: redis-py, one pipeline round trip per batch of keys."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 6379,
        *,
        unix_socket: str | None = None,
        db_ids: dict[str, int] | None = None,
        timeout: float = 2.0,
        password: str | None = None,
    ) -> None:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        self._redis = redis
        self.db_ids = {**DEFAULT_DB_IDS, **(db_ids or {})}
        self._clients: dict[str, Any] = {}
        self._kw: dict[str, Any] = {
            "socket_timeout": timeout,
            "socket_connect_timeout": timeout,
            "password": password,
            "decode_responses": True,
            # no retries inside a poll: a switch that does not answer is down for this poll,
            # and the next poll tries again (retries would multiply the timeout for all)
            "retry": Retry(NoBackoff(), 0),
        }
        if unix_socket:
            self._kw["unix_socket_path"] = unix_socket
        else:
            self._kw.update(host=host, port=port)
        self.where = unix_socket or f"{host}:{port}"

    def _client(self, db: str) -> Any:
        c = self._clients.get(db)
        if c is None:
            c = self._clients[db] = self._redis.Redis(db=self.db_ids[db], **self._kw)
        return c

    def hgetall_many(self, db: str, keys: Sequence[str]) -> list[C.Hash | C.WrongType]:
        if not keys:
            return []
        pipe = self._client(db).pipeline(transaction=False)
        for k in keys:
            pipe.hgetall(k)
        try:
            res = pipe.execute(raise_on_error=False)
        except (self._redis.ConnectionError, self._redis.TimeoutError, OSError) as e:
            raise SwitchDown(f"{self.where}: {e}") from None
        out: list[C.Hash | C.WrongType] = []
        for k, r in zip(keys, res, strict=True):
            if isinstance(r, self._redis.ResponseError):
                if "WRONGTYPE" in str(r):
                    try:
                        actual = str(self._client(db).type(k))
                    except Exception:
                        actual = "not a hash"
                    out.append(C.WrongType(k, actual))
                    continue
                raise SwitchDown(f"{self.where}: {r}")
            out.append(r)
        return out

    def keys(self, db: str, prefix: str) -> list[str]:
        try:
            return sorted(self._client(db).scan_iter(match=prefix + "*", count=1000))
        except (self._redis.ConnectionError, self._redis.TimeoutError, OSError) as e:
            raise SwitchDown(f"{self.where}: {e}") from None

    def close(self) -> None:
        for c in self._clients.values():
            c.close()
        self._clients.clear()


class DumpSonicDb:
    """SONiC dumps: the mock-table layout {key: {field: value}} or sonic-db-dump's
    {key: {"type": "hash", "value": {...}}}, one JSON file per database. Same error semantics
    as Redis: a key that is not a hash answers WrongType."""

    def __init__(self, dbs: dict[str, dict[str, Any]]) -> None:
        self.dbs = dbs

    @classmethod
    def from_files(cls, counters: Path, appl: Path | None = None) -> DumpSonicDb:
        dbs = {"COUNTERS_DB": _load_json(counters)}
        if appl is not None and appl.exists():
            dbs["APPL_DB"] = _load_json(appl)
        return cls(dbs)

    def _get(self, db: str, key: str) -> C.Hash | C.WrongType:
        v = self.dbs.get(db, {}).get(key)
        if v is None:
            return {}
        # sonic-db-dump wraps each key as {type, value, ttl, expireat}; SAI hashes never have
        # fields named "type" and "value" only, so this cannot mistake a counter hash for it.
        if isinstance(v, dict) and "type" in v and "value" in v and len(v) <= 4:
            if v["type"] != "hash":
                return C.WrongType(key, str(v["type"]))
            v = v["value"]
        if not isinstance(v, dict):
            return C.WrongType(key, type(v).__name__)
        return {str(f): str(x) for f, x in v.items()}

    def hgetall_many(self, db: str, keys: Sequence[str]) -> list[C.Hash | C.WrongType]:
        return [self._get(db, k) for k in keys]

    def keys(self, db: str, prefix: str) -> list[str]:
        return sorted(k for k in self.dbs.get(db, {}) if k.startswith(prefix))

    def close(self) -> None:
        pass


def _load_json(p: Path) -> dict[str, Any]:
    try:
        data = json.loads(p.read_text())
    except OSError as e:
        raise UserError(f"{p}: cannot read: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise UserError(f"{p}: not JSON: {e}") from None
    if not isinstance(data, dict):
        raise UserError(f"{p}: expected a JSON object of keys, got {type(data).__name__}")
    return data


def db_ids_from_database_config(path: str | Path) -> dict[str, int]:
    """{db name: id} from SONiC's database_config.json."""
    data = _load_json(Path(path))
    try:
        return {name: int(d["id"]) for name, d in data["DATABASES"].items()}
    except (KeyError, TypeError, ValueError) as e:
        raise UserError(f"{path}: not a SONiC database_config.json ({e})") from None


# --- config -------------------------------------------------------------------------------------
class AsicConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(..., description="ASIC namespace (asic0).")
    address: str = Field(..., description="host:port or unix socket path of this ASIC's redis.")
    counters_db: int | None = Field(default=None, description="COUNTERS_DB id override.")
    appl_db: int | None = Field(default=None, description="APPL_DB id override.")


class SwitchConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    address: str | None = Field(
        default=None, description="host:port or unix socket path of the redis."
    )
    role: str = Field(default="", description="leaf | spine | superspine | dci")
    counters_db: int | None = None
    appl_db: int | None = None
    password: str | None = None
    asics: list[AsicConfig] = Field(default_factory=list, description="multi-ASIC: one per ASIC")


@dataclass
class Target:
    switch: str
    asic: str
    role: str
    db: SonicDb


# --- the source ---------------------------------------------------------------------------------
@register_source(
    "switch",
    help="SONiC switches: port/queue/PG counters, PFC, ECN, watermarks, ECMP spread, LLDP",
    kinds=[
        "switch_port_sample",
        "switch_queue_sample",
        "switch_status",
        "ecmp_group_sample",
        "lldp_link",
    ],
)
class SwitchSource(BaseSource):
    """Polls SONiC switches' COUNTERS_DB (Redis db 2 per database_config.json) and APPL_DB:
    port counters and RATES, per-queue packets/bytes/drops/ECN marks/watermarks, PG
    watermarks, PFC frames and pause time, PFC watchdog; LLDP neighbours; ECMP uplink spread.
    --from takes a COUNTERS_DB JSON dump (sonic-db-dump or mock-table layout) or a directory
    of them (SWITCH/counters_db.json, SWITCH/ASIC/counters_db.json, + appl_db.json)."""

    name = "switch"

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")
        switches: list[SwitchConfig] = Field(default_factory=list)
        database_config: str | None = Field(
            default=None, description="SONiC database_config.json for db ids"
        )
        timeout_seconds: float = Field(default=2.0, gt=0, description="per-switch Redis timeout")
        workers: int = Field(default=32, ge=1, le=512, description="switches polled at once")
        ecmp_groups: dict[str, dict[str, list[str]]] = Field(
            default_factory=dict, description="switch -> group -> member ports"
        )
        uplink_neighbor: str | None = Field(
            default=None,
            description="regex on LLDP neighbour names: matching ports form group 'uplinks'",
        )
        lldp: bool = Field(default=True, description="read LLDP_ENTRY_TABLE from APPL_DB")

    def __init__(
        self,
        targets: list[Target],
        config: SwitchSource.Config | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.cfg = config or SwitchSource.Config()
        self.clock = clock
        self.targets = targets
        self._prev: dict[tuple[str, str, str], tuple[float, int | None, int | None]] = {}
        self._logged: set[str] = set()
        self._down: set[tuple[str, str]] = set()
        self.resets = 0

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def add_arguments(cls, p: Any) -> None:
        p.add_argument("--switch", action="append", default=[], metavar="NAME=ADDRESS",
                       help="a switch's redis (host:port or unix socket); repeatable; adds to config")  # fmt: skip
        p.add_argument("--database-config", metavar="PATH", help="SONiC database_config.json")
        p.add_argument(
            "--name", help="switch name for a single --from dump file (default: file stem)"
        )
        p.add_argument(
            "--gnmi", action="store_true", help="gNMI/OpenConfig counters (not built yet)"
        )

    @classmethod
    def from_args(cls, args: Any, cfg: Any) -> SwitchSource:
        if getattr(args, "gnmi", False):
            raise NotBuilt("switch --gnmi: the gNMI (OpenConfig) switch source is not built yet")
        c: SwitchSource.Config = cfg.source("switch")
        if getattr(args, "database_config", None):
            c = c.model_copy(update={"database_config": args.database_config})
        if args.from_path:
            targets = targets_from_dump(Path(args.from_path), getattr(args, "name", None))
            roles = {s.name: s.role for s in c.switches}  # a replayed switch keeps its role
            for t in targets:
                t.role = roles.get(t.switch, t.role)
            return cls(targets, c)
        extra = []
        for spec in getattr(args, "switch", []) or []:
            name, sep, addr = spec.partition("=")
            if not sep or not name or not addr:
                raise UserError(
                    f"--switch {spec!r}: expected NAME=HOST:PORT or NAME=/path/redis.sock"
                )
            extra.append(SwitchConfig(name=name, address=addr))
        c = c.model_copy(update={"switches": [*c.switches, *extra]})
        if not c.switches:
            raise UserError(
                "switch: no switches: give --switch NAME=HOST:PORT or sources.switch.switches"
            )
        return cls(targets_from_config(c), c)

    # -- polling ---------------------------------------------------------------------------
    def _collect(self) -> list[Batch]:
        ts = int(self.clock() * 1000)
        workers = max(1, min(self.cfg.workers, len(self.targets)))
        with ThreadPoolExecutor(workers, thread_name_prefix="railscope-switch") as pool:
            results = list(pool.map(self._poll_one, self.targets))
        ports: list[dict[str, Any]] = []
        queues: list[dict[str, Any]] = []
        status: list[dict[str, Any]] = []
        lldp: list[dict[str, Any]] = []
        for t, (st, p, q, ll, problems) in zip(self.targets, results, strict=True):
            st.update(ts=ts, switch=t.switch, asic=t.asic)
            status.append(st)
            self._report(t, problems)
            for r in p:
                r.update(ts=ts, switch=t.switch, asic=t.asic, role=t.role)
                r.pop("oid", None)
                self._rates(r, ts)
                ports.append(r)
            for r in q:
                r.update(ts=ts, switch=t.switch, asic=t.asic)
                r.pop("oid", None)
                queues.append(r)
            for r in ll:
                r.update(ts=ts, local_device=t.switch)
                lldp.append(r)
        self.stats.received += len(ports) + len(queues) + len(lldp)
        up = sum(1 for s in status if s["up"])
        self.stats.extra["switches_up"] = float(up)
        self.stats.extra["switches_down"] = float(len(status) - up)
        groups = self._ecmp_rows(ports, lldp, ts)
        out = [Batch.from_rows("switch_status", status)]
        for kind, rows in (
            ("switch_port_sample", ports),
            ("switch_queue_sample", queues),
            ("lldp_link", lldp),
            ("ecmp_group_sample", groups),
        ):
            if rows:
                out.append(Batch.from_rows(kind, rows))
        return out

    def _poll_one(
        self, t: Target
    ) -> tuple[dict[str, Any], list[Any], list[Any], list[Any], C.Problems]:
        problems = C.Problems()
        t0 = time.perf_counter()
        try:
            p, q, ll = poll(t.db, problems, lldp=self.cfg.lldp)
        except SwitchDown as e:
            self.stats.error("switch_down")
            if (t.switch, t.asic) not in self._down:  # one line when it goes down, not every poll
                self._down.add((t.switch, t.asic))
                log.warning("switch %s%s: down: %s", t.switch, f"/{t.asic}" if t.asic else "", e)
            return (
                {"up": 0, "poll_duration_seconds": time.perf_counter() - t0, "error": str(e)},
                [], [], [], problems,
            )  # fmt: skip
        except Exception as e:  # one switch's surprise must not stop the others' poll
            self.stats.error(f"poll_failed {type(e).__name__}")
            log.exception("switch %s: poll failed", t.switch)
            return (
                {"up": 0, "poll_duration_seconds": time.perf_counter() - t0, "error": f"{type(e).__name__}: {e}"},
                [], [], [], problems,
            )  # fmt: skip
        if (t.switch, t.asic) in self._down:
            self._down.discard((t.switch, t.asic))
            log.warning("switch %s%s: answering again", t.switch, f"/{t.asic}" if t.asic else "")
        st = {
            "up": 1,
            "poll_duration_seconds": time.perf_counter() - t0,
            "ports": len(p),
            "queues": len(q),
            "error": "",
        }
        return st, p, q, ll, problems

    def _report(self, t: Target, problems: C.Problems) -> None:
        who = t.switch + (f"/{t.asic}" if t.asic else "")
        for reason, items in problems.items.items():
            if reason == "wrong_type":
                for what in items:  # name the key in the self-metric: there are few of them
                    self.stats.error(f"wrong_type {who} {what}")
            else:
                self.stats.error(reason, len(items))
            sig = f"{who} {reason} {items[0]}"
            if sig not in self._logged:  # a broken key is logged once, not every poll
                self._logged.add(sig)
                log.warning("switch %s: %s: %s%s", who, reason, ", ".join(items[:5]),
                            f" (+{len(items) - 5} more)" if len(items) > 5 else "")  # fmt: skip

    def _rates(self, r: dict[str, Any], ts: int) -> None:
        """Derive rates from the previous poll when RATES:* is absent; a counter that went
        backwards (reset/wrap) gives no rate for this interval, never a negative one."""
        key = (r["switch"], r["asic"], r["port"])
        rx, tx = r.get("rx_bytes_total"), r.get("tx_bytes_total")
        prev = self._prev.get(key)
        self._prev[key] = (ts / 1000, rx, tx)
        for fld, cur, i in (("rx_bytes_per_second", rx, 1), ("tx_bytes_per_second", tx, 2)):
            if r.get(fld) is not None or prev is None or cur is None:
                continue
            old, dt = prev[i], ts / 1000 - prev[0]
            if old is None or dt <= 0:
                continue
            if cur < old:
                self.resets += 1
                self.stats.extra["counter_resets"] = float(self.resets)
                continue
            r[fld] = (cur - old) / dt
        speed, txr = r.get("speed_bps"), r.get("tx_bytes_per_second")
        r["tx_utilization_ratio"] = txr * 8 / speed if speed and txr is not None else None

    def _ecmp_rows(
        self, ports: list[dict[str, Any]], lldp: list[dict[str, Any]], ts: int
    ) -> list[dict[str, Any]]:
        groups = dict(self.cfg.ecmp_groups)
        if self.cfg.uplink_neighbor:
            groups = ecmp.merge_groups(
                groups, ecmp.groups_from_lldp(lldp, self.cfg.uplink_neighbor)
            )
        if not groups:
            return []
        rates: dict[str, dict[str, float | None]] = {}
        speeds: dict[str, dict[str, float | None]] = {}
        for r in ports:
            rates.setdefault(r["switch"], {})[r["port"]] = r.get("tx_bytes_per_second")
            speeds.setdefault(r["switch"], {})[r["port"]] = r.get("speed_bps")
        out = []
        for sw, gs in groups.items():
            for g, members in gs.items():
                s = ecmp.spread(rates.get(sw, {}), speeds.get(sw, {}), members)
                if s is not None:
                    out.append({"ts": ts, "switch": sw, "group": g, **s})
        return out

    def close(self) -> None:
        for t in self.targets:
            t.db.close()


def poll(
    db: SonicDb, problems: C.Problems, *, lldp: bool = True
) -> tuple[list[Any], list[Any], list[Any]]:
    """One poll of one ASIC: two pipelined round trips to COUNTERS_DB (maps, then counters)
    and one or two to APPL_DB. Returns (port rows, queue rows, lldp rows)."""
    raw_maps = db.hgetall_many("COUNTERS_DB", list(C.MAPS))
    maps = {k: C.as_hash(k, v, problems) for k, v in zip(C.MAPS, raw_maps, strict=True)}
    port_oids = list(maps[C.PORT_NAME_MAP].values())
    q_oids = list(maps[C.QUEUE_NAME_MAP].values()) + list(maps[C.PG_NAME_MAP].values())
    keys = [f"COUNTERS:{o}" for o in port_oids] + [f"RATES:{o}" for o in port_oids]
    keys += [f"COUNTERS:{o}" for o in q_oids] + [f"USER_WATERMARKS:{o}" for o in q_oids]
    hashes = {
        k: C.as_hash(k, v, problems)
        for k, v in zip(keys, db.hgetall_many("COUNTERS_DB", keys), strict=True)
    }
    names = list(maps[C.PORT_NAME_MAP])
    akeys = [f"PORT_TABLE:{n}" for n in names]
    lkeys = db.keys("APPL_DB", "LLDP_ENTRY_TABLE:") if lldp else []
    avals = db.hgetall_many("APPL_DB", akeys + lkeys)
    appl = {k: C.as_hash(k, v, problems) for k, v in zip(akeys + lkeys, avals, strict=True)}
    return (
        C.port_rows(maps, hashes, appl, problems),
        C.queue_rows(maps, hashes, problems),
        C.lldp_rows(appl),
    )


def _db_for(
    address: str, ids: dict[str, int], timeout: float, password: str | None
) -> RedisSonicDb:
    if address.startswith("/"):
        return RedisSonicDb(unix_socket=address, db_ids=ids, timeout=timeout, password=password)
    host, sep, port = address.rpartition(":")
    if not sep:
        host, port = address, "6379"
    try:
        port_n = int(port)
    except ValueError:
        raise UserError(
            f"switch address {address!r}: expected HOST:PORT or a socket path"
        ) from None
    return RedisSonicDb(
        host.strip("[]") or "127.0.0.1", port_n, db_ids=ids, timeout=timeout, password=password
    )


def targets_from_config(c: SwitchSource.Config) -> list[Target]:
    base = (
        db_ids_from_database_config(c.database_config)
        if c.database_config
        else dict(DEFAULT_DB_IDS)
    )
    out = []
    for s in c.switches:
        entries: list[tuple[str, str | None, int | None, int | None]] = [
            (a.name, a.address, a.counters_db, a.appl_db) for a in s.asics
        ] or [("", s.address, s.counters_db, s.appl_db)]
        for asic, addr, cdb, adb in entries:
            if not addr:
                raise UserError(f"sources.switch.switches[{s.name}]: no address")
            ids = dict(base)
            if (cdb if cdb is not None else s.counters_db) is not None:
                ids["COUNTERS_DB"] = cdb if cdb is not None else s.counters_db  # type: ignore[assignment]
            if (adb if adb is not None else s.appl_db) is not None:
                ids["APPL_DB"] = adb if adb is not None else s.appl_db  # type: ignore[assignment]
            out.append(
                Target(s.name, asic, s.role, _db_for(addr, ids, c.timeout_seconds, s.password))
            )
    return out


def targets_from_dump(path: Path, name: str | None = None) -> list[Target]:
    """A dump file, or a directory: DIR/counters_db.json, DIR/SW/counters_db.json,
    DIR/SW/ASIC/counters_db.json (each with an optional appl_db.json beside it)."""
    if not path.exists():
        raise UserError(f"{path}: no such file or directory")
    if path.is_file():
        return [
            Target(
                name or path.stem,
                "",
                "",
                DumpSonicDb.from_files(path, path.with_name("appl_db.json")),
            )
        ]
    found = sorted(path.glob("counters_db.json")) + sorted(path.glob("*/counters_db.json"))
    found += sorted(path.glob("*/*/counters_db.json"))
    if not found:
        raise UserError(
            f"{path}: no counters_db.json in it (or in SWITCH/ or SWITCH/ASIC/ below it)"
        )
    out = []
    for f in found:
        rel = f.parent.relative_to(path).parts
        sw = rel[0] if rel else (name or path.resolve().name)
        asic = rel[1] if len(rel) > 1 else ""
        out.append(Target(sw, asic, "", DumpSonicDb.from_files(f, f.with_name("appl_db.json"))))
    return out


__all__ = ["DumpSonicDb", "RedisSonicDb", "SonicDb", "SwitchDown", "SwitchSource", "poll"]
