"""ClickHouse's HTTP interface over the embedded engine: what a ClickHouse server speaks on :8123.

Reads a statement (URL `query`, body, or both for `INSERT ... FORMAT X` + data), authenticates it
against the `serve.users`, runs it in the embedded engine and returns the engine's bytes with
ClickHouse's headers and error form. A pass-through: it never parses SQL beyond finding where an
INSERT's data starts and which FORMAT the answer is in, and never runs a statement itself.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import re
import socket
import threading
import uuid
import zlib
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aiohttp import BodyPartReader, web

from telemetry.pipeline import ComponentStats
from telemetry.serve.config import ServeConfig, ServeUser
from telemetry.serve.engine import Engine, EngineError, Outcome

log = logging.getLogger(__name__)

# URL parameters that shape the HTTP exchange, not the query: consumed here or ignored, never SET.
# Sessions are not kept (every request is its own session), so session_* are accepted and ignored.
TRANSPORT_PARAMS = frozenset(
    {
        "query",
        "database",
        "default_format",
        "user",
        "password",
        "query_id",
        "session_id",
        "session_timeout",
        "session_check",
        "quota_key",
        "buffer_size",
        "wait_end_of_query",
        "client_protocol_version",
        "role",
        "send_progress_in_http_headers",
        "http_headers_progress_interval_ms",
        "enable_http_compression",
        "http_zlib_compression_level",
        "http_native_compression_disable_checksumming_on_decompress",
        "add_http_cors_header",
        "compress",
        "decompress",
        "extremes",  # the engine's own default; clients send it as 0
    }
)

# INSERT INTO ... FORMAT X, then the data; not VALUES/SELECT (a 'FORMAT' inside a literal there)
_INSERT = re.compile(
    rb"^\s*INSERT\s+INTO\s+((?:(?!\bVALUES\b|\bSELECT\b).)*?)\bFORMAT\s+([A-Za-z0-9_]+)",
    re.I | re.S,
)
# statements with a result set: ClickHouse names their format in X-ClickHouse-Format (clients
# tell "empty result" from "no result" by it), after leading comments and parentheses
_COMMENTS = re.compile(rb"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/|\()*", re.S)
_RESULT_SET = re.compile(rb"(?:SELECT|WITH|SHOW|DESC|DESCRIBE|EXISTS|EXPLAIN|CHECK)\b", re.I)
_FORMAT_TAIL = re.compile(
    rb"\bFORMAT\s+([A-Za-z0-9_]+)\s*(?:SETTINGS\s[^;]*)?;?\s*$",
    re.I,
)

# ClickHouse's exceptionCodeToHTTPStatus (src/Server/HTTP/exceptionCodeToHTTPStatus.cpp), by name
_STATUS_BY_NAME = {
    **dict.fromkeys(("REQUIRED_PASSWORD",), 401),
    **dict.fromkeys(
        (
            "UNKNOWN_USER",
            "WRONG_PASSWORD",
            "AUTHENTICATION_FAILED",
            "SET_NON_GRANTED_ROLE",
            "ACCESS_DENIED",
        ),
        403,
    ),
    **dict.fromkeys(
        (
            "BAD_ARGUMENTS",
            "CANNOT_COMPILE_REGEXP",
            "CANNOT_PARSE_TEXT",
            "CANNOT_PARSE_ESCAPE_SEQUENCE",
            "CANNOT_PARSE_QUOTED_STRING",
            "CANNOT_PARSE_DATE",
            "CANNOT_PARSE_DATETIME",
            "CANNOT_PARSE_NUMBER",
            "CANNOT_PARSE_DOMAIN_VALUE_FROM_STRING",
            "CANNOT_PARSE_IPV4",
            "CANNOT_PARSE_IPV6",
            "CANNOT_PARSE_INPUT_ASSERTION_FAILED",
            "CANNOT_PARSE_UUID",
            "DUPLICATE_COLUMN",
            "ILLEGAL_COLUMN",
            "UNKNOWN_ELEMENT_IN_AST",
            "UNKNOWN_TYPE_OF_AST_NODE",
            "THERE_IS_NO_COLUMN",
            "TOO_DEEP_AST",
            "TOO_BIG_AST",
            "UNEXPECTED_AST_STRUCTURE",
            "SYNTAX_ERROR",
            "INCORRECT_DATA",
            "TYPE_MISMATCH",
            "VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE",
        ),
        400,
    ),
    **dict.fromkeys(
        (
            "UNKNOWN_TABLE",
            "UNKNOWN_FUNCTION",
            "UNKNOWN_IDENTIFIER",
            "UNKNOWN_TYPE",
            "UNKNOWN_STORAGE",
            "UNKNOWN_DATABASE",
            "UNKNOWN_SETTING",
            "UNKNOWN_DIRECTION_OF_SORTING",
            "UNKNOWN_AGGREGATE_FUNCTION",
            "UNKNOWN_FORMAT",
            "UNKNOWN_DATABASE_ENGINE",
            "UNKNOWN_TYPE_OF_QUERY",
            "UNKNOWN_ROLE",
        ),
        404,
    ),
    "QUERY_IS_TOO_LARGE": 413,
    "NOT_IMPLEMENTED": 501,
    "SOCKET_TIMEOUT": 503,
    "CANNOT_OPEN_FILE": 503,
    "CANNOT_SCHEDULE_TASK": 503,
    "HTTP_LENGTH_REQUIRED": 411,
    "TIMEOUT_EXCEEDED": 408,
    "UNSUPPORTED_MEDIA_TYPE": 415,
}


def http_status(e: EngineError) -> int:
    """The HTTP status a ClickHouse server answers this exception with; 500 for the rest."""
    return _STATUS_BY_NAME.get(e.name, 500)


def content_type(fmt: str) -> str:
    f = fmt.lower()
    if f.startswith("json") and ("eachrow" in f or "lines" in f or f == "jsonl"):
        return "application/x-ndjson; charset=UTF-8"
    if f.startswith("json"):
        return "application/json; charset=UTF-8"
    if f.startswith(("tabseparated", "tsv")):
        return "text/tab-separated-values; charset=UTF-8"
    if f.startswith("csv"):
        return "text/csv; charset=UTF-8; header=" + ("present" if "withnames" in f else "absent")
    if f.startswith(("pretty", "vertical", "markdown", "values", "xml", "template", "raw")):
        return "text/plain; charset=UTF-8"
    return "application/octet-stream"


# -- compression --------------------------------------------------------------------------------
def _zstd() -> Any:
    try:
        from backports import zstd  # type: ignore[import-not-found]
    except ImportError:
        from compression import zstd  # type: ignore[import-not-found,no-redef]
    return zstd


def _compressors() -> dict[str, Callable[[bytes | memoryview], bytes]]:
    out: dict[str, Callable[[bytes | memoryview], bytes]] = {
        "gzip": lambda b: _gzip(b),
        "deflate": lambda b: zlib.compress(b, 3),
    }
    try:
        import lz4.frame

        out["lz4"] = lambda b: lz4.frame.compress(b)
    except ImportError:
        pass
    try:
        z = _zstd()
        out["zstd"] = lambda b: z.compress(b)
    except ImportError:
        pass
    try:
        import brotli  # type: ignore[import-not-found]

        out["br"] = lambda b: brotli.compress(b, quality=3)
    except ImportError:
        pass
    return out


def _gzip(b: bytes | memoryview) -> bytes:
    c = zlib.compressobj(3, zlib.DEFLATED, 31)
    return c.compress(b) + c.flush()


def _frames(new: Callable[[], Any], data: bytes, limit: int) -> bytes:
    """Decompress concatenated lz4/zstd frames (clickhouse-connect compresses each insert block as
    its own frame), stopping just past `limit` bytes of output."""
    out = bytearray()
    while data and len(out) <= limit:
        d = new()
        out += d.decompress(data, max_length=limit + 1 - len(out))
        while not d.eof and not d.needs_input and len(out) <= limit:
            out += d.decompress(b"", max_length=limit + 1 - len(out))
        if len(out) <= limit and not d.eof:
            raise ValueError("truncated stream")
        data = d.unused_data
    return bytes(out)


def _zlib(wbits: int, data: bytes, limit: int) -> bytes:
    """The same for gzip members / zlib streams (max_length must stay >= 1: 0 means unlimited)."""
    out = bytearray()
    while data and len(out) <= limit:
        d = zlib.decompressobj(wbits)
        out += d.decompress(data, limit + 1 - len(out))
        while d.unconsumed_tail and len(out) <= limit:
            out += d.decompress(d.unconsumed_tail, limit + 1 - len(out))
        if len(out) <= limit and not d.eof:
            raise ValueError("truncated stream")
        data = d.unused_data
    return bytes(out)


def _decompressor(encoding: str) -> Callable[[bytes, int], bytes]:
    """decompress(data, limit) for one Content-Encoding; the limit stops a zip bomb early."""
    if encoding in ("gzip", "x-gzip"):
        return lambda b, n: _zlib(47, b, n)
    if encoding == "deflate":
        return lambda b, n: _zlib(15, b, n)
    if encoding == "lz4":
        import lz4.frame

        return lambda b, n: _frames(lz4.frame.LZ4FrameDecompressor, b, n)
    if encoding == "zstd":
        z = _zstd()
        return lambda b, n: _frames(z.ZstdDecompressor, b, n)
    if encoding == "br":
        try:
            import brotli
        except ImportError:
            raise EngineError(
                48, "Content-Encoding br is not supported (install brotli)", "NOT_IMPLEMENTED"
            ) from None
        return lambda b, n: brotli.decompress(b)
    raise EngineError(48, f"Unknown HTTP Content-Encoding: {encoding}", "NOT_IMPLEMENTED")


# -- the server ---------------------------------------------------------------------------------
class QueryServer:
    """The endpoint. `start()` serves from a background thread; `stop()` ends it."""

    def __init__(
        self,
        engine: Engine,
        config: ServeConfig | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 8123,
        ssl_context: Any = None,
    ) -> None:
        """`ssl_context`: serve HTTPS with it (the ingest gateway's); None: plain HTTP."""
        self.engine = engine
        self.ssl_context = ssl_context
        self.config = config or ServeConfig()
        self.host, self.port = host, port
        self.display_name = socket.gethostname()
        self._pool = ThreadPoolExecutor(self.config.threads, thread_name_prefix="railscope-query")
        self._compress = _compressors()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        # on /metrics as component="serve:query": requests received, answered, failed (by name)
        self.stats = ComponentStats("serve:query")

    # -- lifecycle ---------------------------------------------------------------------------
    def app(self) -> web.Application:
        # bodies are read with our own limit and a ClickHouse-style error; aiohttp's own limit
        # (multipart forms) sits just above it
        app = web.Application(client_max_size=self.config.max_request_bytes + (1 << 16))
        app.router.add_route("*", "/ping", self._ping)
        app.router.add_route("*", "/replicas_status", self._ping)
        app.router.add_route("*", "/", self._query)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        return app

    def start(self) -> tuple[str, int]:
        """Bind and serve from a thread. Returns the bound (host, port)."""
        self._thread = threading.Thread(target=self._run, name="railscope-query-http", daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._error:
            raise self._error
        return self.host, self.port

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)

        async def main() -> None:
            # request bodies are decompressed here (lz4 included, with the size limit), not by aiohttp
            self._runner = web.AppRunner(
                self.app(),
                access_log=None,
                handle_signals=False,
                auto_decompress=False,
                # ClickHouse's http_max_uri_size / http_max_field_value_size: clients put query
                # parameters in the URL (clickhouse-connect's param_* go far past aiohttp's 8 KiB)
                max_line_size=1 << 20,
                max_field_size=128 << 10,
            )
            await self._runner.setup()
            site = web.TCPSite(
                self._runner,
                self.host,
                self.port,
                reuse_address=True,
                ssl_context=self.ssl_context,
            )
            await site.start()
            sock = site._server.sockets[0]  # type: ignore[union-attr]
            self.host, self.port = sock.getsockname()[:2]

        try:
            loop.run_until_complete(main())
        except BaseException as e:
            self._error = OSError(f"cannot serve ClickHouse HTTP on {self.host}:{self.port}: {e}")
            self._ready.set()
            return
        self._ready.set()
        loop.run_forever()
        loop.close()

    def stop(self) -> None:
        loop = self._loop
        if loop is not None and loop.is_running():

            async def shutdown() -> None:
                if self._runner:
                    await self._runner.cleanup()

            try:
                asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
            finally:
                loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._pool.shutdown(wait=True, cancel_futures=True)

    # -- handlers ----------------------------------------------------------------------------
    def _headers(self, query_id: str) -> dict[str, str]:
        return {
            "X-ClickHouse-Server-Display-Name": self.display_name,
            "X-ClickHouse-Query-Id": query_id,
            "X-ClickHouse-Timezone": self.engine.timezone,
        }

    async def _ping(self, request: web.Request) -> web.Response:
        return web.Response(text="Ok.\n", content_type="text/html")

    async def _not_found(self, request: web.Request) -> web.Response:
        return web.Response(
            status=404,
            text=f"There is no handle {request.path}\n\nUse / or /ping for health checks.\n",
            content_type="text/plain",
        )

    def _error_response(self, e: EngineError, query_id: str) -> web.Response:
        self.stats.error(e.name or str(e.code))
        self.stats.last_success = False
        name = f" ({e.name})" if e.name else ""
        text = f"Code: {e.code}. DB::Exception: {e.message}{name} (version {self.engine.version})\n"
        headers = self._headers(query_id)
        headers["X-ClickHouse-Exception-Code"] = str(e.code)
        return web.Response(
            status=http_status(e),
            text=text,
            content_type="text/plain",
            charset="UTF-8",
            headers=headers,
        )

    def _user(self, request: web.Request) -> ServeUser:
        q = request.query
        name, password = "default", ""
        auth = request.headers.get("Authorization", "")
        if auth.lower().startswith("basic "):
            try:
                name, _, password = base64.b64decode(auth[6:].strip()).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                raise EngineError(
                    516, "Cannot decode the Basic authorization header", "AUTHENTICATION_FAILED"
                ) from None
        elif "X-ClickHouse-User" in request.headers:
            name = request.headers["X-ClickHouse-User"]
            password = request.headers.get("X-ClickHouse-Key", "")
        elif "user" in q:
            name, password = q["user"], q.get("password", "")
        user = self.config.authenticate(name or "default", password)
        if user is None:
            raise EngineError(
                516,
                f"{name}: Authentication failed: password is incorrect, or there is no user with such name.",
                "AUTHENTICATION_FAILED",
            )
        return user

    async def _body(self, request: web.Request) -> bytes:
        limit = self.config.max_request_bytes
        too_big = EngineError(
            229,
            f"Request body is larger than serve.max_request_bytes ({limit} bytes)",
            "QUERY_IS_TOO_LARGE",
        )
        if request.content_length is not None and request.content_length > limit:
            raise too_big
        parts, size = [], 0
        async for chunk in request.content.iter_any():
            size += len(chunk)
            if size > limit:
                raise too_big
            parts.append(chunk)
        data = b"".join(parts)
        encoding = request.headers.get("Content-Encoding", "").strip().lower()
        if data and encoding and encoding != "identity":
            decompress = _decompressor(encoding)
            try:
                data = await asyncio.get_running_loop().run_in_executor(
                    self._pool, decompress, data, limit
                )
            except EngineError:
                raise
            except Exception as e:
                raise EngineError(
                    271, f"Cannot decompress the {encoding} request body: {e}", "CANNOT_DECOMPRESS"
                ) from None
            if len(data) > limit:
                raise too_big
        return data

    async def _form(self, request: web.Request) -> dict[str, str]:
        """A multipart form (clickhouse-connect sends long queries and parameters this way)."""
        limit, size, out = self.config.max_request_bytes, 0, {}
        reader = await request.multipart()
        async for part in reader:
            if not isinstance(part, BodyPartReader) or not part.name:
                continue
            if part.filename is not None:
                raise EngineError(
                    48,
                    "External data (query files) is not supported by railscope serve",
                    "NOT_IMPLEMENTED",
                )
            value = await part.read(decode=True)
            size += len(value)
            if size > limit:
                raise EngineError(
                    229,
                    f"Request body is larger than serve.max_request_bytes ({limit} bytes)",
                    "QUERY_IS_TOO_LARGE",
                )
            out[part.name] = value.decode()
        return out

    async def _query(self, request: web.Request) -> web.StreamResponse:
        q = request.query
        query_id = q.get("query_id") or str(uuid.uuid4())
        with self.stats.lock:
            self.stats.received += 1
        try:
            user = self._user(request)
            if q.get("compress") == "1" or q.get("decompress") == "1":
                raise EngineError(
                    48,
                    "ClickHouse-native HTTP compression (compress=1/decompress=1) is not supported "
                    "by railscope serve; use Content-Encoding/Accept-Encoding (gzip, deflate, lz4, zstd)",
                    "NOT_IMPLEMENTED",
                )
            form: dict[str, str] = {}
            try:
                if request.content_type == "multipart/form-data":
                    form = await self._form(request)
                    body = b""
                elif request.method not in ("GET", "HEAD"):
                    body = await self._body(request)
                else:
                    body = b""
            except ConnectionResetError:  # gone mid-request (body or form): nothing to run
                raise EngineError(
                    210,
                    "the client closed the connection before the end of the request",
                    "NETWORK_ERROR",
                ) from None
            text = form.pop("query", q.get("query", "")).encode()
            if not text and not body:
                if request.method in ("GET", "HEAD"):
                    return web.Response(text="Ok.\n", content_type="text/html")
                raise EngineError(62, "Empty query", "SYNTAX_ERROR")
            database = q.get("database") or request.headers.get("X-ClickHouse-Database") or None
            fmt = (
                q.get("default_format")
                or request.headers.get("X-ClickHouse-Format")
                or "TabSeparated"
            )
            settings = {
                k: v
                for k, v in q.items()
                if k not in TRANSPORT_PARAMS and not k.startswith("param_")
            }
            params = {k[6:]: v for k, v in (*q.items(), *form.items()) if k.startswith("param_")}
            # the user's readonly level (ClickHouse's setting); a GET is read-only for everyone (2)
            readonly = user.readonly or (2 if request.method in ("GET", "HEAD") else 0)
            run, out_fmt = self._plan(text, body, fmt, database, settings, params, readonly)
            outcome = await asyncio.get_running_loop().run_in_executor(self._pool, run)
        except EngineError as e:
            return self._error_response(e, query_id)
        return await self._respond(request, outcome, out_fmt, query_id)

    def _plan(
        self,
        text: bytes,
        body: bytes,
        fmt: str,
        database: str | None,
        settings: Mapping[str, str],
        params: Mapping[str, str],
        readonly: int,
    ) -> tuple[Callable[[], Outcome], str]:
        """What to run: an INSERT whose data follows `FORMAT X`, or one statement."""
        data: bytes | memoryview
        m = _INSERT.match(text)
        if m and text[m.end() :].strip() == b"":
            head, ifmt, data = text[: m.start(2)], m[2].decode(), body
        else:
            sql = text + b"\n" + body if text and body else (text or body)
            m = _INSERT.match(sql[:65536])
            if m:
                start = m.end()
                while start < len(sql) and sql[start : start + 1] in (b" ", b"\t", b"\r"):
                    start += 1
                if sql[start : start + 1] == b"\n":
                    start += 1
                head, ifmt, data = sql[: m.start(2)], m[2].decode(), memoryview(sql)[start:]
            else:
                tail = _FORMAT_TAIL.search(sql[-4096:])
                lead = sql[:65536][_COMMENTS.match(sql[:65536]).end() :]  # type: ignore[union-attr]
                out_fmt = (tail[1].decode() if tail else fmt) if _RESULT_SET.match(lead) else ""
                return (
                    lambda: self.engine.query(
                        sql,
                        fmt,
                        database=database,
                        settings=settings,
                        params=params,
                        readonly=readonly,
                    ),
                    out_fmt,
                )
        # head ends with "FORMAT "; the engine's streaming insert takes the statement without it
        stmt = head.rstrip()[: -len(b"FORMAT")].rstrip().decode()
        return (
            lambda: self.engine.insert(
                stmt, ifmt, data, database=database, settings=settings, readonly=readonly
            ),
            "",
        )

    async def _respond(
        self, request: web.Request, outcome: Outcome, fmt: str, query_id: str
    ) -> web.StreamResponse:
        headers = self._headers(query_id)
        headers["X-ClickHouse-Summary"] = json.dumps(outcome.summary(), separators=(",", ":"))
        if fmt:
            headers["X-ClickHouse-Format"] = fmt
        body: bytes | memoryview = outcome.body
        if len(body) and request.query.get("enable_http_compression") == "1":
            for enc in request.headers.get("Accept-Encoding", "").split(","):
                enc = enc.split(";", 1)[0].strip().lower()
                if enc in self._compress:
                    body = await asyncio.get_running_loop().run_in_executor(
                        self._pool, self._compress[enc], body
                    )
                    headers["Content-Encoding"] = enc
                    break
        headers["Content-Type"] = content_type(fmt) if fmt else "text/plain; charset=UTF-8"
        resp = web.StreamResponse(status=200, headers=headers)
        resp.content_length = len(body)
        try:
            await resp.prepare(request)
            await resp.write(body)
            await resp.write_eof()
        except ConnectionResetError:
            # The statement ran (an INSERT is in the store) but the client closed the connection
            # before the answer: it will see a network error and retry; nothing here to undo.
            log.warning(
                "serve: the client closed the connection before the answer to query %s "
                "(%s, %d bytes) was sent; the statement itself ran",
                query_id,
                request.remote,
                len(body),
            )
            self.stats.error("client_closed")
            return resp
        with self.stats.lock:
            self.stats.sent += 1
        self.stats.last_success = True
        self.stats.last_duration_seconds = outcome.elapsed_ns / 1e9
        return resp
