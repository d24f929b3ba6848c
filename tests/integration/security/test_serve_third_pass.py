"""`railscope serve`'s endpoint attacked a third time (issue 49), each attack as the issue writes
it: statement SETTINGS that override what serve set (VALUES expressions reading a host file),
negative limits, KILL conditions that stall the engine, wrong passwords that lock out the right
one, source rotation past the login throttle, the guard's own parse as a stall, and a Grafana
dashboard's panels all at once over a user's concurrency cap.

The endpoints run on the session's embedded engine with real HTTP (urllib, http.client); the
figures each test measures are printed (`-s`) for docs/security.md.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import itertools
import socket
import statistics
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from telemetry.serve import QueryServer
from telemetry.store import Store
from tests.integration.security.test_serve_attacks import _server, refused

SECRET = "s3cret-host-file-" + uuid.uuid4().hex[:8]


class Site:
    def __init__(self, server: QueryServer, url: str, db: str, secret: Path) -> None:
        self.server, self.url, self.db, self.secret = server, url, db, secret
        self.host, port = url.removeprefix("http://").split(":")
        self.port = int(port)

    def call(
        self,
        auth: tuple[str, str] | None,
        sql: str = "",
        *,
        get: bool = False,
        params: dict[str, str] | None = None,
        source: str | None = None,
        timeout: float = 60,
    ) -> tuple[int, dict[str, str], str]:
        """One request on its own connection (from `source`, a loopback address, if given)."""
        h = {}
        if auth:
            token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
            h["Authorization"] = "Basic " + token
        qs = dict(params or {})
        if get:
            qs["query"] = sql
        conn = http.client.HTTPConnection(
            self.host, self.port, timeout=timeout, source_address=(source, 0) if source else None
        )
        try:
            conn.request(
                "GET" if get else "POST",
                "/?" + urllib.parse.urlencode(qs),
                body=None if get else sql.encode(),
                headers=h,
            )
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode()
        finally:
            conn.close()


ADMIN = ("admin", "adm-pw-3")
READER = ("reader", "rd-pw-3")
GRAFANA = ("grafana", "gf-pw-3")


@pytest.fixture(scope="module")
def sites(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Site]]:
    base = tmp_path_factory.mktemp("third")
    secret = base / "secret.txt"
    secret.write_text(SECRET + "\n")
    store = Store(chdb_dsn)
    db = f"atk3_{uuid.uuid4().hex[:10]}"
    store.client.command(f"CREATE DATABASE {db}")
    store.client.command(f"CREATE TABLE {db}.t (s String) ENGINE = MergeTree ORDER BY tuple()")
    path = str(store.dsn.path)
    users, url_u = _server(
        path,
        {
            "users": [
                {"name": "admin", "password": ADMIN[1]},
                {"name": "reader", "password": READER[1], "readonly": 1,
                 "limits": {"max_execution_time": 3}},
                {"name": "grafana", "password": GRAFANA[1], "readonly": 2,
                 "limits": {"max_execution_time": 3}},
            ],
            "limits": {"max_execution_time": 3},
        },
    )  # fmt: skip
    nobody, url_n = _server(path, {"limits": {"max_execution_time": 3}})
    yield {"users": Site(users, url_u, db, secret), "default": Site(nobody, url_n, db, secret)}
    for s in (users, nobody):
        s.stop()
        s.engine.close()
    store.client.command(f"DROP DATABASE IF EXISTS {db}")


def _stored(s: Site) -> str:
    return s.call(ADMIN if s.server.config.users else None, f"SELECT * FROM {s.db}.t")[2]


# -- 1: statement SETTINGS never override what serve set -----------------------------------------
@pytest.mark.parametrize("site", ["users", "default"])
def test_values_expressions_cannot_be_turned_back_on(sites: dict[str, Site], site: str) -> None:
    s = sites[site]
    admin = ADMIN if site == "users" else None
    t, f = f"{s.db}.t", s.secret
    attacks = {
        # the issue's own: no comma between the rows, so the data is no `SELECT <data>`
        "no_commas": f"INSERT INTO {t} SETTINGS input_format_values_interpret_expressions=1 "
        f"VALUES ('a') (file('{f}'))",
        "commas": f"INSERT INTO {t} SETTINGS input_format_values_interpret_expressions=1 "
        f"VALUES ('a'), (file('{f}'))",
        "environ": f"INSERT INTO {t} SETTINGS input_format_values_interpret_expressions = 1 "
        "VALUES ('a') (file('/proc/self/environ'))",
        "templates": f"INSERT INTO {t} SETTINGS input_format_values_deduce_templates_of_"
        f"expressions=1 VALUES ('a') (file('{f}'))",
        # data past what the guard reads as expressions (200,000 characters)
        "long": f"INSERT INTO {t} SETTINGS input_format_values_interpret_expressions=1 VALUES "
        + "('a') " * 40_000
        + f"(file('{f}'))",
        "url_param": f"INSERT INTO {t} VALUES ('a') (file('{f}'))",
    }
    for name, sql in attacks.items():
        params = {"input_format_values_interpret_expressions": "1"} if name == "url_param" else {}
        got = s.call(admin, sql, params=params)
        assert got[0] != 200, (name, got[2][:300])
        refused(got, 497, 62, 27, 1001)
    assert SECRET not in _stored(s)
    assert "PATH=" not in _stored(s)


@pytest.mark.parametrize("site", ["users", "default"])
def test_what_serve_sets_is_const(sites: dict[str, Site], site: str) -> None:
    s = sites[site]
    admin = ADMIN if site == "users" else None
    assert s.call(admin, "SELECT getSetting('allow_introspection_functions')")[2] == "false\n"
    for sql in (
        "SELECT 1 SETTINGS allow_introspection_functions = 1",
        "SELECT * FROM (SELECT 1 SETTINGS allow_introspection_functions = 1)",
        "SELECT 1 SETTINGS dialect = 'kusto'",
        "SELECT 1 SETTINGS allow_experimental_analyzer = 0",
        "SELECT 1 SETTINGS additional_table_filters = {'x': 'y'}",
        "SELECT 1 SETTINGS log_comment = 'railscope-serve:x'",
    ):
        refused(s.call(admin, sql), 497)
    refused(s.call(admin, "SELECT 1", params={"allow_introspection_functions": "1"}), 497)
    # repeating what serve sets is no change
    assert s.call(admin, "SELECT 1", params={"allow_introspection_functions": "0"})[2] == "1\n"


# -- 2: a negative limit is refused, wherever it comes from --------------------------------------
@pytest.mark.parametrize("who", ["admin", "grafana"])
def test_negative_or_out_of_range_settings_are_refused(sites: dict[str, Site], who: str) -> None:
    s = sites["users"]
    auth = ADMIN if who == "admin" else GRAFANA
    slow = "SELECT sleepEachRow(1) FROM numbers(8) SETTINGS max_block_size = 1"
    # the issue's own: an 8 s query under a 3 s limit
    refused(s.call(auth, slow, params={"max_execution_time": "-1"}), 452)
    refused(s.call(auth, slow.replace("= 1", "= 1, max_execution_time = -1")), 452)
    for sql, params in (
        ("SELECT * FROM (SELECT 1 SETTINGS max_execution_time = -1)", {}),
        ("SELECT 1 SETTINGS max_execution_time = '-1'", {}),
        ("SELECT 1", {"max_execution_time": "nan"}),
        ("SELECT 1", {"max_execution_time": "inf"}),
        ("SELECT 1", {"max_execution_time": "1e400"}),
        ("SELECT 1", {"max_memory_usage": "-1"}),
        ("SELECT 1", {"max_result_rows": "-5"}),
        ("SELECT 1", {"max_block_size": "0"}),
        ("SELECT 1", {"max_query_size": "1000000000"}),
        ("SELECT 1 SETTINGS max_threads = -1", {}),
        ("SELECT 1 SETTINGS max_execution_time = (0 - 1)", {}),
    ):
        refused(s.call(auth, sql, params=params), 452, 62)
    # a limit lowered within range still applies, and the engine's own bound stands
    t0 = time.monotonic()
    refused(s.call(auth, slow, params={"max_execution_time": "1"}), 159)
    assert time.monotonic() - t0 < 2.9


def test_a_negative_limit_never_lifts_the_limit(sites: dict[str, Site]) -> None:
    """Without the rule the engine takes -1 as no limit: the 8 s query would answer 200."""
    s = sites["default"]
    t0 = time.monotonic()
    got = s.call(
        None,
        "SELECT sleepEachRow(1) FROM numbers(8) SETTINGS max_block_size = 1",
        params={"max_execution_time": "-1"},
    )
    assert got[0] != 200
    assert time.monotonic() - t0 < 3.5


# -- 3: KILL conditions ---------------------------------------------------------------------------
STALL = (
    "KILL QUERY WHERE (SELECT sum(sleepEachRow(1)) FROM numbers(40) SETTINGS max_block_size=1) "
    "> 100 SYNC"
)


def _admin_select_1(s: Site, n: int = 5) -> list[float]:
    took = []
    for _ in range(n):
        t0 = time.monotonic()
        assert s.call(ADMIN, "SELECT 1")[2] == "1\n"
        took.append(time.monotonic() - t0)
        time.sleep(0.2)
    return took


def test_kill_takes_comparisons_of_its_own_queries_only(sites: dict[str, Site]) -> None:
    s = sites["users"]
    # (this engine caps a block's sleep at 3 s: the same stall within that cap runs 3 s here)
    capped = (
        "KILL QUERY WHERE (SELECT sum(sleepEachRow(0.5)) FROM numbers(6) SETTINGS "
        "max_block_size=1, function_sleep_max_microseconds_per_block=0) > 100 SYNC"
    )
    for auth in (READER, GRAFANA, ADMIN):
        for sql in (capped, STALL, STALL.replace(" SETTINGS max_block_size=1", "")):
            t0 = time.monotonic()
            # a readonly user may not name these settings either (164)
            settings = auth != ADMIN and "SETTINGS" in sql
            refused(s.call(auth, sql), *((497, 164) if settings else (497,)))
            assert time.monotonic() - t0 < 2
    for cond in (
        "query_id IN (SELECT query_id FROM system.processes)",
        "sleepEachRow(1) = 0",
        "length(query) > 0",
        "elapsed > 0",
        "query_id = toString(sleep(3))",
    ):
        refused(s.call(READER, f"KILL QUERY WHERE {cond}"), 497)
    # while two readers keep sending the stall, the admin's SELECT 1 stays quick
    stop = threading.Event()

    def stall() -> None:
        while not stop.is_set():
            s.call(READER, STALL)

    threads = [threading.Thread(target=stall) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        took = _admin_select_1(s)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    print(f"admin SELECT 1 during KILL stalls: max {max(took):.3f} s")
    assert max(took) < 1.0
    # a comparison on its own query id still works
    assert s.call(READER, "KILL QUERY WHERE query_id = 'nothing-like-it' SYNC")[0] == 200


def test_a_get_never_runs_kill(sites: dict[str, Site]) -> None:
    refused(sites["default"].call(None, "KILL QUERY WHERE 1", get=True), 164)
    refused(sites["users"].call(ADMIN, "KILL QUERY WHERE query_id = 'x'", get=True), 164)


# -- 4, 5: logins ---------------------------------------------------------------------------------
@pytest.fixture
def fresh(chdb_dsn: str) -> Iterator[Site]:
    """A users serve of its own: the login throttle starts empty."""
    store = Store(chdb_dsn)
    server, url = _server(
        str(store.dsn.path),
        {"users": [{"name": "admin", "password": ADMIN[1]},
                   {"name": "grafana", "password": GRAFANA[1], "readonly": 2}]},
    )  # fmt: skip
    yield Site(server, url, "", Path())
    server.stop()
    server.engine.close()


def test_wrong_passwords_never_lock_out_the_right_one(fresh: Site) -> None:
    s = fresh
    stop = threading.Event()
    sent = [0]

    def guess() -> None:  # as the issue: no credentials at all, from 127.0.0.1
        while not stop.is_set():
            s.call(None, "SELECT 1", timeout=30)
            sent[0] += 1

    pool = [threading.Thread(target=guess) for _ in range(16)]
    for t in pool:
        t.start()
    try:
        time.sleep(2)
        took = []
        for _ in range(4):
            t0 = time.monotonic()
            assert s.call(ADMIN, "SELECT 1", source="127.0.0.1")[2] == "1\n"
            took.append(time.monotonic() - t0)
    finally:
        stop.set()
        for t in pool:
            t.join(30)
    print(f"correct logins during {sent[0]} wrong ones: max {max(took):.3f} s")
    assert max(took) < 1.0


def test_rotating_the_source_does_not_escape_the_throttle(fresh: Site) -> None:
    s = fresh
    # one guesser per address across 127.0.0.0/8: the name is throttled whatever the source
    t0 = time.monotonic()
    for i in range(16):
        src = f"127.{i}.{i % 7}.{2 + i}"
        refused(s.call(("admin", f"guess-{i}"), "SELECT 1", source=src), 516)
    took = time.monotonic() - t0
    print(f"16 guesses for one name from 16 networks: {took:.1f} s")
    assert took >= 4.0  # 10 free, then one a second
    # ... and addresses of one /24 share their network's throttle, whatever the name
    t0 = time.monotonic()
    for i in range(14):
        refused(s.call((f"nobody{i}", "x"), "SELECT 1", source=f"127.9.9.{10 + i}"), 516)
    took = time.monotonic() - t0
    print(f"14 guesses for 14 names from one /24: {took:.1f} s")
    assert took >= 2.0
    # the owner still gets in at once
    t0 = time.monotonic()
    assert s.call(ADMIN, "SELECT 1", source="127.9.9.10")[2] == "1\n"
    assert time.monotonic() - t0 < 1.0


# -- 7: the guard's own parse ---------------------------------------------------------------------
def test_the_guards_parse_is_bounded(sites: dict[str, Site]) -> None:
    s = sites["users"]
    big = "SELECT 1 IN (" + ",".join(["1"] * 1_000_000) + ")"  # 2 MB
    t0 = time.monotonic()
    refused(s.call(READER, big), 62)
    one = time.monotonic() - t0
    print(f"a 2 MB statement refused in {one:.3f} s")
    assert one < 2.0
    near = "SELECT 1 IN (" + ",".join(["1"] * 120_000) + ")"  # 240 KB: parsed, at most ~1 s
    stop = threading.Event()

    def stall() -> None:
        while not stop.is_set():
            s.call(READER, big)
            s.call(READER, near)

    threads = [threading.Thread(target=stall) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        took = _admin_select_1(s)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    print(
        f"admin SELECT 1 during parse stalls: median {statistics.median(took):.3f} s, "
        f"max {max(took):.3f} s",
        [round(x, 3) for x in took],
    )
    # never behind the parses (each up to ~1 s, two at a time): the median well under a second;
    # one answer may take a second on a loaded 2-core machine (CI: 1.025 s once)
    assert statistics.median(took) < 0.5 and max(took) < 2.0, took


# -- 9: a dashboard's panels all at once ----------------------------------------------------------
def test_a_dashboards_panels_all_at_once_queue_instead_of_failing(sites: dict[str, Site]) -> None:
    s = sites["users"]
    cap = s.server.config.user_limits(s.server.config.users[2]).max_concurrent_queries
    panels = 4 * cap  # more panels than the cap: Grafana sends them all at once
    with ThreadPoolExecutor(panels) as ex:
        got = list(
            ex.map(lambda i: s.call(GRAFANA, f"SELECT {i}, sleep(0.3)", timeout=60), range(panels))
        )
    assert [g[0] for g in got] == [200] * panels, [g[2] for g in got if g[0] != 200][:2]


def _dashboard_queries() -> dict[str, int]:
    """Each railscope dashboard's ClickHouse queries that Grafana sends at once on a load."""
    from dashboards.definitions import DASHBOARDS

    def panels(ps: list[object]) -> Iterator[dict[str, object]]:
        for p in ps:
            d = p if isinstance(p, dict) else p.to_json_data()
            yield d
            yield from panels(d.get("panels") or [])

    out = {}
    for name, build in DASHBOARDS.items():
        board = build().to_json_data()
        out[name] = sum(len(p.get("targets") or []) for p in panels(board["panels"]))  # type: ignore[arg-type]
    return out


def test_every_dashboard_loads_at_once_under_the_grafana_users_defaults(
    sites: dict[str, Site],
) -> None:
    """Every panel's query of the largest dashboard at once, as the readonly 2 user with the
    default limits: none refused. Without the queue the cap refused every query past it."""
    s = sites["users"]
    cfg = s.server.config
    cap = cfg.readonly_limits.max_concurrent_queries
    assert cap is not None
    counts = _dashboard_queries()
    print(f"dashboard queries at once: {counts}; readonly cap {cap}, queue {cfg.queue_max_wait} s")
    most = max(counts.values())
    # at most two waves per load: the second waits for the first (0.5 s here, seconds on a
    # big store), well inside the queue's wait
    assert most <= 2 * cap
    server, url = _server(
        str(Path(s.server.engine.path)),
        {"users": [{"name": "grafana", "password": GRAFANA[1], "readonly": 2}]},
    )
    try:
        g = Site(server, url, s.db, s.secret)
        with ThreadPoolExecutor(most) as ex:
            got = list(ex.map(lambda i: g.call(GRAFANA, f"SELECT {i}, sleep(0.5)"), range(most)))
    finally:
        server.stop()
        server.engine.close()
    assert [x[0] for x in got] == [200] * most, [x[2] for x in got if x[0] != 200][:2]


# -- 8: the smaller issues ------------------------------------------------------------------------
@pytest.mark.parametrize("who", ["reader", "grafana"])
def test_server_introspection_is_not_for_readonly_users(sites: dict[str, Site], who: str) -> None:
    s = sites["users"]
    auth = READER if who == "reader" else GRAFANA
    system = {"database": "system"}
    for sql, params in (
        ("SELECT 1 WHERE 'x' IN processes", system),
        ("SELECT count() FROM numbers(1) WHERE toString(number) NOT IN processes", system),
        ("SELECT 1 WHERE 'x' IN system.processes", {}),
        ("SELECT getServerSetting('path')", {}),
        ("SELECT * FROM system.server_settings", {}),
        ("SELECT * FROM system.disks", {}),
        ("SELECT * FROM information_schema.tables", {}),
        ("SELECT * FROM INFORMATION_SCHEMA.COLUMNS", {}),
        ("SELECT * FROM tables", {"database": "information_schema"}),
    ):
        refused(s.call(auth, sql, params=params), 497)
    # what Grafana's query builder reads stays readable
    assert s.call(auth, "SELECT count() > 0 FROM system.tables")[2] == "1\n"
    assert s.call(auth, "SELECT count() > 0 FROM system.columns")[2] == "1\n"
    assert s.call(ADMIN, "SELECT getServerSetting('max_thread_pool_size') > 0")[0] == 200


def test_a_blank_password_never_listens_beyond_loopback() -> None:
    from telemetry.config import load_config
    from telemetry.errors import ConfigError

    for pw in ("", "   ", "\t\n"):
        with pytest.raises(ConfigError, match="has no password"):
            load_config(
                env={},
                overrides={"serve": {"query_listen": "0.0.0.0:8123",
                                     "users": [{"name": "a", "password": pw}]}},
            )  # fmt: skip


def test_allow_names_only_what_exists() -> None:
    from telemetry.config import load_config
    from telemetry.errors import ConfigError

    def users(allow: list[str]) -> dict[str, object]:
        return {"serve": {"users": [{"name": "a", "password": "p", "allow": allow}]}}

    for typo in (["fiel"], ["system_table"], ["into_outfiles"]):
        with pytest.raises(ConfigError, match="nothing serve refuses"):
            load_config(env={}, overrides=users(typo))
    for const in (["allow_introspection_functions"], ["input_format_values_interpret_expressions"]):
        with pytest.raises(ConfigError, match="no user may change"):
            load_config(env={}, overrides=users(const))
    cfg = load_config(env={}, overrides=users(["file", "into_outfile", "send_logs_level", "S3"]))
    assert cfg.serve.users[0].allow == ["file", "into_outfile", "send_logs_level", "s3"]


# -- 6: connections that trickle ------------------------------------------------------------------
def _trickle(host: str, port: int, first: bytes, closed: list[float], t0: float) -> None:
    """Send `first`, then one byte every 2 s until serve closes the connection (or 40 s)."""
    import socket

    with socket.create_connection((host, port), timeout=3) as sock:
        sock.sendall(first)
        while time.monotonic() - t0 < 40:
            try:
                sock.sendall(b"1" if b"chunked" not in first else b"1\r\nx\r\n")
                sock.settimeout(2)
                got = sock.recv(65536)
                if got == b"" or got.startswith(b"HTTP/1.1 4") or got.startswith(b"HTTP/1.1 5"):
                    break
            except TimeoutError:
                continue
            except OSError:
                break
        closed.append(time.monotonic() - t0)


def test_trickling_heads_and_bodies_are_cut_off(
    sites: dict[str, Site], caplog: pytest.LogCaptureFixture
) -> None:
    s = sites["users"]
    token = base64.b64encode(f"{READER[0]}:{READER[1]}".encode()).decode()
    head = f"POST / HTTP/1.1\r\nHost: {s.host}\r\n".encode()
    body = (
        f"POST / HTTP/1.1\r\nHost: {s.host}\r\nAuthorization: Basic {token}\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    ).encode()
    closed: list[float] = []
    t0 = time.monotonic()
    threads = [
        threading.Thread(target=_trickle, args=(s.host, s.port, first, closed, t0))
        for first in [head] * 4 + [body] * 4
    ]
    for t in threads:
        t.start()
    time.sleep(3)
    took = _admin_select_1(s, 3)
    for t in threads:
        t.join(60)
    print(f"trickling connections closed after {sorted(round(c, 1) for c in closed)} s")
    assert len(closed) == 8 and max(closed) < 30  # 10 s deadlines, swept each second
    assert max(took) < 1.0
    assert s.call(READER, "SELECT 1")[2] == "1\n"
    assert not [r for r in caplog.records if r.exc_info]  # no tracebacks


def _rss_mib() -> int:
    with open("/proc/self/status") as f:  # serve runs in this process here
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    return 0


def test_memory_is_returned_after_a_refused_memory_bomb(fresh: Site) -> None:
    s = fresh
    assert s.call(ADMIN, "SELECT 1")[2] == "1\n"
    time.sleep(1)
    before = _rss_mib()
    bomb = "SELECT length(groupArray(number)) FROM numbers_mt(300000000)"
    refused(s.call(ADMIN, bomb, params={"max_memory_usage": "800000000"}), 241)
    # the allocator gives pages back on its own after ~10 s of decay, or never (the issue's
    # 2.8 GiB); serve hands them back at once
    deadline = time.monotonic() + 2
    while _rss_mib() - before > 300 and time.monotonic() < deadline:
        time.sleep(0.2)
    after = _rss_mib()
    print(f"RSS around a refused 800 MB memory bomb: {before} MiB before, {after} MiB after")
    assert after - before < 300


# -- 6: slow bodies from rotating addresses fill no cap --------------------------------------------
FLOOD_READERS = [(f"flood{i}", f"fl-pw-{i}") for i in range(3)]


@pytest.fixture
def flooded(chdb_dsn: str) -> Iterator[Site]:
    """A users serve of its own with a cap of 160 connections (the issue's 1,024, scaled to this
    machine) and three readonly 1 logins: 3 x 64 bodies in progress outnumber the cap."""
    store = Store(chdb_dsn)
    db = f"atk6_{uuid.uuid4().hex[:10]}"
    store.client.command(f"CREATE DATABASE {db}")
    store.client.command(f"CREATE TABLE {db}.t (s String) ENGINE = MergeTree ORDER BY tuple()")
    users = [{"name": "admin", "password": ADMIN[1]}] + [
        {"name": n, "password": p, "readonly": 1} for n, p in FLOOD_READERS
    ]
    server, url = _server(str(store.dsn.path), {"users": users, "max_connections": 160})
    yield Site(server, url, db, Path())
    server.stop()
    server.engine.close()
    store.client.command(f"DROP DATABASE IF EXISTS {db}")


class SlowBodies:
    """`n` connections, each from its own address of 127.0.0.0/8 (rotating across /24s), each a
    readonly login's POST with a chunked body sent one byte every `every` seconds; a connection
    serve closes or answers is opened again (from the next address) at the next tick."""

    def __init__(self, s: Site, n: int, every: float) -> None:
        self.s, self.n, self.every = s, n, every
        self.stop = threading.Event()
        self.opened = self.closed = 0
        self.next_addr = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _head(self, i: int) -> bytes:
        name, pw = FLOOD_READERS[i % len(FLOOD_READERS)]
        token = base64.b64encode(f"{name}:{pw}".encode()).decode()
        return (
            f"POST / HTTP/1.1\r\nHost: {self.s.host}\r\nAuthorization: Basic {token}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n1\r\nS\r\n"
        ).encode()

    def _open(self) -> socket.socket | None:
        i = self.next_addr
        self.next_addr += 1
        src = f"127.{1 + (i // 250) % 200}.{i % 250}.{2 + i % 200}"
        try:
            sock = socket.create_connection(
                (self.s.host, self.s.port), timeout=2, source_address=(src, 0)
            )
            sock.sendall(self._head(i))
            sock.setblocking(False)
        except OSError:
            return None
        self.opened += 1
        return sock

    def _run(self) -> None:
        socks: list[socket.socket] = []
        while not self.stop.is_set():
            tick = time.monotonic()
            alive = []
            for sock in socks:
                try:
                    sock.recv(4096)  # any answer (a refusal, a cut-off body) or EOF: let go
                    sock.close()
                    self.closed += 1
                    continue
                except BlockingIOError:
                    pass
                except OSError:
                    sock.close()
                    self.closed += 1
                    continue
                try:
                    sock.send(b"1\r\nx\r\n")
                    alive.append(sock)
                except OSError:
                    sock.close()
                    self.closed += 1
            socks = alive
            while len(socks) < self.n and not self.stop.is_set():
                new = self._open()
                if new is not None:
                    socks.append(new)
                elif time.monotonic() - tick > self.every:
                    break
            self.stop.wait(max(0.0, self.every - (time.monotonic() - tick)))
        for sock in socks:
            sock.close()


def test_slow_bodies_from_rotating_addresses_leave_ping_admin_and_writes(
    flooded: Site, caplog: pytest.LogCaptureFixture
) -> None:
    """Attack 6 as the issue ran it, scaled: 400 trickling chunked bodies from rotating 127.x
    addresses against a cap of 160 (the issue: 1,400 against 1,024). Without the door share the
    3 x 64 bodies in progress held all 160 connections and everything else, /ping included, was
    refused for the whole flood."""
    s = flooded
    t = f"{s.db}.t"
    flood = SlowBodies(s, 400, every=3.0)
    stop = threading.Event()
    rows: list[tuple[float, int]] = []
    written = [0]

    def write() -> None:  # a collector's inserts, as the admin (readonly 0)
        while not stop.is_set():
            try:
                if s.call(ADMIN, f"INSERT INTO {t} VALUES ('w')", timeout=10)[0] == 200:
                    written[0] += 1
            except OSError:
                pass
            stop.wait(0.2)

    writer = threading.Thread(target=write, daemon=True)
    t0 = time.monotonic()
    flood.thread.start()
    writer.start()
    pings: list[float] = []
    selects: list[float] = []
    failures: list[str] = []
    resets: list[str] = []

    def again(what: str, call: Callable[[], str]) -> str:
        # a new connection may be reset in a burst of the flood's from the same network (all of
        # loopback is one: serve cannot tell them apart) once serve holds its cap and the burst
        # allowance; a client retries that once, as clickhouse-connect's pool does
        try:
            return call()
        except OSError as e:
            resets.append(f"{what}: {e}")
            return call()

    try:
        time.sleep(4)  # the flood is at its size
        while time.monotonic() - t0 < 30:
            for what, call, out in (
                ("ping", lambda: _ping(s), pings),
                ("select", lambda: s.call(ADMIN, "SELECT 1", timeout=10)[2], selects),
            ):
                t1 = time.monotonic()
                try:
                    got = again(what, call)
                except OSError as e:
                    failures.append(f"{what}: {e}")
                    continue
                out.append(time.monotonic() - t1)
                if got not in ("Ok.\n", "1\n"):
                    failures.append(f"{what}: {got[:200]}")
            try:
                count = again(
                    "count", lambda: s.call(ADMIN, f"SELECT count() FROM {t}", timeout=10)[2]
                )
            except OSError as e:
                failures.append(f"count: {e}")
                count = ""
            rows.append((time.monotonic() - t0, int(count) if count.strip().isdigit() else -1))
            time.sleep(0.5)
    finally:
        stop.set()
        flood.stop.set()
        writer.join(15)
        flood.thread.join(30)
    conns = s.server.conns
    print(
        f"slow-body flood: {flood.opened} connections opened from rotating 127.x addresses, "
        f"{flood.closed} closed by serve; /ping max {max(pings, default=0):.3f} s, admin SELECT 1 "
        f"max {max(selects, default=0):.3f} s over {len(pings)} tries; rows "
        f"{[r for _, r in rows[:: max(1, len(rows) // 6)]]} ({written[0]} inserts answered); "
        f"{conns.evicted} evicted, {conns.refused} refused; {len(resets)} reset and retried"
    )
    assert not failures, failures[:5]
    # a reset is rare: at most one call in 20 needed its retry
    assert len(resets) <= max(2, (len(pings) + len(selects) + len(rows)) // 20), resets
    # answered all along, promptly: the median well under a second; at most one connection
    # attempt's SYN retried (Linux retries a SYN the full accept queue dropped after 1 s: it
    # happened on a loaded 2-core machine, 1.016 s), never waiting out the flood
    assert len(pings) > 20 and statistics.median(pings) < 0.5 and max(pings) < 2.0, pings
    assert statistics.median(selects) < 0.5 and max(selects) < 2.0, selects
    # ingestion keeps growing throughout: each third of the flood adds rows
    thirds = [rows[0][1], rows[len(rows) // 3][1], rows[2 * len(rows) // 3][1], rows[-1][1]]
    assert all(b > a for a, b in itertools.pairwise(thirds)), thirds
    assert flood.opened > 400  # serve let go of trickling bodies, and the flood came back
    assert not [r for r in caplog.records if r.exc_info]  # no tracebacks


def _ping(s: Site) -> str:
    conn = http.client.HTTPConnection(s.host, s.port, timeout=10)
    try:
        conn.request("GET", "/ping")
        return conn.getresponse().read().decode()
    finally:
        conn.close()


def test_one_readonly_login_holds_few_slow_bodies(flooded: Site) -> None:
    """The issue: a readonly 1 login was enough to hold every connection with slow bodies. Its
    requests in progress are capped while their bodies are read: past max(64, 4 x its
    max_concurrent_queries) each further one is refused at once (202), not held."""
    s = flooded
    name, pw = FLOOD_READERS[0]
    cfg = s.server.config
    user = next(u for u in cfg.users if u.name == name)
    cap = max(64, 4 * cfg.user_limits(user).max_concurrent_queries)
    token = base64.b64encode(f"{name}:{pw}".encode()).decode()
    head = (
        f"POST / HTTP/1.1\r\nHost: {s.host}\r\nAuthorization: Basic {token}\r\n"
        "Transfer-Encoding: chunked\r\n\r\n1\r\nS\r\n"
    ).encode()
    socks = []
    try:
        for i in range(cap + 16):
            sock = socket.create_connection((s.host, s.port), source_address=(f"127.3.{i}.2", 0))
            sock.sendall(head)
            socks.append(sock)
        time.sleep(1.5)
        answered = []
        for sock in socks:
            sock.settimeout(0.05)
            with contextlib.suppress(TimeoutError):
                answered.append(sock.recv(4096))
        print(f"{cap + 16} slow bodies from one readonly login: {len(answered)} refused at once")
        assert len(answered) == 16
        assert all(b"TOO_MANY_SIMULTANEOUS_QUERIES" in a for a in answered), answered[:1]
        assert s.call(ADMIN, "SELECT 1")[2] == "1\n"  # another user is not held up
    finally:
        for sock in socks:
            sock.close()
