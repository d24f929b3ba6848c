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

from exporters.inventory import InventorySource
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
        await until(lambda: "Pod" not in w.down and fail["Pod"] == 0, "Pod recovers", 20)
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
