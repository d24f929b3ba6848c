"""Statements on the embedded ClickHouse engine for the HTTP endpoint: raw bytes in, raw bytes out.

Each call opens its own chdb handle on the engine this process already hosts (handles are cheap,
~1 ms, and run concurrently: chdb releases the GIL), so `SET`, `USE` and readonly never leak from
one request into the next. One long-lived handle keeps the engine up between requests. Never
parses or re-encodes results: the engine writes the requested format itself.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# ClickHouse's trailer on every exception text; chdb leaves it off (and sometimes nests it)
_CODE = re.compile(r"Code: (\d+)\. ")
_NAME = re.compile(r"\(([A-Z][A-Z0-9_]+)\)\s*$")
_SETTING_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class EngineError(Exception):
    """A ClickHouse exception: `code`, `name` and the message without the `Code: N.` prefix."""

    def __init__(self, code: int, message: str, name: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.name = name

    @classmethod
    def from_engine(cls, e: BaseException) -> EngineError:
        text = str(e).strip()
        m = _CODE.search(text)
        code = int(m[1]) if m else 1001
        # chdb nests re-thrown exceptions: "Code: 73. DB::Exception: Code: 73. DB::Exception: X
        # (version ...). (NAME)"; keep the innermost message once
        inner = text.rsplit("DB::Exception: ", 1)[-1]
        inner = inner.split(" (version ", 1)[0].strip()
        n = _NAME.search(inner)
        if n:
            inner = inner[: n.start()].rstrip()
        else:
            n = _NAME.search(text)
        return cls(code, inner, n[1] if n else "")


@dataclass
class Outcome:
    """What one statement returned: the body as the engine wrote it and its statistics."""

    body: bytes | memoryview
    read_rows: int = 0
    read_bytes: int = 0
    written_rows: int = 0
    written_bytes: int = 0
    elapsed_ns: int = 0
    keep: list[Any] = field(default_factory=list, repr=False)  # owners of `body`'s memory

    def summary(self) -> dict[str, str]:
        return {
            "read_rows": str(self.read_rows),
            "read_bytes": str(self.read_bytes),
            "written_rows": str(self.written_rows),
            "written_bytes": str(self.written_bytes),
            "total_rows_to_read": str(self.read_rows),
            "result_rows": "0",
            "result_bytes": str(len(self.body)),
            "elapsed_ns": str(self.elapsed_ns),
        }


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class Engine:
    """The embedded engine at `path` (the directory a `chdb://PATH` DSN names)."""

    def __init__(self, path: str) -> None:
        import chdb

        # the same spelling clickhouse-connect uses: chdb compares engine paths literally
        self.path = os.path.realpath(path)
        self._chdb = chdb
        self._keepalive = chdb.connect(self.path)
        self._lock = threading.Lock()
        row = self._keepalive._conn.query("SELECT version(), timezone()", "TabSeparated")
        self.version, self.timezone = row.bytes().decode().strip().split("\t")

    def close(self) -> None:
        with self._lock:
            if self._keepalive is not None:
                self._keepalive.close()
                self._keepalive = None

    def _session(
        self, database: str | None, settings: Mapping[str, str], readonly: int
    ) -> tuple[Any, Any]:
        conn = self._chdb.connect(self.path)
        raw = conn._conn
        try:
            if database:
                raw.query(f"USE `{database.replace('`', '``')}`", "TabSeparated")
            # readonly first, as ClickHouse does for a readonly user: it then refuses SETs too
            if readonly:
                raw.query(f"SET readonly = {int(readonly)}", "TabSeparated")
            for k, v in settings.items():
                if not _SETTING_NAME.match(k):
                    raise EngineError(115, f"Unknown setting '{k}'", "UNKNOWN_SETTING")
                raw.query(f"SET {k} = {_quote(v)}", "TabSeparated")
        except EngineError:
            conn.close()
            raise
        except Exception as e:
            conn.close()
            raise EngineError.from_engine(e) from None
        return conn, raw

    def query(
        self,
        sql: bytes,
        fmt: str,
        *,
        database: str | None = None,
        settings: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        readonly: int = 0,
    ) -> Outcome:
        """Run one statement; `fmt` is the output format unless the statement names its own."""
        conn, raw = self._session(database, settings or {}, readonly)
        try:
            res = raw.query(sql, fmt, params=dict(params or {}))
            # the engine's own buffer, not a copy: a 1M-row result is tens of MB
            view = res.get_memview() if res.size() else None
            return Outcome(
                view.view() if view is not None else b"",
                read_rows=res.rows_read(),
                read_bytes=res.bytes_read(),
                written_rows=res.rows_written(),
                written_bytes=res.bytes_written(),
                elapsed_ns=int(res.elapsed() * 1e9),
                keep=[res, view],
            )
        except Exception as e:
            raise EngineError.from_engine(e) from None
        finally:
            conn.close()

    def insert(
        self,
        head: str,
        fmt: str,
        data: bytes | memoryview,
        *,
        database: str | None = None,
        settings: Mapping[str, str] | None = None,
        readonly: int = 0,
    ) -> Outcome:
        """`INSERT INTO t (...) [SETTINGS ...]` (no FORMAT) with `data` in format `fmt`."""
        conn, _ = self._session(database, settings or {}, readonly)
        try:
            ins = conn.send_insert(head, fmt)
            try:
                if len(data):
                    ins.append(data)
                done = ins.finish()
            except BaseException:
                with contextlib.suppress(RuntimeError):  # the engine may have dropped it already
                    ins.cancel()
                raise
            return Outcome(
                b"",
                written_rows=int(done.rows_written),
                written_bytes=int(done.bytes_written),
                elapsed_ns=int(done.elapsed * 1e9),
            )
        except EngineError:
            raise
        except Exception as e:
            raise EngineError.from_engine(e) from None
        finally:
            conn.close()
