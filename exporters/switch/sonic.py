"""Access to SONiC's databases: COUNTERS_DB / APPL_DB over Redis (pipelined) or from dumps, one
poll of one ASIC (`poll`), and the poll targets from config or from a dump directory.

Read-only: it never writes to a switch. A key of the wrong type answers `WrongType`, never a
guessed value; a switch that does not answer raises `SwitchDown`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from exporters.switch import counters as C
from exporters.switch.config import SwitchSourceConfig
from telemetry.errors import UserError

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


@dataclass
class Target:
    switch: str
    asic: str
    role: str
    db: Any  # a SonicDb (Redis, dump, SONiC gNMI cache) or a gNMI stream with its own poll()


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


def targets_from_config(c: SwitchSourceConfig) -> list[Target]:
    base = (
        db_ids_from_database_config(c.database_config)
        if c.database_config
        else dict(DEFAULT_DB_IDS)
    )
    out = []
    for s in c.switches:
        if s.gnmi is not None or s.snmp is not None:
            continue  # read over gNMI (gnmi.py) or SNMP (snmp.py)
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


__all__ = [
    "DumpSonicDb",
    "RedisSonicDb",
    "SonicDb",
    "SwitchDown",
    "Target",
    "poll",
    "targets_from_config",
    "targets_from_dump",
]
