"""`railscope serve`'s ClickHouse HTTP endpoint with real clients: clickhouse-connect and curl.

Every statement runs in the embedded engine; these tests check the protocol around it (formats,
INSERT data in the body, compression, headers, errors, users) and that bad input leaves the
server serving.
"""

from __future__ import annotations

import gzip
import io
import json
import socket
import subprocess
import threading
import time
from pathlib import Path

import clickhouse_connect
import pyarrow as pa

from tests.integration.serve.conftest import LIMIT, Endpoint


def curl(
    ep: Endpoint, tmp_path: Path, *args: str, path: str = "/"
) -> tuple[int, dict[str, str], bytes]:
    """Run curl against the endpoint; returns (status, headers, body)."""
    hdr, out = tmp_path / "h.txt", tmp_path / "b.bin"
    r = subprocess.run(
        ["curl", "-sS", "-D", str(hdr), "-o", str(out), "-w", "%{http_code}", *args, ep.url + path],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    headers = {}
    for line in hdr.read_text().splitlines()[1:]:
        k, sep, v = line.partition(":")
        if sep:
            headers[k.strip().lower()] = v.strip()
    return int(r.stdout), headers, out.read_bytes()


def admin(ep: Endpoint, database: str, **kw) -> clickhouse_connect.driver.Client:  # type: ignore[no-untyped-def]
    return clickhouse_connect.get_client(
        host=ep.host,
        port=ep.port,
        username="admin",
        password="s3cret",
        database=database,
        autogenerate_session_id=False,
        **kw,
    )


def test_clickhouse_connect_tables_inserts_and_formats(endpoint: Endpoint, database: str) -> None:
    c = admin(endpoint, database)
    assert c.server_version.count(".") >= 2  # handshake: SELECT version(), timezone() + settings
    # DDL has no result set (a summary), an empty SELECT has one (""): told apart by the headers
    assert not isinstance(c.command("CREATE TABLE e (a UInt8) ENGINE = Memory"), str)
    assert c.command("SELECT a FROM e") == ""
    c.command(
        "CREATE TABLE t (k UInt32, v String, tag LowCardinality(String), ver UInt32) "
        "ENGINE = ReplacingMergeTree(ver) ORDER BY k "
        "SETTINGS non_replicated_deduplication_window = 100"
    )
    rows = [[i, f"v{i}", "a" if i % 2 else "b", 1] for i in range(1000)]
    summary = c.insert(
        "t",
        rows,
        column_names=["k", "v", "tag", "ver"],
        settings={"insert_deduplication_token": "b1"},
    )
    assert summary.written_rows == 1000
    # a retried batch with the same token is dropped by the engine
    c.insert(
        "t",
        rows,
        column_names=["k", "v", "tag", "ver"],
        settings={"insert_deduplication_token": "b1"},
    )
    assert c.query("SELECT count() FROM t").result_rows == [(1000,)]
    # a newer version of one key: FINAL keeps only it
    c.insert("t", [[7, "new", "a", 2]], column_names=["k", "v", "tag", "ver"])
    assert c.query("SELECT count() FROM t").result_rows == [(1001,)]
    assert c.query("SELECT v FROM t FINAL WHERE k = 7").result_rows == [("new",)]
    # Native (clickhouse-connect's default), Arrow and parameters
    got = c.query("SELECT k, tag FROM t FINAL WHERE k < {n:UInt32} ORDER BY k", parameters={"n": 3})
    assert got.result_rows == [(0, "b"), (1, "a"), (2, "b")]
    table = c.query_arrow("SELECT k, v FROM t FINAL ORDER BY k")
    assert isinstance(table, pa.Table) and table.num_rows == 1000
    assert table.column("v")[7].as_py() == "new"
    raw = c.raw_query("SELECT k FROM t FINAL ORDER BY k LIMIT 5", fmt="ArrowStream")
    assert pa.ipc.open_stream(raw).read_all().column("k").to_pylist() == [0, 1, 2, 3, 4]
    # an Arrow table in, through clickhouse-connect's insert_arrow (an ArrowStream body)
    c.insert_arrow(
        "t",
        pa.table(
            {
                "k": pa.array([5000], pa.uint32()),
                "v": ["arrow"],
                "tag": ["c"],
                "ver": pa.array([1], pa.uint32()),
            }
        ),
    )
    assert c.query("SELECT v FROM t WHERE k = 5000").result_rows == [("arrow",)]
    # parameters ride in the URL: far past aiohttp's default 8 KiB request line
    big = "x" * 50_000
    assert c.command("SELECT length({s:String})", parameters={"s": big}) == 50_000
    # a long query goes as a multipart form
    long_list = ",".join(str(i) for i in range(3000))
    assert c.query(f"SELECT count() FROM t WHERE k IN ({long_list})").result_rows == [(1001,)]


def test_clickhouse_connect_compression_both_ways(endpoint: Endpoint, database: str) -> None:
    for codec in ("lz4", "zstd", "gzip"):
        c = admin(endpoint, database, compress=codec)
        c.command("CREATE TABLE IF NOT EXISTS z (a UInt64, s String) ENGINE = MergeTree ORDER BY a")
        c.insert("z", [[i, "x" * 50] for i in range(5000)], column_names=["a", "s"])
        assert c.query("SELECT count(), sum(a) FROM z").result_rows[0][1] > 0
        assert len(c.query("SELECT a, s FROM z").result_rows) == 5000
        c.command("TRUNCATE TABLE z")


def test_curl_get_post_insert_and_gzip(endpoint: Endpoint, database: str, tmp_path: Path) -> None:
    auth = ("-u", "admin:s3cret")
    db = f"database={database}"
    gz = tmp_path / "in.gz"
    gz.write_bytes(gzip.compress(b"INSERT INTO c VALUES (4, 'four')"))
    writes = [
        ("--data-binary", "CREATE TABLE c (a UInt8, b String) ENGINE = MergeTree ORDER BY a"),
        # INSERT with the query in the URL and CSV in the body
        ("--data-binary", "1,one\n2,two\n", "query=INSERT%20INTO%20c%20FORMAT%20CSV"),
        # INSERT with statement and data both in the body
        ("--data-binary", "INSERT INTO c FORMAT TabSeparated\n3\tthree\n"),
        # a gzip-compressed request body
        ("-H", "Content-Encoding: gzip", "--data-binary", f"@{gz}"),
    ]
    for step in writes:
        query = [a for a in step if a.startswith("query=")]
        args = [a for a in step if not a.startswith("query=")]
        status, h, body = curl(endpoint, tmp_path, *auth, *args, path=f"/?{db}&{''.join(query)}")
        assert status == 200, (step, body)
        if query:
            assert json.loads(h["x-clickhouse-summary"])["written_rows"] == "2"
    # GET with the query in the URL; the default format is TabSeparated
    status, h, body = curl(
        endpoint,
        tmp_path,
        *auth,
        "-G",
        "--data-urlencode",
        "query=SELECT a, b FROM c ORDER BY a",
        path=f"/?{db}",
    )
    assert status == 200 and body == b"1\tone\n2\ttwo\n3\tthree\n4\tfour\n"
    assert h["x-clickhouse-format"] == "TabSeparated"
    assert h["content-type"].startswith("text/tab-separated-values")
    assert (
        h["x-clickhouse-query-id"]
        and h["x-clickhouse-timezone"]
        and h["x-clickhouse-server-display-name"]
    )
    # FORMAT clause and a gzip-compressed answer (curl asks with --compressed)
    status, h, body = curl(
        endpoint,
        tmp_path,
        *auth,
        "--compressed",
        "--data-binary",
        "SELECT a, b FROM c ORDER BY a FORMAT JSONEachRow",
        path=f"/?{db}&enable_http_compression=1",
    )
    assert status == 200 and h["x-clickhouse-format"] == "JSONEachRow"
    assert h.get("content-encoding") in ("gzip", "deflate", "zstd", "br")
    assert [json.loads(x)["b"] for x in body.splitlines()] == ["one", "two", "three", "four"]
    # default_format and a setting as URL parameters
    status, h, body = curl(
        endpoint,
        tmp_path,
        *auth,
        "--data-binary",
        "SELECT a FROM c ORDER BY a",
        path=f"/?{db}&default_format=CSVWithNames&max_result_rows=10",
    )
    assert (
        status == 200
        and body == b'"a"\n1\n2\n3\n4\n'
        and h["x-clickhouse-format"] == "CSVWithNames"
    )
    # X-ClickHouse-User/Key headers; a GET cannot write (ClickHouse's readonly=2)
    status, _, body = curl(
        endpoint,
        tmp_path,
        "-H",
        "X-ClickHouse-User: admin",
        "-H",
        "X-ClickHouse-Key: s3cret",
        "-G",
        "--data-urlencode",
        "query=INSERT INTO c VALUES (9, 'get')",
        path=f"/?{db}",
    )
    assert status == 500 and b"Code: 164." in body and b"(READONLY)" in body
    status, _, body = curl(
        endpoint,
        tmp_path,
        *auth,
        "-G",
        "--data-urlencode",
        "query=SELECT count() FROM c",
        path=f"/?{db}",
    )
    assert body == b"4\n"
    # the health checks
    assert curl(endpoint, tmp_path, path="/ping")[2] == b"Ok.\n"
    assert curl(endpoint, tmp_path, path="/replicas_status")[2] == b"Ok.\n"


def test_bad_input_is_a_clickhouse_error_and_the_server_keeps_serving(
    endpoint: Endpoint, database: str, tmp_path: Path
) -> None:
    auth = ("-u", "admin:s3cret")

    def alive() -> None:
        assert curl(endpoint, tmp_path, path="/ping")[2] == b"Ok.\n"

    def error(status: int, code: int, name: str, *args: str, path: str = "/") -> str:
        got, h, body = curl(endpoint, tmp_path, *args, path=path)
        text = body.decode()
        assert got == status, text
        assert h["x-clickhouse-exception-code"] == str(code)
        assert (
            text.startswith(f"Code: {code}. DB::Exception: ") and f"({name}) (version " in text
        ), text
        assert text.endswith(")\n") and text.count("\n") == 1
        alive()
        return text

    # malformed HTTP on a raw socket: a 400 from the HTTP layer, then the next request works
    with socket.create_connection((endpoint.host, endpoint.port), timeout=5) as s:
        s.sendall(b"\x16\x03\x01 NOT HTTP AT ALL\r\n\r\n")
        assert s.recv(100).split(b"\r\n")[0].endswith(b" 400 Bad Request")
    alive()
    error(404, 73, "UNKNOWN_FORMAT", *auth, "--data-binary", "SELECT 1 FORMAT NoSuchFormat")
    error(404, 60, "UNKNOWN_TABLE", *auth, "--data-binary", f"SELECT * FROM `{database}`.nope")
    error(400, 62, "SYNTAX_ERROR", *auth, "--data-binary", "SELEKT 1")
    error(
        404, 115, "UNKNOWN_SETTING", *auth, "--data-binary", "SELECT 1", path="/?no_such_setting=1"
    )
    error(400, 62, "SYNTAX_ERROR", *auth, "-X", "POST")  # an empty query
    text = error(
        403, 516, "AUTHENTICATION_FAILED", "-u", "admin:wrong", "--data-binary", "SELECT 1"
    )
    assert "admin: Authentication failed" in text
    error(
        403, 516, "AUTHENTICATION_FAILED", "--data-binary", "SELECT 1"
    )  # no user: default is not configured
    error(501, 48, "NOT_IMPLEMENTED", *auth, "--data-binary", "SELECT 1", path="/?compress=1")
    # the read-only user reads, and cannot write, create or change settings
    ro = ("-u", "reader:read-only-pw")
    got, _, body = curl(endpoint, tmp_path, *ro, "--data-binary", "SELECT 41 + 1")
    assert (got, body) == (200, b"42\n")
    create = ("--data-binary", f"CREATE TABLE `{database}`.x (a UInt8) ENGINE = Memory")
    error(500, 164, "READONLY", *ro, *create)
    error(500, 164, "READONLY", *ro, "--data-binary", "SELECT 1", path="/?max_result_rows=5")
    # readonly: 2 (what Grafana needs): settings may change, writes still may not
    gf = ("-u", "grafana:g")
    got, _, body = curl(
        endpoint,
        tmp_path,
        *gf,
        "--data-binary",
        "SELECT getSetting('max_execution_time')",
        path="/?max_execution_time=17",
    )
    assert (got, body) == (200, b"17\n")
    error(500, 164, "READONLY", *gf, *create)
    c = admin(endpoint, database)
    c.command("CREATE TABLE w (a UInt8) ENGINE = MergeTree ORDER BY a")
    error(
        500,
        164,
        "READONLY",
        *ro,
        "--data-binary",
        "1\n2\n",
        path=f"/?database={database}&query=INSERT%20INTO%20w%20FORMAT%20CSV",
    )
    assert c.query("SELECT count() FROM w").result_rows == [(0,)]
    # over the size limit, plain and as a gzip bomb
    big = tmp_path / "big.csv"
    big.write_bytes(b"1\n" * (LIMIT // 2 + 10))
    error(
        413,
        229,
        "QUERY_IS_TOO_LARGE",
        *auth,
        "--data-binary",
        f"@{big}",
        path=f"/?database={database}&query=INSERT%20INTO%20w%20FORMAT%20CSV",
    )
    bomb = tmp_path / "bomb.gz"
    bomb.write_bytes(gzip.compress(b"INSERT INTO w FORMAT CSV\n" + b"1\n" * LIMIT))
    assert bomb.stat().st_size < LIMIT
    error(
        413,
        229,
        "QUERY_IS_TOO_LARGE",
        *auth,
        "-H",
        "Content-Encoding: gzip",
        "--data-binary",
        f"@{bomb}",
        path=f"/?database={database}",
    )
    error(
        500,
        271,
        "CANNOT_DECOMPRESS",
        *auth,
        "-H",
        "Content-Encoding: gzip",
        "--data-binary",
        "not gzip",
    )
    # a bad row in an INSERT: nothing written, the engine's parse error
    got, _, body = curl(
        endpoint,
        tmp_path,
        *auth,
        "--data-binary",
        "1\nnot-a-number\n",
        path=f"/?database={database}&query=INSERT%20INTO%20w%20FORMAT%20CSV",
    )
    assert got in (400, 500) and body.startswith(b"Code: ")
    assert c.query("SELECT count() FROM w").result_rows == [(0,)]
    alive()


def test_a_slow_query_does_not_block_others(endpoint: Endpoint, tmp_path: Path) -> None:
    done: list[float] = []

    def slow() -> None:
        c = clickhouse_connect.get_client(
            host=endpoint.host, port=endpoint.port, username="admin", password="s3cret"
        )
        c.query(
            "SELECT sleepEachRow(0.5) FROM numbers(4) SETTINGS max_block_size = 1, function_sleep_max_microseconds_per_block = 0"
        )
        done.append(time.monotonic())

    t = threading.Thread(target=slow)
    t.start()
    time.sleep(0.3)
    assert curl(endpoint, tmp_path, "-u", "admin:s3cret", "--data-binary", "SELECT 1")[2] == b"1\n"
    answered = time.monotonic()
    t.join(30)
    assert done and answered < done[0]  # answered while the slow query was still running


def test_every_answer_keeps_the_engine_bytes(endpoint: Endpoint, tmp_path: Path) -> None:
    """Output formats come from the engine unchanged: Parquet and RowBinaryWithNamesAndTypes."""
    import pyarrow.parquet as pq

    def run(sql: str, path: str = "/") -> tuple[int, dict[str, str], bytes]:
        return curl(endpoint, tmp_path, "-u", "admin:s3cret", "--data-binary", sql, path=path)

    got, h, body = run("SELECT number AS n FROM numbers(3) FORMAT Parquet")
    assert got == 200 and h["content-type"] == "application/octet-stream"
    assert pq.read_table(io.BytesIO(body)).column("n").to_pylist() == [0, 1, 2]
    got, h, body = run("SELECT toUInt8(7) AS x", "/?default_format=RowBinaryWithNamesAndTypes")
    assert (
        body == b"\x01\x01x\x05UInt8\x07"
        and h["x-clickhouse-format"] == "RowBinaryWithNamesAndTypes"
    )
