"""`railscope inventory` against a list+watch API server: the store stays in step through events,
a bookmark, a dropped connection and a 410 Gone, without losing or duplicating history."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import traceback
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from exporters.inventory.source import InventorySource
from exporters.inventory.who import who_owned
from telemetry.transforms import StampCluster
from tests.conftest import now_ms
from tests.integration.inventory.fake_kube import FakeKube
from tests.k8s import pod


def kubeconfig(tmp: Path, url: str, token: str) -> str:
    p = tmp / "kubeconfig"
    p.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: fake, cluster: {{server: "{url}"}}}}]
users: [{{name: u, user: {{token: {token}}}}}]
contexts: [{{name: c, context: {{cluster: fake, user: u}}}}]
current-context: c
""")
    return str(p)


@pytest.fixture
async def api() -> AsyncIterator[tuple[FakeKube, str]]:
    kube = FakeKube()
    runner = web.AppRunner(kube.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield kube, f"http://127.0.0.1:{port}"
    kube.drop_watches()
    await runner.cleanup()


async def until(cond: Callable[[], bool], what: str, timeout: float = 45.0) -> None:
    """Wait for `cond` while the API server (this loop) serves. The timeout is generous for a
    machine where other test workers take the CPU; on expiry every thread's stack is printed
    (the watch thread's included: where it waits)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            frames = sys._current_frames()
            stacks = "".join(
                f"\n--- thread {t.name}:\n" + "".join(traceback.format_stack(frames[t.ident]))
                for t in threading.enumerate()
                if t.ident in frames
            )
            raise AssertionError(f"timed out waiting for {what}; threads:{stacks}")
        await asyncio.sleep(0.05)


async def test_store_stays_in_step_through_drop_and_410(
    api: tuple[FakeKube, str], store: Any, tmp_path: Path
) -> None:
    kube, url = api
    await kube.put(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "gpu-1", "labels": {"rack": "r0"}},
        }
    )
    await kube.put(pod("a", "10.0.0.1"))
    await kube.put(pod("b", "10.0.0.2"))
    for i in range(3):  # enough to need several list pages
        await kube.put(pod(f"idle-{i}", f"10.0.1.{i}"))
    cfg = InventorySource.Config(kubeconfig=kubeconfig(tmp_path, url, kube.token), page_size=2)
    src = InventorySource(config=cfg, store=store, cluster="default")

    def sync_store() -> None:
        for b in src.collect():
            store.insert(b.kind, StampCluster("default").process(b).table)

    try:
        sync_store()  # starts the watch thread
        await until(
            lambda: (
                src.watcher is not None and src.watcher.resource_versions.get("Pod") == str(kube.rv)
            ),
            "initial list",
        )
        assert len(kube.list_requests("Pod")) == 3  # 5 pods, pages of 2
        sync_store()

        # IP reuse through watch events
        await kube.delete("Pod", "a", "team-a")
        t_reuse = now_ms()
        await kube.put(pod("c", "10.0.0.1"))
        await until(lambda: src.watcher.resource_versions.get("Pod") == str(kube.rv), "events")
        sync_store()

        # a bookmark moves the resume point without any change
        rv = await kube.bookmark()
        await until(lambda: src.watcher.resource_versions.get("Pod") == str(rv), "bookmark")

        # dropped connection: changes made meanwhile arrive through a watch resumed from the last RV
        kube.drop_watches()
        await kube.put(pod("b", "10.0.0.2", phase="Succeeded"))
        await until(
            lambda: src.watcher.resource_versions.get("Pod") == str(kube.rv), "resume after drop"
        )
        assert [q["resourceVersion"] for q in kube.watch_requests("Pod")][-1] == str(rv)
        assert src.watcher.relists["Pod"] == 1
        sync_store()

        # 410 Gone: history compacted while disconnected; changes in the gap come from a re-list
        kube.compact()
        await kube.delete("Pod", "c", "team-a")
        await kube.put(pod("d", "10.0.0.9"))
        kube.drop_watches()
        await until(lambda: src.watcher.relists.get("Pod") == 2, "re-list after 410")
        await until(
            lambda: src.watcher.resource_versions.get("Pod") == str(kube.rv), "watch after re-list"
        )
        sync_store()
    finally:
        src.close()

    hist = store.query_rows(
        f"SELECT ip, pod, valid_to IS NULL FROM {store.table('pod_ip_lease')} FINAL "
        "WHERE ip IN ('10.0.0.1', '10.0.0.2', '10.0.0.9') ORDER BY ip, valid_from"
    )
    assert hist == [
        ("10.0.0.1", "a", False),
        ("10.0.0.1", "c", False),
        ("10.0.0.2", "b", False),
        ("10.0.0.9", "d", True),
    ]
    # idle pods: one open lease each, never repeated by the re-list
    assert store.query_rows(
        f"SELECT count(), countIf(valid_to IS NULL) FROM {store.table('pod_ip_lease')} FINAL "
        "WHERE startsWith(ip, '10.0.1.')"
    ) == [(3, 3)]
    assert store.query_rows(f"SELECT count() FROM {store.table('node')} FINAL") == [(1,)]
    got = who_owned(store, "10.0.0.1", t_reuse - 1, cluster="default")
    assert got is not None and got["pod"] == "a"
    assert who_owned(store, "10.0.0.1", now_ms(), cluster="default") is None
    assert src.watcher.missing == set()


async def test_cli_once_with_kubeconfig_then_who(api: tuple[FakeKube, str], tmp_path: Path) -> None:
    kube, url = api
    await kube.put(pod("solo", "10.3.0.4"))
    await kube.put(
        {
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": "leaf-0"},
            "spec": {
                "tier": 1,
                "members": [{"type": "Node", "selector": {"exactMatch": {"name": "gpu-1"}}}],
            },
        }
    )
    dsn = f"chdb://{tmp_path / 'store'}"
    env = {
        **os.environ,
        "RAILSCOPE_DSN": dsn,
        "RAILSCOPE__SINK__SPOOL_DIR": str(tmp_path / "spool"),
    }

    async def cli(*argv: str) -> tuple[int, str, str]:
        p = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "telemetry.cli",
            *argv,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await p.communicate()
        return p.returncode or 0, out.decode(), err.decode()

    rc, _, err = await cli(
        "inventory", "--once", "--kubeconfig", kubeconfig(tmp_path, url, kube.token)
    )
    assert rc == 0, err
    # a rejected token is a failed collection: logged with the status, no traceback, and it must
    # not be mistaken for an empty list (which would close every open fact)
    _, _, err = await cli(
        "inventory", "--once", "--kubeconfig", kubeconfig(tmp_path, url, "wrong-token")
    )
    assert "cannot list from the Kubernetes API" in err and "401" in err and "Traceback" not in err
    rc, out, err = await cli("inventory", "who", "10.3.0.4")
    assert rc == 0 and '"pod": "solo"' in out, err
    # namespaces are watched too: a tenant label names the tenant
    await kube.put(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "team-x", "labels": {"railscope.io/tenant": "acme"}},
        }
    )
    rc, out, err = await cli(
        "inventory",
        "--once",
        "--output",
        "jsonl",
        "--kubeconfig",
        kubeconfig(tmp_path, url, kube.token),
    )
    assert rc == 0, err
    ns_rows = [json.loads(line) for line in out.splitlines() if '"_kind":"namespace"' in line]
    assert [(r["namespace"], r["tenant"]) for r in ns_rows] == [("team-x", "acme")]
    rc, out, _ = await cli("inventory", "who", "10.3.0.5")
    assert rc == 1 and "no pod held it" in out


async def test_cli_live_watch_end_to_end(api: tuple[FakeKube, str], tmp_path: Path) -> None:
    """`railscope inventory --kubeconfig K` as operators run it: pipeline, ClickHouse sink, store."""
    import signal

    kube, url = api
    await kube.put(pod("a", "10.5.0.1"))
    await kube.put(pod("b", "10.5.0.2"))
    env = {
        **os.environ,
        "RAILSCOPE_DSN": f"chdb://{tmp_path / 'store'}",
        "RAILSCOPE__SINK__BATCH_SECONDS": "0.2",
        "RAILSCOPE__SINK__SPOOL_DIR": str(tmp_path / "spool"),
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "telemetry.cli",
        "inventory",
        "--kubeconfig",
        kubeconfig(tmp_path, url, kube.token),
        "--interval",
        "1",
        "--no-metrics",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await until(lambda: len(kube.watch_requests("Pod")) >= 1, "the first watch", timeout=60)
        t_listed = now_ms()
        await asyncio.sleep(0.3)
        await kube.delete("Pod", "a", "team-a")
        await asyncio.sleep(0.3)
        t_reuse = now_ms()
        await kube.put(pod("c", "10.5.0.1"))
        kube.drop_watches()  # resumed from the last RV
        await until(lambda: len(kube.watch_requests("Pod")) >= 2, "the resumed watch")
        kube.compact()
        await kube.put(pod("b", "10.5.0.2", phase="Failed"))
        kube.drop_watches()  # 410 Gone, then a re-list
        await until(lambda: len(kube.list_requests("Pod")) >= 2, "the re-list")
        await asyncio.sleep(2.5)  # one collection cycle and a sink flush
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert "Traceback" not in err.decode(), err.decode()

    # one process opens the store (the embedded engine allows one per path) and asks four times
    script = (
        "import json, sys; from telemetry.store import Store; from exporters.inventory.who import who_owned_many;"
        "q = json.loads(sys.argv[1]); s = Store(sys.argv[2]);"
        "print(json.dumps([r and r['pod'] for r in who_owned_many(s, [tuple(x) for x in q])]))"
    )
    queries = [
        ["10.5.0.1", t_listed],
        ["10.5.0.1", t_reuse - 1],
        ["10.5.0.1", now_ms()],
        ["10.5.0.2", now_ms()],
    ]
    p = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        json.dumps(queries),
        env["RAILSCOPE_DSN"],
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await p.communicate()
    # a before the reuse, nobody in the gap, c after it; b failed so its IP is free
    assert json.loads(out) == ["a", None, "c", None], err.decode()
