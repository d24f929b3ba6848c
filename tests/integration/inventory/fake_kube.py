"""A small Kubernetes API server (aiohttp) that speaks list+watch the way kube-apiserver does:
paginated lists (limit/continue) with a list resourceVersion, chunked watch streams of JSON
events from a resourceVersion, BOOKMARK events, `410 Gone` as an ERROR event once history is
compacted, bearer-token auth, and connections the test can cut."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

PATHS = {
    "Namespace": "/api/v1/namespaces",
    "Node": "/api/v1/nodes",
    "Pod": "/api/v1/pods",
    "HyperNode": "/apis/topology.volcano.sh/v1alpha1/hypernodes",
    "Job": "/apis/batch.volcano.sh/v1alpha1/jobs",
    "PodGroup": "/apis/scheduling.volcano.sh/v1beta1/podgroups",
    "Queue": "/apis/scheduling.volcano.sh/v1beta1/queues",
    "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses",
    "ResourceQuota": "/api/v1/resourcequotas",
    "Event": "/api/v1/events",
}


def selected(obj: dict[str, Any], field_selector: str) -> bool:
    """kube-apiserver's equality field selectors (`a.b=c,d!=e`) on an object."""
    for term in filter(None, field_selector.split(",")):
        neg = "!=" in term
        path, want = term.split("!=" if neg else "=", 1)
        got: Any = obj
        for part in path.split("."):
            got = got.get(part) if isinstance(got, dict) else None
        if (str(got or "") == want) == neg:
            return False
    return True


@dataclass
class FakeKube:
    token: str = "secret-token"
    rv: int = 100
    objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = field(
        default_factory=lambda: {k: {} for k in PATHS}
    )
    history: list[tuple[int, str, str, dict[str, Any]]] = field(
        default_factory=list
    )  # rv, kind, type, obj
    compacted: int = 0  # watches from an RV below this get 410 Gone
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    _watches: dict[int, web.Request] = field(default_factory=dict)
    _bookmarks: int = 0

    # -- test controls ------------------------------------------------------------------------
    async def put(self, obj: dict[str, Any], etype: str | None = None) -> int:
        kind = obj["kind"]
        meta = obj.setdefault("metadata", {})
        key = (meta.get("namespace", ""), meta["name"])
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        etype = etype or ("MODIFIED" if key in self.objects[kind] else "ADDED")
        if etype == "DELETED":
            self.objects[kind].pop(key, None)
        else:
            self.objects[kind][key] = json.loads(json.dumps(obj))
        self.history.append((self.rv, kind, etype, json.loads(json.dumps(obj))))
        return self.rv

    async def delete(self, kind: str, name: str, namespace: str = "") -> int:
        obj = dict(self.objects[kind][(namespace, name)])
        return await self.put(obj, "DELETED")

    async def bookmark(self) -> int:
        """Advance the RV without a change to the watched kinds and send a BOOKMARK."""
        self.rv += 1
        self._bookmarks = self.rv
        return self.rv

    def compact(self) -> None:
        self.compacted = self.rv + 1

    def drop_watches(self) -> None:
        """Cut every open watch connection (as a load balancer or apiserver restart would)."""
        for req in list(self._watches.values()):
            if req.transport is not None:
                req.transport.close()
        self._watches.clear()

    def watch_requests(self, kind: str) -> list[dict[str, str]]:
        return [q for p, q in self.requests if p == PATHS[kind] and q.get("watch") == "true"]

    def list_requests(self, kind: str) -> list[dict[str, str]]:
        return [q for p, q in self.requests if p == PATHS[kind] and q.get("watch") != "true"]

    # -- HTTP ---------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application()
        for kind, path in PATHS.items():
            app.router.add_get(path, self._handler(kind))
        return app

    def _handler(self, kind: str) -> Any:
        async def handle(request: web.Request) -> web.StreamResponse:
            if request.headers.get("Authorization") != f"Bearer {self.token}":
                return web.json_response(
                    {"kind": "Status", "code": 401, "reason": "Unauthorized"}, status=401
                )
            q = dict(request.query)
            self.requests.append((request.path, q))
            if q.get("watch") == "true":
                return await self._watch(kind, request, q)
            return self._list(kind, q)

        return handle

    def _list(self, kind: str, q: dict[str, str]) -> web.Response:
        items = [
            self.objects[kind][k]
            for k in sorted(self.objects[kind])
            if selected(self.objects[kind][k], q.get("fieldSelector", ""))
        ]
        limit = int(q.get("limit") or 0) or len(items) or 1
        start, list_rv = 0, self.rv
        if q.get("continue"):
            start, list_rv = (int(x) for x in q["continue"].split(":"))
        page = items[start : start + limit]
        nxt = f"{start + limit}:{list_rv}" if start + limit < len(items) else ""
        meta = {"resourceVersion": str(list_rv)}
        if nxt:
            meta["continue"] = nxt
        return web.json_response(
            {
                "kind": f"{kind}List",
                "apiVersion": "v1",
                "metadata": meta,
                "items": [
                    {k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in page
                ],
            }
        )

    async def _watch(
        self, kind: str, request: web.Request, q: dict[str, str]
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        since = int(q.get("resourceVersion") or 0)

        async def send(ev: dict[str, Any]) -> None:
            await resp.write((json.dumps(ev) + "\n").encode())

        if since < self.compacted:
            await send(
                {
                    "type": "ERROR",
                    "object": {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "message": f"too old resource version: {since} ({self.compacted})",
                        "reason": "Expired",
                        "code": 410,
                    },
                }
            )
            await resp.write_eof()
            return resp
        self._watches[id(request)] = request
        sent_bookmark = self._bookmarks
        try:
            deadline = asyncio.get_running_loop().time() + int(q.get("timeoutSeconds") or 60)
            while True:
                for rv, k, etype, obj in self.history:
                    if k == kind and rv > since:
                        since = rv
                        if not selected(obj, q.get("fieldSelector", "")):
                            continue
                        await send({"type": etype, "object": obj})
                if self._bookmarks > sent_bookmark and q.get("allowWatchBookmarks") == "true":
                    sent_bookmark = self._bookmarks
                    since = max(since, self._bookmarks)
                    await send(
                        {
                            "type": "BOOKMARK",
                            "object": {
                                "kind": kind,
                                "apiVersion": "v1",
                                "metadata": {"resourceVersion": str(self._bookmarks)},
                            },
                        }
                    )
                if asyncio.get_running_loop().time() >= deadline:
                    break
                if request.transport is None or request.transport.is_closing():
                    return resp  # cut by drop_watches() or by the client
                await asyncio.sleep(0.02)
        except (ConnectionResetError, ConnectionError):
            return resp
        finally:
            self._watches.pop(id(request), None)
        await resp.write_eof()
        return resp
