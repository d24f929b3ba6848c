"""ClickHouse's HTTP interface over the embedded engine: what a ClickHouse server speaks on :8123.

Reads a request (URL `query`, body, or both for `INSERT ... FORMAT X` + data), refuses what a web
page made a browser send (browser.py), authenticates it against `serve.users` (failed logins
throttled per peer), has the guard judge the statement (the engine parses it; guard.py, policy.py)
and runs the canonical statement in the embedded engine under the user's limits, returning the
engine's bytes with ClickHouse's headers and error form. A query whose client goes away is
cancelled. Never runs a statement the guard did not plan, never logs a request's credentials or
body, and never answers a client's error with a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import ssl
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

from aiohttp import web

from telemetry.contracts import ComponentStats
from telemetry.errors import EngineError
from telemetry.serve import guard, running
from telemetry.serve.backend import Backend
from telemetry.serve.browser import Browsers, cors_headers
from telemetry.serve.compression import compressors
from telemetry.serve.config import ServeConfig
from telemetry.serve.engine import GUARD_MAX_QUERY_BYTES, Outcome
from telemetry.serve.limits import (
    ACCEPT_BURST,
    HEAD_DEADLINE,
    BodyBudget,
    Connections,
    FairSlots,
    Gate,
    LogLimiter,
    Running,
    connection_cap,
    quiet_http_errors,
)
from telemetry.serve.plan import Plan
from telemetry.serve.protocol import TRANSPORT_PARAMS, content_type, http_status
from telemetry.serve.reading import RequestReader
from telemetry.serve.sqltext import split_insert
from telemetry.serverthread import ServerThread

log = logging.getLogger(__name__)

# the guard's parses one user runs at once (the rest queue): with the pool's `threads`, one user's
# long parses leave the others' statements a thread
PARSES_PER_USER = 2

# the interpreter's switch interval while serve runs (sys.setswitchinterval; Python's default is
# 5 ms): the guard's parses run Python on threads beside the event loop, and every time the loop
# (or another user's parse) wakes it waits up to this long for a parsing thread to let go. With two
# 240 KB statements parsing at once on two busy cores, an admin's `SELECT 1` took 0.22-0.32 s
# (median of 12) at 5 ms and 0.07-0.12 s at 1 ms
SWITCH_INTERVAL_S = 0.001

# a user's requests in progress at once (at least; 4 x its max_concurrent_queries where more):
# bodies being read and queries queued included, so one login cannot hold every connection
REQUESTS_PER_USER = 64

# how much of a request is searched for the start of an INSERT's inline data: no more than the
# guard parses (a longer head is judged as a statement, and refused for its size)
_HEAD_BYTES = GUARD_MAX_QUERY_BYTES + 4096

B = TypeVar("B", bound=Backend)


class QueryServer(Generic[B]):
    """The endpoint over one backend (backend.Backend: the embedded engine, or the ingest
    gateway). `start()` serves from a background thread; `stop()` ends it."""

    def __init__(
        self,
        engine: B,
        config: ServeConfig | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 8123,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """`ssl_context`: serve HTTPS with it (the ingest gateway's: telemetry/tls.py); None:
        plain HTTP."""
        self.engine: B = engine
        self.ssl_context = ssl_context
        self.config = config or ServeConfig()
        self.host, self.port = host, port
        self.display_name = socket.gethostname()
        threads = self.config.threads
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="railscope-query")
        # cancelling never waits behind long queries or parses
        self._aux = ThreadPoolExecutor(2, thread_name_prefix="railscope-query-aux")
        # the guard's parses: PARSES_PER_USER at a time per user (`_parses`), each bounded in size
        # (engine.GUARD_MAX_QUERY_BYTES), so one user's parses never hold up another's
        self._guard = ThreadPoolExecutor(threads, thread_name_prefix="railscope-query-guard")
        self._parses = Running()
        self._compress = compressors()
        self._thread = ServerThread("railscope-query-http", "ClickHouse HTTP")
        self._runner: web.AppRunner | None = None
        self._server: asyncio.AbstractServer | None = None
        self._stopping = False
        self._sweeper: asyncio.Task[None] | None = None
        self._purged = 0.0  # when memory was last handed back (_purge_memory)
        self.note = LogLimiter(log)
        quiet_http_errors(self.note)
        self.conns = Connections(
            connection_cap(self.config.max_connections),
            self.config.max_connections_per_network,
            self.note,
        )
        self.running = running.Registry()
        self._per_user = Running()
        self._requests = Running()
        # queries of read-only users run on at most threads - 2 engine threads, shared in turn
        # between those users: a writer (the railscope commands, an operator) always finds one
        # free, and one reader's many queries never starve another reader
        self._readers: FairSlots | None = None
        self.reader = RequestReader(self.config, self._pool, self.note)
        self._browsers = Browsers(self.config.allowed_origins, self.config.allowed_hosts, host)
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
        """Bind and serve from a thread. Returns the bound (host, port). Lowers the process's
        switch interval to SWITCH_INTERVAL_S (never raises it)."""
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))
        self.host, self.port = self._thread.start(self._bind, self.host, self.port)
        return self.host, self.port

    async def _bind(self) -> tuple[str, int]:
        """The loop's parts, and the listening socket (with the TLS context, if any)."""
        loop = asyncio.get_running_loop()
        self._readers = FairSlots(max(1, self.config.threads - 2))
        self.reader.budget = BodyBudget(self.config.max_buffered_bytes)
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
            keepalive_timeout=30.0,
            shutdown_timeout=3.0,
        )
        await self._runner.setup()
        handler = self._runner.server
        assert handler is not None
        # every connection through the gate: counted, capped, its loss seen (Gate)
        self._server = await loop.create_server(
            lambda: Gate(handler(), self.conns),
            self.host,
            self.port,
            reuse_address=True,
            backlog=ACCEPT_BURST,
            ssl=self.ssl_context,
        )
        sock = self._server.sockets[0]
        self._sweeper = loop.create_task(self._sweep())
        host, port = sock.getsockname()[:2]
        return host, port

    def begin_stop(self) -> None:
        """Stop taking connections and cancel every running query (SIGTERM): their clients get
        QUERY_WAS_CANCELLED, later requests on open connections ABORTED (both retried by
        railscope's sinks). Safe from any thread."""
        self._stopping = True
        if self._server is not None:
            self._thread.call_soon(self._server.close)
        tags = list(self.running.tags())
        if tags:
            try:
                self.engine.kill(tags)
            except EngineError as e:
                log.warning("serve: cancelling %d running queries: %s", len(tags), e.message)

    def stop(self) -> None:
        self.begin_stop()

        async def shutdown() -> None:
            if self._sweeper is not None:
                self._sweeper.cancel()
            if self._runner:
                await self._runner.cleanup()

        # handlers that do not finish in time are closed with the loop
        self._thread.stop(shutdown, 10.0)
        # a statement still in the engine was cancelled above: its thread ends with it
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._aux.shutdown(wait=False, cancel_futures=True)
        self._guard.shutdown(wait=False, cancel_futures=True)

    async def _sweep(self) -> None:
        """Once a second: close the connections whose request head is trickling in."""
        while True:
            await asyncio.sleep(1.0)
            self.conns.sweep(time.monotonic(), HEAD_DEADLINE)

    # -- handlers ----------------------------------------------------------------------------
    def _headers(self, query_id: str) -> dict[str, str]:
        return {
            "X-ClickHouse-Server-Display-Name": self.display_name,
            "X-ClickHouse-Query-Id": query_id,
            "X-ClickHouse-Timezone": self.engine.timezone,
        }

    async def _ping(self, request: web.Request) -> web.Response:
        conn = self.conns.of(request.transport)
        if conn is not None:
            conn.served()  # its head is in: not a trickling one
            conn.last_active = time.monotonic()
        return web.Response(text="Ok.\n", content_type="text/html")

    async def _not_found(self, request: web.Request) -> web.Response:
        return web.Response(
            status=404,
            text="There is no handle " + request.path[:200] + "\n\n"
            "Use / or /ping for health checks.\n",
            content_type="text/plain",
        )

    def _error_response(self, e: EngineError, query_id: str, cors: str = "") -> web.Response:
        self.stats.error(e.name or str(e.code))
        self.stats.last_success = False
        name = f" ({e.name})" if e.name else ""
        message = e.message.replace("\r", " ").replace("\n", " ")
        text = f"Code: {e.code}. DB::Exception: {message}{name} (version {self.engine.version})\n"
        headers = self._headers(query_id)
        headers["X-ClickHouse-Exception-Code"] = str(e.code)
        if cors:
            headers.update(cors_headers(cors))
        return web.Response(
            status=http_status(e),
            text=text,
            content_type="text/plain",
            charset="UTF-8",
            headers=headers,
        )

    async def _query(self, request: web.Request) -> web.StreamResponse:
        conn = self.conns.of(request.transport)
        if conn is not None:
            conn.busy += 1
            conn.served()  # the head is in
            # at the door while its body is still arriving (limits.Connections): a body trickling
            # may be closed at a cap (a login being throttled too: Reader.user). One whose body
            # came with its head is not: a flood of fresh connections would otherwise close it
            # while it waits for its turn on a busy event loop
            if not request.content.is_eof():
                conn.reading = time.monotonic()
        reserved = [0]
        held: list[str] = []  # the user whose request count this request holds
        try:
            response = await self._serve(request, conn, reserved, held)
            if conn is not None and not response.prepared:
                # written here, not after the handler returns: the connection counts as serving
                # a request (never closed at a cap) until its answer is on the wire
                await response.prepare(request)
                await response.write_eof()
            return response
        finally:
            for name in held:
                self._requests.leave(name)
            if conn is not None:
                conn.busy -= 1
                conn.reading = None
                conn.last_active = time.monotonic()
            if reserved[0] and self.reader.budget is not None:
                self.reader.budget.give(reserved[0])

    async def _serve(
        self, request: web.Request, conn: Any, reserved: list[int], held: list[str]
    ) -> web.StreamResponse:
        q = request.query
        query_id = q.get("query_id") or str(uuid.uuid4())
        with self.stats.lock:
            self.stats.received += 1
        cors = ""
        try:
            if len(query_id) > 256 or not query_id.isprintable():
                query_id = str(uuid.uuid4())
                raise EngineError(36, "query_id: at most 256 printable characters", "BAD_ARGUMENTS")
            cors = self._browsers.check(request.headers, request.content_type)
            if request.method == "OPTIONS":  # a CORS preflight of an allowed origin
                return web.Response(status=204, headers=cors_headers(cors) if cors else {})
            if self._stopping:
                raise EngineError(236, "railscope serve is shutting down", "ABORTED")
            user = await self.reader.user(request, conn)
            # a user's requests in progress, bodies being read included: its queries, the ones
            # queued behind them, and no more (a body trickling in holds one)
            cap = max(REQUESTS_PER_USER, 4 * self.config.user_limits(user).max_concurrent_queries)
            if not await self._requests.enter(user.name, cap):
                raise self._too_many(user.name, cap, "requests", wait=False)
            held.append(user.name)
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
                    form = await self.reader.form(request, reserved)
                    body = b""
                elif request.method not in ("GET", "HEAD"):
                    body = await self.reader.body(request, reserved)
                else:
                    body = b""
            except ConnectionResetError:  # gone mid-request (body or form): nothing to run
                raise EngineError(
                    210,
                    "the client closed the connection before the end of the request",
                    "NETWORK_ERROR",
                ) from None
            finally:
                if conn is not None:
                    conn.reading = None
            text = form.pop("query", q.get("query", "")).encode()
            if not text and not body:
                if request.method in ("GET", "HEAD"):
                    return web.Response(text="Ok.\n", content_type="text/html")
                raise EngineError(62, "Empty query", "SYNTAX_ERROR")
            database = q.get("database") or request.headers.get("X-ClickHouse-Database") or None
            if database is not None:
                database = guard.valid_database(database)
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
            # a GET is read-only for everyone (ClickHouse's readonly=2 for a user with 0)
            get = request.method in ("GET", "HEAD")
            readonly = user.readonly or (2 if get else 0)
            limits = self.config.user_limits(user)
            who = guard.Who(
                user.name, readonly, user.readonly, frozenset(user.allow), limits, get=get
            )
            guard.check_url_settings(who, settings)
            if "readonly" in settings:  # a user with 0 may make one request stricter
                who.readonly = max(readonly, int(float(settings.pop("readonly"))))
            plan, data = await self._judge(who, text, body, params, database)
            if plan.kind == "kill":
                out_fmt = plan.out_fmt or fmt
                killed = await self._kill(conn, who, plan, params, out_fmt, query_id)
                if killed is None:  # the client went away: its condition was cancelled
                    return web.Response(status=499)
                outcome = killed
            else:
                ran = await self._execute(
                    request, conn, who, plan, data, fmt, database, settings, params, query_id
                )
                if ran is None:  # the client went away: its query was cancelled
                    return web.Response(status=499)
                outcome = ran
                out_fmt = (plan.out_fmt or fmt) if plan.result_set else ""
        except EngineError as e:
            self._log_refusal(request, e)
            return self._error_response(e, query_id, cors)
        return await self._respond(request, outcome, out_fmt, query_id, cors)

    async def _judge(
        self,
        who: guard.Who,
        text: bytes,
        body: bytes,
        params: dict[str, str],
        database: str | None,
    ) -> tuple[Plan, bytes | memoryview]:
        """`_plan` on the guard's pool, one parse at a time per user (queued like queries)."""
        if not await self._parses.enter(who.name, PARSES_PER_USER, self.config.queue_max_wait):
            raise self._too_many(who.name, PARSES_PER_USER, "statements parsed")
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self._guard, self._plan, who, text, body, params, database
            )
        finally:
            self._parses.leave(who.name)

    def _too_many(
        self, user: str, cap: int, what: str = "queries", wait: bool = True
    ) -> EngineError:
        waited = f" (waited {self.config.queue_max_wait:g} s: serve.queue_max_wait)" if wait else ""
        return EngineError(
            202,
            f"Too many simultaneous {what} for user {user}. Maximum: {cap}{waited}",
            "TOO_MANY_SIMULTANEOUS_QUERIES",
        )

    def _plan(
        self,
        who: guard.Who,
        text: bytes,
        body: bytes,
        params: dict[str, str],
        database: str | None,
    ) -> tuple[Plan, bytes | memoryview]:
        """The guard's plan and the INSERT data it leaves apart (runs on an aux thread: the
        guard asks the engine)."""
        head_only = False
        data: bytes | memoryview
        if text and body:
            split = split_insert(text.decode("latin-1"))
            head_only = split is not None and not text[split.data_start :].strip()
        if head_only:  # INSERT ... FORMAT X in the URL, its data the whole body
            sql, data = text, memoryview(body)
        else:
            sql = text + b"\n" + body if text and body else (text or body)
            data = b""
        split = split_insert(sql[:_HEAD_BYTES].decode("latin-1"))
        if split is not None:
            try:
                head = split.head(sql[: split.head_end].decode("utf-8"))
            except UnicodeDecodeError as e:
                raise EngineError(
                    62, f"Syntax error: the query is not UTF-8 (byte {e.start})", "SYNTAX_ERROR"
                ) from None
            if not head_only:
                data = memoryview(sql)[split.data_start :]
            values = None
            if split.fmt.lower() == "values" and len(data) <= guard.VALUES_JUDGED_CHARS:
                values = bytes(data).decode("utf-8", "replace")
            plan = guard.judge(
                self.engine, who, head, params=params, database=database,
                insert_fmt=split.fmt, values_data=values,
            )  # fmt: skip
            return plan, data
        try:
            statement = sql.decode("utf-8")
        except UnicodeDecodeError as e:
            raise EngineError(
                62, f"Syntax error: the query is not UTF-8 (byte {e.start})", "SYNTAX_ERROR"
            ) from None
        return guard.judge(self.engine, who, statement, params=params, database=database), data

    async def _execute(
        self,
        request: web.Request,
        conn: Any,
        who: guard.Who,
        plan: Plan,
        data: bytes | memoryview,
        fmt: str,
        database: str | None,
        settings: dict[str, str],
        params: dict[str, str],
        query_id: str,
    ) -> Outcome | None:
        user_cap = who.limits.max_concurrent_queries
        if not await self._per_user.enter(who.name, user_cap, self.config.queue_max_wait):
            raise self._too_many(who.name, user_cap)
        entry = running.Query(query_id, who.name, plan.sql, database or "default")
        try:
            self.running.add(entry)
            try:
                # serve's limits first, then the user's own settings (checked against them), then
                # the plan's (VALUES data as literals); the tag and readonly after, the database last
                session = [
                    *who.limits.settings().items(),
                    *settings.items(),
                    *plan.settings.items(),
                ]
                readonly = who.readonly
                call: Callable[[], Outcome] = lambda: self.engine.run(  # noqa: E731
                    plan, fmt, data, database=database, settings=session, params=params,
                    readonly=readonly, tag=entry.tag,
                )  # fmt: skip
                try:
                    return await self._run_watched(call, conn, who, entry)
                except EngineError as e:
                    if e.code == 241:  # MEMORY_LIMIT_EXCEEDED: give the memory back
                        self._purge_memory()
                    raise
            finally:
                self.running.remove(entry)
        finally:
            self._per_user.leave(who.name)

    async def _run_watched(
        self, call: Callable[[], Outcome], conn: Any, who: guard.Who, entry: running.Query
    ) -> Outcome | None:
        """Run `call` on an engine thread; if the client goes away first, cancel the query and
        return None."""
        loop = asyncio.get_running_loop()
        assert self._readers is not None
        gate = self._readers if who.readonly else None
        if gate is not None:
            await gate.acquire(who.name)
        try:
            fut = loop.run_in_executor(self._pool, call)
            if conn is None:
                return await fut
            lost = asyncio.ensure_future(conn.lost.wait())
            try:
                done, _ = await asyncio.wait({fut, lost}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                lost.cancel()
            if fut in done:
                return fut.result()
            await loop.run_in_executor(self._aux, self._cancel, entry)
            with contextlib.suppress(EngineError):
                await fut
            self.note(
                logging.WARNING,
                "client_closed",
                "serve: the client closed the connection before the answer to query %s (%s); "
                "the query was cancelled",
                entry.query_id,
                conn.peer,
            )
            self.stats.error("client_closed")
            return None
        finally:
            if gate is not None:
                gate.release()

    def _purge_memory(self) -> None:
        """Return the allocator's free memory to the system, at most once every 5 s, off the
        event loop."""
        now = time.monotonic()
        if now - self._purged < 5.0:
            return
        self._purged = now

        def run() -> None:
            try:
                self.engine.purge_memory()
            except EngineError as e:
                log.debug("serve: purging memory: %s", e.message)

        self._aux.submit(run)

    def _cancel(self, entry: running.Query) -> None:
        try:
            self.engine.kill([entry.tag])
        except EngineError as e:  # it finished meanwhile
            log.debug("serve: cancelling query %s: %s", entry.query_id, e.message)

    async def _kill(
        self,
        conn: Any,
        who: guard.Who,
        plan: Plan,
        params: dict[str, str],
        fmt: str,
        query_id: str,
    ) -> Outcome | None:
        """KILL QUERY WHERE cond: the condition (a comparison, guard.py) is evaluated over the
        user's own running queries as one of the user's queries: counted against its cap, under
        its limits, cancelled when the client leaves or serve stops. None: the client left."""
        own = self.running.of_user(who.name)
        user_cap = who.limits.max_concurrent_queries
        if not await self._per_user.enter(who.name, user_cap, self.config.queue_max_wait):
            raise self._too_many(who.name, user_cap)
        entry = running.Query(query_id, who.name, plan.sql, "default")
        loop = asyncio.get_running_loop()
        try:
            self.running.add(entry)
            try:
                select, table = await loop.run_in_executor(
                    self._guard, running.kill_select, self.engine, who, plan, own, params
                )
                session = list(who.limits.settings().items())
                got = await self._run_watched(
                    lambda: self.engine.run(
                        select,
                        "TabSeparatedRaw",
                        settings=session,
                        params=table,
                        readonly=2,
                        tag=entry.tag,
                    ),
                    conn,
                    who,
                    entry,
                )
                if got is None:
                    return None
                hit = running.matched(own, got)
                return await loop.run_in_executor(
                    self._aux, running.answer, self.engine, plan, hit, fmt
                )
            finally:
                self.running.remove(entry)
        finally:
            self._per_user.leave(who.name)

    def _log_refusal(self, request: web.Request, e: EngineError) -> None:
        if e.name in ("ACCESS_DENIED", "READONLY", "TOO_MANY_SIMULTANEOUS_QUERIES"):
            self.note(
                logging.WARNING,
                f"refused:{e.name}",
                "serve: refused a request from %s: %s (%s)",
                request.remote,
                e.message[:300],
                e.name,
            )

    async def _respond(
        self, request: web.Request, outcome: Outcome, fmt: str, query_id: str, cors: str
    ) -> web.StreamResponse:
        headers = self._headers(query_id)
        headers["X-ClickHouse-Summary"] = json.dumps(outcome.summary(), separators=(",", ":"))
        if cors:
            headers.update(cors_headers(cors))
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
            self.note(
                logging.WARNING,
                "client_closed",
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
