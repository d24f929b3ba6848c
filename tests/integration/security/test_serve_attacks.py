"""`railscope serve`'s ClickHouse endpoint attacked as a local user, a web page and a read-only
(Grafana) user would: every statement below is sent by the no-user loopback default, a `readonly:
1` user and the docs' `readonly: 2` Grafana user (and the admin where it reaches the host), by POST
and by GET, and each is refused with ClickHouse's error shape. Afterwards nothing exists on the
file system where the attacks wrote, the store is intact, a collector that inserted throughout
was neither killed nor stopped, and serve still answers.

The endpoints run on the session's embedded engine (the real engine parses every statement), with
real HTTP from urllib; the serve process tests (flood, SIGTERM, logs) are in
test_serve_process_attacks.py.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from telemetry.config import load_config
from telemetry.serve import Engine, QueryServer
from telemetry.store import Store

ERROR = re.compile(r"^Code: (\d+)\. DB::Exception: .+ \(([A-Z_]+)\) \(version [0-9.]+\)\n$", re.S)
GRAFANA_PW = "graf-pw-6a1f"


@dataclass
class Served:
    url: str
    server: QueryServer
    canary: Path  # where the attacks try to write: must stay empty
    pwfile: Path  # the grafana user's password_file: must stay unreadable through serve
    db: str


def _server(engine_path: str, serve: dict[str, object]) -> tuple[QueryServer, str]:
    cfg = load_config(env={}, overrides={"serve": serve}).serve
    server = QueryServer(Engine(engine_path), cfg, port=0)
    host, port = server.start()
    return server, f"http://{host}:{port}"


@pytest.fixture(scope="module")
def served(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Served]]:
    base = tmp_path_factory.mktemp("attacks")
    canary = base / "canary"
    canary.mkdir()
    pwfile = base / "grafana.pw"
    pwfile.write_text(GRAFANA_PW + "\n")
    store = Store(chdb_dsn)
    db = f"atk_{uuid.uuid4().hex[:10]}"
    store.client.command(f"CREATE DATABASE {db}")
    store.client.command(f"CREATE TABLE {db}.t (a UInt64, s String) ENGINE = MergeTree ORDER BY a")
    store.client.command(f"INSERT INTO {db}.t SELECT number, 'x' FROM numbers(100)")
    path = str(store.dsn.path)
    users, url_u = _server(
        path,
        {
            "users": [
                {"name": "admin", "password": "adm-pw"},
                {"name": "reader", "password": "rd-pw", "readonly": True,
                 "limits": {"max_result_rows": 1000, "max_memory_usage": "64MiB",
                            "max_concurrent_queries": 2}},
                {"name": "grafana", "password_file": str(pwfile), "readonly": 2},
                {"name": "other", "password": "ot-pw", "readonly": 2},
            ]
        },
    )  # fmt: skip
    nobody, url_n = _server(path, {})
    yield {
        "users": Served(url_u, users, canary, pwfile, db),
        "default": Served(url_n, nobody, canary, pwfile, db),
    }
    for s in (users, nobody):
        s.stop()
        s.engine.close()
    store.client.command(f"DROP DATABASE IF EXISTS {db}")


AUTH = {
    "default": None,
    "reader": ("reader", "rd-pw"),
    "grafana": ("grafana", GRAFANA_PW),
    "admin": ("admin", "adm-pw"),
    "other": ("other", "ot-pw"),
}


def call(
    s: Served,
    who: str,
    sql: str = "",
    *,
    get: bool = False,
    params: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
    timeout: float = 60,
) -> tuple[int, dict[str, str], str]:
    h = dict(headers or {})
    auth = AUTH[who]
    if auth:
        h["Authorization"] = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    qs = dict(params or {})
    data = body
    if get:
        qs["query"] = sql
    elif body is None:
        data = sql.encode()
    url = s.url + "/?" + urllib.parse.urlencode(qs)
    req = urllib.request.Request(url, data=data, method="GET" if get else "POST", headers=h)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read().decode()


def refused(got: tuple[int, dict[str, str], str], *codes: int) -> str:
    """Assert a ClickHouse-shaped refusal with one of `codes`; returns the exception name."""
    status, headers, text = got
    m = ERROR.match(text)
    assert m, text
    assert int(m[1]) in codes, text
    assert headers.get("x-clickhouse-exception-code") == m[1]
    assert status == {497: 403, 164: 500, 62: 400, 452: 500, 36: 400, 516: 403}.get(
        int(m[1]), status
    )
    return m[2]


def attacks(canary: Path, pwfile: Path, db: str) -> dict[str, str]:
    """Each statement tries to read or write outside the store, or to reach the network."""
    out = canary
    return {
        "file_read": "SELECT * FROM file('/etc/passwd', 'LineAsString')",
        "file_read_case": "select * from FiLe('/etc/passwd', 'LineAsString')",
        "file_read_quoted": "SELECT * FROM /* hi */ `file`('/etc/passwd','LineAsString') -- x",
        "file_read_comment_split": "SELECT * FROM file/**/('/etc/passwd', 'LineAsString')",
        "file_scalar": "SELECT file('/etc/passwd')",
        "file_password_file": f"SELECT file('{pwfile}')",
        "file_password_table": f"SELECT * FROM file('{pwfile}', 'LineAsString')",
        "file_param": "SELECT * FROM file({p:String}, 'LineAsString')",
        "file_in_subquery": "SELECT 1 WHERE 1 IN (SELECT count() FROM file('/etc/passwd', 'LineAsString'))",
        "file_in_cte": "WITH x AS (SELECT * FROM file('/etc/passwd','LineAsString')) SELECT * FROM x",
        "file_in_view": "SELECT * FROM view(SELECT * FROM file('/etc/passwd', 'LineAsString'))",
        "file_in_union": "SELECT 'a' UNION ALL SELECT line FROM file('/etc/passwd', 'LineAsString')",
        "file_describe": "DESCRIBE TABLE file('/etc/passwd', 'CSVWithNames')",
        "file_explain": "EXPLAIN SELECT * FROM file('/etc/passwd', 'LineAsString')",
        "file_heredoc": "SELECT * FROM file($$/etc/passwd$$, 'LineAsString')",
        "file_write": f"INSERT INTO FUNCTION file('{out}/w1', 'LineAsString') SELECT 'x'",
        "filesystem": "SELECT * FROM filesystem('/etc')",
        "outfile": f"SELECT 1 INTO OUTFILE '{out}/o1'",
        "outfile_append": f"SELECT 1 INTO OUTFILE '{out}/o2' APPEND",
        "outfile_truncate": f"SELECT 1 INTO OUTFILE '{out}/o3' TRUNCATE",
        "outfile_stdout": f"SELECT 1 INTO OUTFILE '{out}/o4' AND STDOUT",
        "outfile_compressed": f"SELECT 1 INTO OUTFILE '{out}/o5.gz' COMPRESSION 'gzip' FORMAT CSV",
        "outfile_union": f"SELECT 1 UNION ALL SELECT 2 INTO OUTFILE '{out}/o6'",
        "outfile_relative": "SELECT 1 INTO OUTFILE 'user_scripts/x.sh'",
        "infile": f"INSERT INTO {db}.t FROM INFILE '/etc/passwd' FORMAT LineAsString",
        "url": "SELECT * FROM url('http://127.0.0.1:9/', CSV, 'a String')",
        "url_cluster": "SELECT * FROM urlCluster('default', 'http://127.0.0.1:9/', CSV, 'a String')",
        "executable": "SELECT * FROM executable('x.sh', TSV, 'a String')",
        "executable_pool": "SELECT * FROM executablePool('x.sh', TSV, 'a String')",
        "remote": "SELECT * FROM remote('127.0.0.1:9', system.one)",
        "remote_secure": "SELECT * FROM remoteSecure('127.0.0.1:9', system.one)",
        "cluster": "SELECT * FROM cluster('default', system.one)",
        "cluster_all": "SELECT * FROM clusterAllReplicas('default', system.one)",
        "s3": "SELECT * FROM s3('http://127.0.0.1:9/b/x.csv', CSV, 'a String')",
        "s3_cluster": "SELECT * FROM s3Cluster('default', 'http://127.0.0.1:9/b/x', CSV, 'a String')",
        "gcs": "SELECT * FROM gcs('http://127.0.0.1:9/b/x.csv', CSV, 'a String')",
        "azure": "SELECT * FROM azureBlobStorage('http://127.0.0.1:9', 'c', 'x.csv', 'acc', 'key', 'CSV')",
        "hdfs": "SELECT * FROM hdfs('hdfs://127.0.0.1:9/x', CSV, 'a String')",
        "hdfs_cluster": "SELECT * FROM hdfsCluster('default', 'hdfs://127.0.0.1:9/x', CSV, 'a String')",
        "mysql": "SELECT * FROM mysql('127.0.0.1:9', 'd', 't', 'u', 'p')",
        "postgresql": "SELECT * FROM postgresql('127.0.0.1:9', 'd', 't', 'u', 'p')",
        "mongodb": "SELECT * FROM mongodb('127.0.0.1:9', 'd', 'c', 'u', 'p', 'a String')",
        "redis": "SELECT * FROM redis('127.0.0.1:9', 'k', 'k String, v String')",
        "sqlite": f"SELECT * FROM sqlite('{out}/x.db', 't')",
        "jdbc": "SELECT * FROM jdbc('jdbc:mysql://127.0.0.1:9/d', 't')",
        "odbc": "SELECT * FROM odbc('DSN=x', 'd', 't')",
        "input": f"INSERT INTO {db}.t SELECT * FROM input('a UInt64, s String') FORMAT CSV 1,x",
        "iceberg": "SELECT * FROM iceberg('http://127.0.0.1:9/x')",
        "iceberg_local": f"SELECT * FROM icebergLocal('{out}')",
        "delta_lake": "SELECT * FROM deltaLake('http://127.0.0.1:9/x')",
        "hudi": "SELECT * FROM hudi('http://127.0.0.1:9/x')",
        "python": "SELECT * FROM python(x)",
        "dictionary_file": (
            f"CREATE DICTIONARY {db}.d (k UInt64, v String) PRIMARY KEY k "
            "SOURCE(FILE(path '/etc/passwd' format 'TSV')) LAYOUT(FLAT()) LIFETIME(0)"
        ),
        "dictionary_executable": (
            f"CREATE DICTIONARY {db}.d2 (k UInt64, v String) PRIMARY KEY k "
            "SOURCE(EXECUTABLE(command 'id' format 'TSV')) LAYOUT(FLAT()) LIFETIME(0)"
        ),
        "dictionary_remote_clickhouse": (
            f"CREATE DICTIONARY {db}.d3 (k UInt64, v String) PRIMARY KEY k "
            "SOURCE(CLICKHOUSE(host '127.0.0.1' port 9 query 'SELECT 1')) LAYOUT(FLAT()) LIFETIME(0)"
        ),
        "engine_file": f"CREATE TABLE {db}.f (a String) ENGINE = File(TSV, '{out}/f1')",
        "engine_url": f"CREATE TABLE {db}.u (a String) ENGINE = URL('http://127.0.0.1:9/', CSV)",
        "engine_s3": f"CREATE TABLE {db}.s (a String) ENGINE = S3('http://127.0.0.1:9/b/x', CSV)",
        "engine_filelog": f"CREATE TABLE {db}.fl (a String) ENGINE = FileLog('{out}', 'CSV')",
        "engine_rocksdb": (
            f"CREATE TABLE {db}.r (k String, v String) ENGINE = EmbeddedRocksDB(0, '{out}/r') "
            "PRIMARY KEY k"
        ),
        "engine_executable": f"CREATE TABLE {db}.e (a String) ENGINE = Executable('x.sh', TSV)",
        "engine_distributed": f"CREATE TABLE {db}.di (a UInt64) ENGINE = Distributed('default', {db}, t)",
        "create_as_table_function": f"CREATE TABLE {db}.ct AS url('http://127.0.0.1:9/', CSV, 'a String')",
        "create_default_file": f"CREATE TABLE {db}.cd (a String DEFAULT file('/etc/passwd')) ENGINE = Memory",
        "create_view_file": f"CREATE VIEW {db}.v AS SELECT * FROM file('/etc/passwd', 'LineAsString')",
        "create_function_file": "CREATE FUNCTION rs_readf AS (p) -> file(p)",
        "custom_disk": (
            f"CREATE TABLE {db}.dk (a UInt8) ENGINE = MergeTree ORDER BY a "
            f"SETTINGS disk = disk(type = local, path = '{out}/disk/')"
        ),
        "storage_policy": f"ALTER TABLE {db}.t MODIFY SETTING storage_policy = 'x'",
        "database_filesystem": f"CREATE DATABASE {db}_fs ENGINE = Filesystem('/etc')",
        "database_sqlite": f"CREATE DATABASE {db}_sq ENGINE = SQLite('{out}/x.db')",
        "values_smuggle_file": f"INSERT INTO {db}.t (s) VALUES (file('/etc/passwd'))",
        "values_smuggle_statement": f"INSERT INTO {db}.t VALUES (1, 'x'); DROP TABLE {db}.t",
        "multi_statement": f"SELECT 1; DROP TABLE {db}.t",
        "multi_statement_format": f"SELECT 1 FORMAT TSV; DROP TABLE {db}.t",
        "system_flush": "SYSTEM FLUSH LOGS",
        "system_shutdown": "SYSTEM SHUTDOWN",
        "system_reload": "SYSTEM RELOAD CONFIG",
        "attach": f"ATTACH TABLE {db}.at FROM '{out}/x' (a Int) ENGINE = Memory",
        "detach": f"DETACH TABLE {db}.t",
        "backup": f"BACKUP TABLE {db}.t TO File('{out}/b.zip')",
        "backup_disk": f"BACKUP TABLE {db}.t TO Disk('default', 'b.zip')",
        "restore": f"RESTORE TABLE {db}.t AS {db}.t2 FROM File('{out}/b.zip')",
        "named_collection": "CREATE NAMED COLLECTION rs_nc AS url = 'http://127.0.0.1:9/'",
        "setting_send_logs": "SELECT 1 SETTINGS send_logs_level = 'trace'",
        "setting_template_file": "SELECT 1 FORMAT Template SETTINGS format_template_row = '/etc/passwd'",
        "setting_schema_file": "SELECT 1 FORMAT Protobuf SETTINGS format_schema = '/etc/passwd:x'",
        "setting_errors_file": (
            f"INSERT INTO {db}.t SELECT 1, 'x' SETTINGS input_format_record_errors_file_path = '{out}/e'"
        ),
        "setting_introspection": "SELECT addressToSymbol(1) SETTINGS allow_introspection_functions = 1",
        "setting_user_memory": "SELECT 1 SETTINGS max_memory_usage_for_user = 1",
        "setting_replace_running": "SELECT 1 SETTINGS replace_running_query = 1",
        "readonly_zero": "SELECT 1 SETTINGS readonly = 0",
        "set_readonly": "SET readonly = 0",
        "log_trace": "SELECT logTrace('x')",
        "processes": "SELECT query FROM system.processes",
        "processes_quoted": "SELECT query FROM `system`.`processes`",
        "processes_merge": "SELECT * FROM merge('system', '^processes$')",
        "processlist": "SHOW PROCESSLIST",
        "query_log": "SELECT * FROM system.user_query_log",
        "query_cache": "SELECT * FROM system.query_cache",
        "errors_table": "SELECT * FROM system.errors",
        "kill_mutation": "KILL MUTATION WHERE 1",
    }


# statements a read-only user is refused as a write (164) where the host check (497) may come first
WRITES = {
    "file_write", "infile", "input", "dictionary_file", "dictionary_executable",
    "dictionary_remote_clickhouse", "engine_file", "engine_url", "engine_s3", "engine_filelog",
    "engine_rocksdb", "engine_executable", "engine_distributed", "create_as_table_function",
    "create_default_file", "create_view_file", "create_function_file", "custom_disk",
    "storage_policy", "database_filesystem", "database_sqlite", "values_smuggle_file",
    "values_smuggle_statement", "detach", "setting_errors_file",
}  # fmt: skip
# what only a read-only user is refused (an admin may read every system table, KILL MUTATION no)
READER_ONLY = {"processes", "processes_quoted", "processes_merge", "processlist", "query_log",
               "query_cache", "errors_table", "readonly_zero", "set_readonly"}  # fmt: skip
# what a user who may write may send: judged by what it does (test_statements_never_smuggle_in)
WRITER_MAY = {"values_smuggle_statement"}
PARAMS = {"param_p": "/etc/passwd", "param_x": "1"}


def _expect(name: str, who: str) -> tuple[int, ...]:
    if name.startswith("multi_statement"):
        return (62,)
    if name in ("readonly_zero", "set_readonly") and who in ("reader", "grafana"):
        return (164,)
    if who in ("reader", "grafana") and name in WRITES:
        return (164, 497)
    return (497, 164, 452)


@pytest.mark.parametrize("who", ["default", "reader", "grafana", "admin"])
@pytest.mark.parametrize("method", ["POST", "GET"])
def test_every_attack_is_refused(served: dict[str, Served], who: str, method: str) -> None:
    s = served["default"] if who == "default" else served["users"]
    before = _store_shape(s)
    names: dict[str, int] = {}
    for name, sql in attacks(s.canary, s.pwfile, s.db).items():
        if who in ("admin", "default") and (name in READER_ONLY or name in WRITER_MAY):
            continue
        got = call(s, who, sql, get=method == "GET", params=PARAMS)
        try:
            refused(got, *_expect(name, who))
        except AssertionError as e:
            raise AssertionError(f"{name} by {who} ({method}): {e}") from None
        names[name] = int(ERROR.match(got[2])[1])  # type: ignore[index]
    assert len(names) >= 80 if who in ("reader", "grafana") else len(names) >= 70
    # nothing written outside the store, the store intact, serve still answering
    assert list(s.canary.rglob("*")) == []
    assert _store_shape(s) == before
    assert call(s, "admin" if who != "default" else "default", "SELECT 41 + 1")[2] == "42\n"
    print(f"{who} {method}: {len(names)} refused: {sorted(set(names.values()))}")


def _store_shape(s: Served) -> tuple[str, str]:
    who = "admin" if s.server.config.users else "default"
    _, _, tables = call(
        s, who, f"SELECT name FROM system.tables WHERE database = '{s.db}' ORDER BY name"
    )
    _, _, rows = call(s, who, f"SELECT count(), sum(a) FROM {s.db}.t")
    return tables, rows


@pytest.mark.parametrize("who", ["default", "admin"])
def test_statements_never_smuggle_in(served: dict[str, Served], who: str) -> None:
    """What follows an INSERT's VALUES is data, never a statement; a second statement is a syntax
    error; a VALUES list reads as the engine's expressions only where the guard read them."""
    s = served["default"] if who == "default" else served["users"]
    table = f"{s.db}.smuggle_{who}"
    call(s, who, f"CREATE TABLE {table} (a UInt64, s String) ENGINE = Memory")
    status, _, text = call(s, who, f"INSERT INTO {table} VALUES (1, 'x'); DROP TABLE {table}")
    assert status in (200, 400, 500), text
    assert call(s, who, f"EXISTS TABLE {table}")[2] == "1\n"
    refused(call(s, who, f"SELECT 1; DROP TABLE {table}"), 62)
    refused(call(s, who, f"INSERT INTO {table} VALUES (2, file('/etc/passwd'))"), 497)
    refused(call(s, who, f"INSERT INTO {table} FORMAT Values (2, file('/etc/passwd'))"), 497)
    # expressions the guard read run; a VALUES list it cannot read is taken as literals only
    assert call(s, who, f"INSERT INTO {table} VALUES (3, concat('a', 'b'))")[0] == 200
    assert call(s, who, f"SELECT s FROM {table} WHERE a = 3")[2] == "ab\n"
    assert "root:" not in call(s, who, f"SELECT s FROM {table}")[2]
    call(s, who, f"DROP TABLE {table}")


def test_the_docs_grafana_user_reads_the_store_not_the_host(served: dict[str, Served]) -> None:
    s = served["users"]
    got = call(s, "grafana", f"SELECT count() FROM {s.db}.t", params={"max_execution_time": "60"})
    assert got[:1] == (200,) and got[2] == "100\n"
    for sql in (
        "SELECT * FROM file('/etc/passwd', 'LineAsString')",
        f"SELECT file('{s.pwfile}')",
        f"SELECT * FROM file('{s.pwfile}', 'LineAsString')",
        "SELECT * FROM url('http://127.0.0.1:9/', CSV, 'a String')",
    ):
        status, _, text = call(s, "grafana", sql)
        assert status == 403 and GRAFANA_PW not in text and "root:" not in text, text
    # readonly 2 changes the query's limits and formats only, never readonly or the host's
    refused(call(s, "grafana", "SELECT 1", params={"readonly": "0"}), 164)
    refused(call(s, "grafana", "SELECT 1", params={"send_logs_level": "trace"}), 497)
    refused(call(s, "grafana", "SELECT 1", params={"max_execution_time": "100000"}), 452)
    refused(call(s, "grafana", "SELECT 1", params={"join_algorithm": "hash"}), 164)
    assert (
        call(s, "grafana", "SELECT 1", params={"output_format_json_quote_64bit_integers": "0"})[0]
        == 200
    )


def test_browsers_cannot_reach_the_endpoint(served: dict[str, Served]) -> None:
    s = served["default"]  # no users: a page reaching it would own the store
    evil = "http://evil.example"
    cases = [
        {"Origin": evil},  # a cross-site fetch/form
        {"Origin": "null"},  # a sandboxed frame, file://
        {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"},  # <img src>, a link
        {"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "navigate"},  # another localhost port
        {"Sec-Fetch-Site": "none", "Content-Type": "text/plain"},  # no Origin, a simple body
        {"Sec-Fetch-Site": "none", "Content-Type": "application/x-www-form-urlencoded"},
    ]
    for headers in cases:
        for get in (False, True):
            if get and "Content-Type" in headers:
                continue
            name = refused(call(s, "default", "SELECT 1", get=get, headers=headers), 497)
            assert name == "ACCESS_DENIED", headers
    # a multipart form from a page
    boundary = "xyz"
    form = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="query"\r\n\r\nSELECT 1\r\n'
        f"--{boundary}--\r\n"
    ).encode()
    refused(
        call(s, "default", headers={"Origin": evil, "Content-Type": f"multipart/form-data; boundary={boundary}"}, body=form),
        497,
    )  # fmt: skip
    # DNS rebinding: a page served from a name that now resolves to 127.0.0.1
    refused(call(s, "default", "SELECT 1", headers={"Host": "evil.example:8123"}), 497)
    # the user's own navigation (typed URL) and real clients (no browser headers) still work
    assert call(s, "default", "SELECT 1", get=True, headers={"Sec-Fetch-Site": "none"})[2] == "1\n"
    assert call(s, "default", "SELECT 1", headers={"Content-Type": "text/plain"})[2] == "1\n"
    assert call(s, "default", "SELECT 1", headers={"Host": "localhost"})[2] == "1\n"


def test_an_allowed_origin_gets_cors_and_others_do_not(chdb_dsn: str) -> None:
    store = Store(chdb_dsn)
    server, url = _server(str(store.dsn.path), {"allowed_origins": ["https://grafana.example"]})
    try:
        s = Served(url, server, Path("/nonexistent"), Path("/nonexistent"), "default")
        status, h, body = call(
            s, "default", "SELECT 1", headers={"Origin": "https://grafana.example"}
        )
        assert (status, body) == (200, "1\n") and h[
            "access-control-allow-origin"
        ] == "https://grafana.example"
        refused(
            call(s, "default", "SELECT 1", headers={"Origin": "https://grafana.example.evil"}), 497
        )
    finally:
        server.stop()
        server.engine.close()


def _long_query(
    s: Served, who: str, qid: str, out: dict[str, object], seconds: int = 20, sql: str = ""
) -> threading.Thread:
    sql = sql or (
        f"SELECT sleepEachRow(0.5), {{secret:String}} FROM numbers({seconds * 2}) "
        "SETTINGS max_block_size = 1"
    )

    def run() -> None:
        out[qid] = call(s, who, sql, params={"query_id": qid, "param_secret": "TopSecret-42"})

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _running(s: Served, qid: str, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if qid in s.server.running.by_id:
            return True
        time.sleep(0.05)
    return False


def test_other_users_queries_are_neither_visible_nor_killable(served: dict[str, Served]) -> None:
    s = served["users"]
    out: dict[str, object] = {}
    qid = f"grafana-{uuid.uuid4().hex[:8]}"
    t = _long_query(s, "grafana", qid, out)
    assert _running(s, qid)
    # another read-only user sees neither the query nor its parameter
    for sql in ("SELECT query FROM system.processes", "SHOW PROCESSLIST",
                "SELECT * FROM system.user_query_log"):  # fmt: skip
        status, _, text = call(s, "other", sql)
        assert status == 403 and "TopSecret-42" not in text and qid not in text
    # ... and cannot kill it, whatever the condition: KILL finds the user's own queries only
    for cond in ("1", f"query_id = '{qid}'", "user = 'grafana'"):
        status, _, text = call(s, "other", f"KILL QUERY WHERE {cond} SYNC")
        assert status == 200 and qid not in text, text
    assert qid in s.server.running.by_id
    # the owner can, by the query_id its client gave (passed through to serve's registry)
    status, _, text = call(
        s, "grafana", f"KILL QUERY WHERE query_id = '{qid}' SYNC FORMAT JSONEachRow"
    )
    assert status == 200 and json.loads(text)["query_id"] == qid
    t.join(30)
    got = out[qid]
    assert isinstance(got, tuple)
    refused(got, 394)  # QUERY_WAS_CANCELLED
    assert got[1]["x-clickhouse-query-id"] == qid


def test_a_query_id_runs_once_and_comes_back(served: dict[str, Served]) -> None:
    s = served["users"]
    qid = f"mine-{uuid.uuid4().hex[:8]}"
    got = call(s, "admin", "SELECT 1", params={"query_id": qid})
    assert got[1]["x-clickhouse-query-id"] == qid
    out: dict[str, object] = {}
    t = _long_query(s, "admin", qid, out, seconds=4)
    assert _running(s, qid)
    refused(call(s, "reader", "SELECT 1", params={"query_id": qid}), 216)
    call(s, "admin", f"KILL QUERY WHERE query_id = '{qid}'")
    t.join(30)


def test_a_client_that_goes_away_has_its_query_cancelled(served: dict[str, Served]) -> None:
    s = served["users"]
    qid = f"gone-{uuid.uuid4().hex[:8]}"
    host, port = s.url.removeprefix("http://").split(":")
    auth = base64.b64encode(b"admin:adm-pw").decode()
    sql = urllib.parse.quote(
        "SELECT sleepEachRow(0.5) FROM numbers(60) SETTINGS max_block_size = 1, "
        "function_sleep_max_microseconds_per_block = 0"
    )
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            f"GET /?query={sql}&query_id={qid} HTTP/1.1\r\nHost: {host}\r\n"
            f"Authorization: Basic {auth}\r\n\r\n".encode()
        )
        assert _running(s, qid)
    t0 = time.monotonic()
    while qid in s.server.running.by_id and time.monotonic() - t0 < 10:
        time.sleep(0.05)
    assert qid not in s.server.running.by_id  # cancelled, not left to run its 30 s
    # nothing of it left in the engine either
    _, _, text = call(
        s,
        "admin",
        "SELECT count() FROM system.processes WHERE Settings['log_comment'] LIKE 'railscope-serve:%' AND query NOT LIKE '%system.processes%'",
    )
    assert text == "0\n"


def test_limits_per_user(served: dict[str, Served]) -> None:
    s = served["users"]
    # result rows, memory: the engine's own limits on the query
    refused(call(s, "reader", "SELECT number FROM numbers(5000)"), 396)
    refused(call(s, "reader", "SELECT groupArray(number) FROM numbers(50000000)"), 241)
    # a user may lower a limit, never raise it
    assert (
        call(
            s,
            "admin",
            "SELECT getSetting('max_execution_time')",
            params={"max_execution_time": "7"},
        )[2]
        == "7\n"
    )
    refused(call(s, "admin", "SELECT 1", params={"max_memory_usage": "0"}), 452)
    refused(call(s, "admin", "SELECT 1 SETTINGS max_execution_time = 1000000"), 452)
    # concurrent queries: reader has 2
    out: dict[str, object] = {}
    # (a readonly 1 user changes no setting: one block sleeping 2.5 s)
    threads = [
        _long_query(s, "reader", f"ro-{i}-{uuid.uuid4().hex[:6]}", out, sql="SELECT sleep(2.5)")
        for i in range(2)
    ]
    deadline = time.monotonic() + 5
    while s.server._per_user.by_user.get("reader", 0) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert call(s, "admin", "SELECT 1")[2] == "1\n"  # another user is not held up
    # over the cap a query waits for one of the user's own (serve.queue_max_wait), then runs
    t0 = time.monotonic()
    assert call(s, "reader", "SELECT 1")[2] == "1\n"
    assert time.monotonic() - t0 >= 0.5
    for t in threads:
        t.join(30)
    # ... and is refused only after the wait
    wait = s.server.config.queue_max_wait
    s.server.config.queue_max_wait = 0.5
    try:
        threads = [
            _long_query(s, "reader", f"ro-{i}-{uuid.uuid4().hex[:6]}", out, sql="SELECT sleep(2.5)")
            for i in range(2)
        ]
        deadline = time.monotonic() + 5
        while s.server._per_user.by_user.get("reader", 0) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        t0 = time.monotonic()
        refused(call(s, "reader", "SELECT 1"), 202)
        assert time.monotonic() - t0 >= 0.4
        for t in threads:
            t.join(30)
    finally:
        s.server.config.queue_max_wait = wait
    assert call(s, "reader", "SELECT 1")[2] == "1\n"


def test_database_is_an_identifier_applied_after_the_settings(served: dict[str, Served]) -> None:
    s = served["users"]
    refused(call(s, "admin", "SELECT 1", params={"database": "x`; DROP TABLE t; --"}), 36)
    refused(call(s, "admin", "SELECT 1", params={"database": "a b"}), 36)
    # a read-only user with database=system still cannot read processes by its bare name
    refused(call(s, "reader", "SELECT * FROM processes", params={"database": "system"}), 497)
    assert (
        call(s, "reader", "SELECT count() > 0 FROM tables", params={"database": "system"})[2]
        == "1\n"
    )
    assert call(s, "admin", "SELECT currentDatabase()", params={"database": s.db})[2] == f"{s.db}\n"


def test_failed_logins_answer_alike_and_are_throttled(
    served: dict[str, Served], caplog: pytest.LogCaptureFixture
) -> None:
    s = served["users"]
    AUTH["wrong"] = ("admin", "nope")
    AUTH["unknown"] = ("nobody-here", "nope")
    try:
        a = call(s, "wrong", "SELECT 1")
        b = call(s, "unknown", "SELECT 1")
        assert refused(a, 516) == refused(b, 516) == "AUTHENTICATION_FAILED"
        assert a[2].replace("admin", "X") == b[2].replace("nobody-here", "X")
        for _ in range(12):
            call(s, "wrong", "SELECT 1")
        t0 = time.monotonic()
        for _ in range(3):  # past 10 failures a minute: one check per second
            refused(call(s, "wrong", "SELECT 1"), 516)
        assert time.monotonic() - t0 >= 2.0
    finally:
        AUTH.pop("wrong")
        AUTH.pop("unknown")
    lines = [r.getMessage() for r in caplog.records if "failed login" in r.getMessage()]
    assert lines and len(lines) <= 10
    assert all("nope" not in m and "nobody-here" not in m for m in lines)


def test_bodies_held_at_once_are_bounded(chdb_dsn: str) -> None:
    store = Store(chdb_dsn)
    server, url = _server(
        str(store.dsn.path), {"max_buffered_bytes": "2MiB", "max_request_bytes": "1MiB"}
    )
    server.reader.body_wait = 1.0
    host, port = url.removeprefix("http://").split(":")
    socks = []
    try:
        for _ in range(2):  # two 1 MiB bodies announced, sent slowly: the budget is full
            sk = socket.create_connection((host, int(port)))
            sk.sendall(
                f"POST /?query=INSERT%20INTO%20nowhere%20FORMAT%20CSV HTTP/1.1\r\nHost: {host}\r\n"
                f"Content-Length: {1 << 20}\r\n\r\n".encode()
                + b"1\n" * 10
            )
            socks.append(sk)
        time.sleep(0.3)
        s = Served(url, server, Path("/x"), Path("/x"), "default")
        refused(
            call(
                s, "default", body=b"1\n" * 1000, params={"query": "INSERT INTO nowhere FORMAT CSV"}
            ),
            241,
        )
        assert call(s, "default", "SELECT 1", get=True)[2] == "1\n"  # a GET holds no body
    finally:
        for sk in socks:
            sk.close()
        server.stop()
        server.engine.close()


def test_brotli_is_decompressed_with_a_cap(chdb_dsn: str) -> None:
    brotli = pytest.importorskip("brotli")
    store = Store(chdb_dsn)
    server, url = _server(str(store.dsn.path), {"max_request_bytes": "1MiB"})
    s = Served(url, server, Path("/x"), Path("/x"), "default")
    try:
        bomb = brotli.compress(b"SELECT 1 -- " + b"x" * (64 << 20))  # 64 MiB from ~100 bytes
        assert len(bomb) < 10_000
        refused(call(s, "default", body=bomb, headers={"Content-Encoding": "br"}), 229)
        ok = brotli.compress(b"SELECT 7")
        assert call(s, "default", body=ok, headers={"Content-Encoding": "br"})[2] == "7\n"
    finally:
        server.stop()
        server.engine.close()


@pytest.mark.parametrize("who", ["default", "admin", "reader"])
def test_the_engines_own_work_is_never_killable(served: dict[str, Served], who: str) -> None:
    """A collector's insert on the engine (its own handle, as serve's sinks have) runs through
    every user's KILL QUERY, whatever the condition."""
    import chdb

    s = served["default"] if who == "default" else served["users"]
    table = f"{s.db}.collector_{who}"
    conn = chdb.connect(s.server.engine.path)
    done: list[object] = []

    def collector() -> None:
        try:
            conn.query(f"CREATE TABLE {table} (a UInt64) ENGINE = MergeTree ORDER BY a")
            conn.query(
                f"INSERT INTO {table} SELECT number + sleepEachRow(0.2) * 0 FROM numbers(10) "
                "SETTINGS max_block_size = 1"
            )
            done.append("ok")
        except Exception as e:
            done.append(e)

    t = threading.Thread(target=collector, daemon=True)
    t.start()
    time.sleep(0.5)  # the insert is running
    for cond in ("1", "query LIKE '%INSERT%'", "user = 'default'"):
        status, _, text = call(s, who, f"KILL QUERY WHERE {cond} SYNC")
        assert status == 200 and "INSERT" not in text, text
    t.join(30)
    conn.close()
    assert done == ["ok"], done
    assert (
        call(s, "admin" if who != "default" else "default", f"SELECT count() FROM {table}")[2]
        == "10\n"
    )
