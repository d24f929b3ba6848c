"""Real aiohttp servers serving Hadoop /jmx documents (built from the real captures): the scrape
discovers DataNodes from LiveNodes, runs concurrently, and names the bad endpoints (timeout,
truncated JSON, HTTP 500, refused) while the good ones are collected. TLS with a self-signed
certificate generated here."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from exporters.hdfs.config import HdfsConfig
from exporters.hdfs.source import HdfsSource
from telemetry.sinks.prometheus import render_prometheus
from tests.tls import self_signed

FIX = Path(__file__).parents[2] / "fixtures" / "hdfs"
NN_DOC = json.loads((FIX / "namenode.jmx.json").read_text())
DN_DOC = json.loads((FIX / "datanode.jmx.json").read_text())


def datanode_doc(bytes_read: int) -> dict[str, Any]:
    d = copy.deepcopy(DN_DOC)
    for b in d["beans"]:
        if "DataNodeActivity-" in b["name"]:
            b["BytesRead"] = bytes_read
            b["RemoteBytesRead"] = bytes_read // 2
    return d


def namenode_doc(live: dict[str, tuple[str, str]]) -> dict[str, Any]:
    d = copy.deepcopy(NN_DOC)
    for b in d["beans"]:
        if b["name"].endswith("name=NameNodeInfo"):
            b["LiveNodes"] = json.dumps(
                {
                    name: {
                        "infoAddr": info,
                        "infoSecureAddr": secure,
                        "xferaddr": "127.0.0.1:9866",
                        "lastContact": 1,
                    }
                    for name, (info, secure) in live.items()
                }
            )
    return d


class Servers:
    """aiohttp servers on loopback in a background event loop (the source runs its own loop)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.runners: list[web.AppRunner] = []
        self.hits: dict[str, int] = {}

    def start(
        self,
        name: str,
        handler: Callable[[web.Request], Any],
        ssl_ctx: ssl.SSLContext | None = None,
    ) -> int:
        async def wrapped(req: web.Request) -> web.StreamResponse:
            self.hits[name] = self.hits.get(name, 0) + 1
            return await handler(req)

        async def go() -> int:
            app = web.Application()
            app.router.add_get("/jmx", wrapped)
            runner = web.AppRunner(app, shutdown_timeout=0.1)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_ctx)
            await site.start()
            self.runners.append(runner)
            return int(runner.addresses[0][1])

        return asyncio.run_coroutine_threadsafe(go(), self.loop).result(10)

    def close(self) -> None:
        async def stop() -> None:
            for r in self.runners:
                await r.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


@pytest.fixture
def servers() -> Iterator[Servers]:
    s = Servers()
    yield s
    s.close()


def json_handler(doc: dict[str, Any]) -> Callable[[web.Request], Any]:
    async def h(_: web.Request) -> web.Response:
        return web.json_response(doc)

    return h


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rows_of(batches: list[Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for b in batches:
        out.setdefault(b.kind.name, []).extend(b.table.to_pylist())
    return out


def test_scrape_discovers_datanodes_and_names_the_bad_ones(
    servers: Servers, caplog: pytest.LogCaptureFixture
) -> None:
    release = asyncio.Event()

    async def slow(_: web.Request) -> web.Response:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(release.wait(), 10)  # far past the 0.5 s scrape timeout
        return web.json_response(datanode_doc(1))

    body = json.dumps(datanode_doc(5)).encode()

    async def truncated(_: web.Request) -> web.Response:
        return web.Response(body=body[: len(body) // 2], content_type="application/json")

    async def broken(_: web.Request) -> web.Response:
        return web.Response(status=500, text="java.lang.NullPointerException")

    good1 = servers.start("good1", json_handler(datanode_doc(1000)))
    good2 = servers.start("good2", json_handler(datanode_doc(2000)))
    slow_p = servers.start("slow", slow)
    trunc_p = servers.start("trunc", truncated)
    err_p = servers.start("err", broken)
    dead_p = closed_port()
    ports = {
        "dn1:9866": good1,
        "dn2:9866": good2,
        "dn3:9866": slow_p,
        "dn4:9866": trunc_p,
        "dn5:9866": err_p,
        "dn6:9866": dead_p,
    }
    nn = servers.start(
        "nn",
        json_handler(
            namenode_doc({k: (f"127.0.0.1:{p}", "127.0.0.1:0") for k, p in ports.items()})
        ),
    )
    cfg = HdfsConfig(namenodes=[f"http://127.0.0.1:{nn}"], timeout_seconds=0.5)
    src = HdfsSource(cfg)
    try:
        out = rows_of(src.collect())
    finally:
        servers.loop.call_soon_threadsafe(release.set)
    (nnrow,) = out["hdfs_namenode_sample"]
    assert (nnrow["namenode"], nnrow["up"], nnrow["under_replicated_blocks"]) == (
        f"127.0.0.1:{nn}",
        1,
        2,
    )
    dns = {r["datanode"]: r for r in out["hdfs_datanode_sample"]}
    assert set(dns) == {f"127.0.0.1:{p}" for p in ports.values()}
    assert (dns[f"127.0.0.1:{good1}"]["up"], dns[f"127.0.0.1:{good1}"]["read_bytes_total"]) == (
        1,
        1000,
    )
    assert dns[f"127.0.0.1:{good2}"]["remote_read_bytes_total"] == 1000
    bad = {p: dns[f"127.0.0.1:{p}"] for p in (slow_p, trunc_p, err_p, dead_p)}
    assert all(r["up"] == 0 and r["read_bytes_total"] is None for r in bad.values())
    assert bad[slow_p]["error"] == "timeout after 0.5s"
    assert bad[trunc_p]["error"].startswith("invalid JSON (")
    assert bad[err_p]["error"] == "HTTP 500"
    assert "ClientConnectorError" in bad[dead_p]["error"]
    # self-metrics count each kind of failure (a bounded label); the log names each endpoint
    assert src.stats.errors == {
        "jmx_timeout": 1,
        "jmx_invalid_json": 1,
        "jmx_http_error": 1,
        "jmx_unreachable": 1,
    }
    assert src.stats.failed == 4
    assert f"datanode 127.0.0.1:{slow_p}: scrape failed: timeout after 0.5s" in caplog.text
    assert f"datanode 127.0.0.1:{err_p}: scrape failed: HTTP 500" in caplog.text
    prom = render_prometheus([], [src.stats])
    assert 'reason="jmx_invalid_json"' in prom and "127.0.0.1" not in prom


def test_scrapes_run_concurrently(servers: Servers) -> None:
    n = 4
    arrived: list[int] = []
    all_here = asyncio.Event()

    async def barrier(_: web.Request) -> web.Response:
        # Each DataNode answers only once all of them have been asked: a sequential scraper
        # would see every one time out.
        arrived.append(1)
        if len(arrived) == n:
            all_here.set()
        await asyncio.wait_for(all_here.wait(), 8)
        return web.json_response(datanode_doc(len(arrived)))

    ports = [servers.start(f"dn{i}", barrier) for i in range(n)]
    cfg = HdfsConfig(datanodes=[f"http://127.0.0.1:{p}" for p in ports], timeout_seconds=10)
    out = rows_of(HdfsSource(cfg).collect())
    assert [r["up"] for r in out["hdfs_datanode_sample"]] == [1] * n


def test_tls_with_ca_file(servers: Servers, tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    sctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    sctx.load_cert_chain(cert, key)
    dn = servers.start("dn", json_handler(datanode_doc(42)), ssl_ctx=sctx)
    nn = servers.start(
        "nn",
        json_handler(namenode_doc({"dn1:9866": ("127.0.0.1:1", f"127.0.0.1:{dn}")})),
        ssl_ctx=sctx,
    )
    base = {
        "namenodes": [f"https://127.0.0.1:{nn}"],
        "datanode_scheme": "https",
        "timeout_seconds": 5,
    }
    out = rows_of(
        HdfsSource(HdfsConfig.model_validate({**base, "tls": {"ca_file": str(cert)}})).collect()
    )
    assert out["hdfs_namenode_sample"][0]["up"] == 1
    assert [
        (r["datanode"], r["up"], r["read_bytes_total"]) for r in out["hdfs_datanode_sample"]
    ] == [(f"127.0.0.1:{dn}", 1, 42)]
    # Without the CA the certificate is refused: named, not collected.
    src = HdfsSource(HdfsConfig.model_validate(base))
    out = rows_of(src.collect())
    (row,) = out["hdfs_namenode_sample"]
    assert row["up"] == 0 and "certificate verify failed" in row["error"].lower().replace("_", " ")
    assert "hdfs_datanode_sample" not in out
