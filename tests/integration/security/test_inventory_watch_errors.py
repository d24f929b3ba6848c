"""An inventory watch that gets ERROR 500 events backs off and re-lists that resource alone, then
converges; the other resources keep watching; while it is down its collector reads failure.
Against the aiohttp list+watch API server of tests/integration/inventory (a subclass whose Pod
watch answers with a Status ERROR event, as kube-apiserver does when etcd is in trouble)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from aiohttp import web

from exporters.inventory.source import InventorySource
from tests.integration.inventory.fake_kube import FakeKube
from tests.integration.inventory.test_watch import api, kubeconfig, pod, until  # noqa: F401


def fail_watches(k: FakeKube, fail: dict[str, int]) -> None:
    """The next `fail[kind]` watch requests of a kind get `ERROR 500` and end (the instance's
    `_watch` is looked up per request)."""
    real = k._watch

    async def watch(kind: str, request: web.Request, q: dict[str, str]) -> web.StreamResponse:
        if not fail.get(kind):
            return await real(kind, request, q)
        fail[kind] -= 1
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        status = {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                  "message": "etcdserver: request timed out", "reason": "InternalError",
                  "code": 500}  # fmt: skip
        await resp.write((json.dumps({"type": "ERROR", "object": status}) + "\n").encode())
        await resp.write_eof()
        return resp

    k._watch = watch  # type: ignore[method-assign]


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


async def test_watch_error_500_backs_off_relists_and_converges(
    api: tuple[FakeKube, str],  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    k, url = api
    await k.put(node("gpu-1"))
    await k.put(pod("a", "10.0.0.1"))
    fail = {"Pod": 2}  # the first two Pod watches fail
    fail_watches(k, fail)
    cfg = InventorySource.Config(
        kubeconfig=kubeconfig(tmp_path, url, k.token), resources=["Node", "Pod"]
    )
    src = InventorySource(config=cfg, store=None, cluster="default")
    rows: dict[str, list[dict[str, Any]]] = {}

    def collect() -> None:
        for b in src.collect():
            rows.setdefault(b.kind.name, []).extend(b.table.to_pylist())

    try:
        collect()
        await until(lambda: src.watcher is not None and "Pod" in src.watcher.down, "Pod down")
        w = src.watcher
        assert w is not None
        assert src.stats.collectors["watch_Pod"] == (0.0, False)
        assert "Pod (api_500" in (w.health() or "")
        assert src.stats.errors.get("api_500", 0) >= 1
        # while Pod is down, Node keeps watching: a new node arrives by its watch, no re-list
        node_rv = await k.put(node("gpu-2"))
        await k.put(pod("b", "10.0.0.2"))
        await until(lambda: w.resource_versions.get("Node") == str(node_rv), "Node event")
        # Pod: re-listed after each ERROR with backoff, then watching again
        await until(lambda: "Pod" not in w.down and fail["Pod"] == 0, "Pod recovers", 60)
        await until(lambda: w.resource_versions.get("Pod") == str(k.rv), "Pod in step")
        await k.put(pod("c", "10.0.0.3"))
        await until(lambda: w.resource_versions.get("Pod") == str(k.rv), "Pod event after")
        collect()
    finally:
        src.close()
    assert w.relists == {"Node": 1, "Pod": 3}
    assert len(k.list_requests("Node")) == 1
    assert src.stats.collectors["watch_Pod"] == (0.0, True) and w.health() is None
    leases = {r["pod"] for r in rows.get("pod_ip_lease", [])}
    assert leases >= {"a", "b", "c"}
    assert {r["node"] for r in rows.get("node", [])} >= {"gpu-1", "gpu-2"}
    await asyncio.sleep(0)


async def test_healthz_fails_while_the_api_server_is_down_and_recovers(tmp_path: Path) -> None:
    """/healthz of a pipeline running the inventory: 200 while watching, 503 naming the
    resources once the API server is stopped, 200 again when it is back on the same port."""
    import urllib.error
    import urllib.request

    from telemetry.pipeline import Pipeline
    from telemetry.sinks.prometheus import PrometheusSink

    k = FakeKube()
    await k.put(node("gpu-1"))
    await k.put(pod("a", "10.0.0.1"))

    async def serve(port: int = 0) -> tuple[web.AppRunner, int]:
        runner = web.AppRunner(k.app())
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", port)
        await site.start()
        return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    runner, port = await serve()
    cfg = InventorySource.Config(
        kubeconfig=kubeconfig(tmp_path, f"http://127.0.0.1:{port}", k.token),
        resources=["Node", "Pod"],
    )
    src = InventorySource(config=cfg, store=None, cluster="default")
    pipeline = Pipeline([src], [])
    prom = PrometheusSink(health=pipeline.health)
    host, mport = prom.serve("127.0.0.1", 0)

    async def healthz() -> tuple[int, str]:
        def get() -> tuple[int, str]:
            try:
                with urllib.request.urlopen(f"http://{host}:{mport}/healthz", timeout=5) as r:
                    return r.status, r.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, e.read().decode()

        return await asyncio.get_running_loop().run_in_executor(None, get)

    async def until_health(status: int, what: str, timeout: float = 30) -> str:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            code, body = await healthz()
            if code == status:
                return body
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"timed out waiting for {what}: {code} {body}")
            await asyncio.sleep(0.2)

    try:
        pipeline.run_once()
        await until(lambda: src.watcher is not None, "the watcher")
        w = src.watcher
        assert w is not None
        await until(lambda: set(w.resource_versions) == {"Node", "Pod"} and not w.down, "watching")
        assert await healthz() == (200, "ok\n") and src.health() is None
        k.drop_watches()
        await runner.cleanup()  # the API server is gone
        body = await until_health(503, "unhealthy")
        assert body.startswith("inventory: watch down: ") and "connection" in body, body
        assert "Node (" in body or "Pod (" in body
        runner, _ = await serve(port)  # back, same address
        await until_health(200, "healthy again")
        assert src.health() is None
    finally:
        prom.close()
        src.close()
        await runner.cleanup()
