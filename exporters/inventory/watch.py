"""List+watch of Namespaces, Pods, Nodes, HyperNodes, Volcano Jobs, PodGroups and Queues,
PriorityClasses, ResourceQuotas, pod Events and (when configured) ConfigMaps through
kubernetes-asyncio.

Reads the Kubernetes API (kubeconfig or in-cluster service account) and feeds `InventoryState`.
Watch semantics: resume from the last resourceVersion (bookmarks included) after a dropped
connection; re-list on 410 Gone, and after a backoff on any other ERROR event or failure, per
resource: one resource failing never stops the others. While a resource's watch is down its
collector (`railscope_collector_success{collector="watch_<Kind>"}`) reads 0. It never writes to
the API.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from exporters.inventory.state import InventoryState
from telemetry.contracts import ComponentStats
from telemetry.errors import UserError
from telemetry.problems import Problems

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Resource:
    kind: str
    path: str
    field_selector: str = ""  # narrows what the API sends (events: pods only)

    def query(self) -> list[tuple[str, Any]]:
        return [("fieldSelector", self.field_selector)] if self.field_selector else []

    @property
    def api_version(self) -> str:
        """group/version from the path (`v1` for the core group): list items of built-in kinds
        come without apiVersion and kind, and a Job is read by its group."""
        parts = self.path.split("/")
        return parts[2] if parts[1] == "api" else f"{parts[2]}/{parts[3]}"


RESOURCES: tuple[Resource, ...] = (
    Resource("Namespace", "/api/v1/namespaces"),
    Resource("Node", "/api/v1/nodes"),
    Resource("ConfigMap", "/api/v1/configmaps"),  # opt-in: resolves pods' NCCL settings
    Resource("Pod", "/api/v1/pods"),
    Resource("HyperNode", "/apis/topology.volcano.sh/v1alpha1/hypernodes"),
    Resource("Job", "/apis/batch.volcano.sh/v1alpha1/jobs"),
    Resource("PodGroup", "/apis/scheduling.volcano.sh/v1beta1/podgroups"),
    Resource("Queue", "/apis/scheduling.volcano.sh/v1beta1/queues"),
    Resource("PriorityClass", "/apis/scheduling.k8s.io/v1/priorityclasses"),
    Resource("ResourceQuota", "/api/v1/resourcequotas"),
    Resource("Event", "/api/v1/events", "involvedObject.kind=Pod"),
)


class Gone(Exception):
    """410 Gone: the resourceVersion is too old; re-list."""


class WatchError(Exception):
    """An ERROR event other than 410 in a watch stream (the apiserver's Status object)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"watch ERROR {code}: {message}")
        self.code = code


SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


async def make_api_client(
    kubeconfig: str | None,
    context: str | None,
    in_cluster: bool,
    service_account_dir: str = SERVICE_ACCOUNT_DIR,
) -> Any:
    """A kubernetes-asyncio ApiClient from a kubeconfig file or the in-cluster service account
    ($KUBERNETES_SERVICE_HOST/PORT plus the token and CA in `service_account_dir`)."""
    from kubernetes_asyncio import client, config
    from kubernetes_asyncio.config.config_exception import ConfigException

    conf = client.Configuration()
    where = (
        "in-cluster service account"
        if in_cluster
        else f"kubeconfig {kubeconfig or '~/.kube/config'}"
    )
    try:
        if in_cluster:
            config.load_incluster_config(
                client_configuration=conf,
                token_filename=f"{service_account_dir}/token",
                cert_filename=f"{service_account_dir}/ca.crt",
            )
        else:
            await config.load_kube_config(
                config_file=kubeconfig,
                context=context,
                client_configuration=conf,
                persist_config=False,
            )
    except (ConfigException, OSError, TypeError) as e:
        raise UserError(f"{where}: cannot load: {e}") from None
    try:
        return client.ApiClient(configuration=conf)
    except ssl.SSLError as e:  # a CA bundle that is not PEM
        raise UserError(f"{where}: bad CA certificate: {e}") from None


# API errors named in the `reason` label; any other status is `api_error`.
API_REASONS = ("api_401", "api_403", "api_429", "api_500", "api_503", "api_error")


@dataclass
class Watcher:
    """Keeps `state` in step with the API. `api` is a kubernetes-asyncio ApiClient."""

    api: Any
    state: InventoryState
    lock: threading.Lock
    stats: ComponentStats
    problems: Problems
    resources: tuple[Resource, ...] = RESOURCES
    page_size: int = 500
    watch_timeout_s: int = 300
    backoff_s: float = 1.0
    backoff_max_s: float = 30.0
    on_change: Callable[[], None] = lambda: None
    resource_versions: dict[str, str] = field(default_factory=dict)
    relists: dict[str, int] = field(default_factory=dict)
    missing: set[str] = field(default_factory=set)  # resources the API does not serve (no CRD)
    down: dict[str, str] = field(default_factory=dict)  # kind -> why its watch is down now

    def _set_down(self, kind: str, why: str | None) -> None:
        """Record a resource's watch as up (None) or down: its collector success gauge."""
        if why is None:
            self.down.pop(kind, None)
        else:
            self.down[kind] = why
        with self.stats.lock:
            self.stats.collectors[f"watch_{kind}"] = (0.0, why is None)

    def health(self) -> str | None:
        """One line naming the resources whose watch is down, None when all are up."""
        if not self.down:
            return None
        return "watch down: " + "; ".join(f"{k} ({why})" for k, why in sorted(self.down.items()))

    async def _get(
        self, path: str, query: list[tuple[str, Any]], timeout: float | None = None
    ) -> Any:
        from kubernetes_asyncio.client.exceptions import ApiException

        try:
            resp = await self.api.call_api(
                path,
                "GET",
                query_params=query,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout,
            )
        except ApiException as e:
            if e.status == 410:
                raise Gone(path) from None
            raise
        # without preloading, kubernetes-asyncio hands back error responses as they are: an error
        # must never be read as an empty list (that would close every open fact)
        if resp.status == 410:
            resp.release()
            raise Gone(path)
        if not 200 <= resp.status < 300:
            body = (await resp.text())[:300]
            resp.release()
            raise ApiException(status=resp.status, reason=f"{resp.reason} on GET {path}: {body}")
        return resp

    async def list_all(self, r: Resource) -> tuple[list[dict[str, Any]], str]:
        """A consistent list, paginated (limit/continue); returns items and the list's RV."""
        from kubernetes_asyncio.client.exceptions import ApiException

        items: list[dict[str, Any]] = []
        cont = ""
        while True:
            q: list[tuple[str, Any]] = [("limit", self.page_size), *r.query()]
            if cont:
                q.append(("continue", cont))
            resp = await self._get(r.path, q, timeout=60)
            body = json.loads(await resp.read())
            if not isinstance(body, dict) or not isinstance(body.get("items", []), list):
                raise ApiException(status=0, reason=f"GET {r.path}: not a list object")
            for it in body.get("items") or []:
                it.setdefault("kind", r.kind)
                it.setdefault("apiVersion", r.api_version)
                items.append(it)
            meta = body.get("metadata") or {}
            cont = meta.get("continue") or ""
            if not cont:
                return items, str(meta.get("resourceVersion") or "")

    async def relist(self, r: Resource, *, backdate: bool) -> str:
        items, rv = await self.list_all(r)
        with self.lock:
            self.state.sync(r.kind, items, backdate=backdate)
            self.stats.received += len(items)
        self.relists[r.kind] = self.relists.get(r.kind, 0) + 1
        self._set_down(r.kind, None)
        self.on_change()
        return rv

    async def watch_once(self, r: Resource, rv: str) -> str:
        """One watch request from `rv` until the server ends it; returns the last RV seen."""
        q: list[tuple[str, Any]] = [
            ("watch", "true"),
            ("resourceVersion", rv),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", self.watch_timeout_s),
            *r.query(),
        ]
        resp = await self._get(r.path, q, timeout=self.watch_timeout_s + 30)
        self._set_down(r.kind, None)  # the watch is open again
        try:
            async for line in resp.content:
                if not line.strip():
                    continue
                ev = json.loads(line)
                etype, obj = ev.get("type"), ev.get("object") or {}
                if etype == "ERROR":
                    if obj.get("code") == 410:
                        raise Gone(r.path)
                    code = obj.get("code")
                    raise WatchError(
                        code if isinstance(code, int) else 0, str(obj.get("message") or obj)[:300]
                    )
                new_rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                if etype != "BOOKMARK":
                    obj.setdefault("kind", r.kind)
                    obj.setdefault("apiVersion", r.api_version)
                    with self.lock:
                        self.state.event(etype, obj)
                        self.stats.received += 1
                    self.on_change()
                rv = new_rv
                self.resource_versions[r.kind] = rv
        finally:
            resp.release()
        return rv

    async def run_resource(self, r: Resource, stop: asyncio.Event) -> None:
        import aiohttp
        from kubernetes_asyncio.client.exceptions import ApiException

        rv = ""
        first = True
        delay = self.backoff_s
        while not stop.is_set():
            try:
                if not rv:
                    rv = await self.relist(r, backdate=first)
                    first = False
                    self.resource_versions[r.kind] = rv
                rv = await self.watch_once(r, rv)
                delay = self.backoff_s
                continue
            except Gone:
                rv = self.resource_versions.get(r.kind) or rv
                log.info("inventory: %s: resourceVersion %s is gone (410); re-listing", r.kind, rv)
                rv = ""
                continue
            except WatchError as e:
                # an ERROR event (apiserver overloaded, etcd trouble ...): back off, then re-list
                # this resource only; the others keep watching
                reason = f"api_{e.code}" if f"api_{e.code}" in API_REASONS else "api_error"
                self.problems.add(reason, r.kind, f"{e}; re-listing after {delay:.0f}s")
                self._set_down(r.kind, f"{reason}: {e}")
                rv = ""
            except ApiException as e:
                if e.status == 404:
                    if r.kind not in self.missing:
                        # not served (CRD not installed): nothing of this kind exists any more
                        with self.lock:
                            self.state.sync(r.kind, [])
                        log.info(
                            "inventory: %s is not served by this API server (CRD not installed?)",
                            r.kind,
                        )
                    self.missing.add(r.kind)
                else:
                    reason = f"api_{e.status}" if f"api_{e.status}" in API_REASONS else "api_error"
                    self.problems.add(reason, r.kind, f"API error {e.status}: {e.reason}")
                    self._set_down(r.kind, f"{reason}: API error {e.status}")
            except (TimeoutError, aiohttp.ClientError, ConnectionError, json.JSONDecodeError) as e:
                # dropped connection: resume the watch from the last RV seen, no re-list
                rv = self.resource_versions.get(r.kind) or rv
                detail = f"watch interrupted ({type(e).__name__}); resuming from {rv}"
                self.problems.add("connection", r.kind, detail)
                self._set_down(r.kind, f"connection: {type(e).__name__}")
            except asyncio.CancelledError:
                raise
            except Exception as e:  # anything else: this resource backs off and re-lists alone
                log.exception("inventory: %s: watch failed; re-listing after %.0fs", r.kind, delay)
                self.problems.add("api_error", r.kind, f"{type(e).__name__}: {e}")
                self._set_down(r.kind, f"{type(e).__name__}: {e}"[:200])
                rv = ""
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=delay)
            delay = min(delay * 2, self.backoff_max_s)

    async def run(self, stop: asyncio.Event) -> None:
        """Watch every resource until `stop` is set; open watch requests are cancelled then."""
        tasks = [
            asyncio.create_task(self.run_resource(r, stop), name=f"watch-{r.kind}")
            for r in self.resources
        ]
        waiter = asyncio.create_task(stop.wait())
        await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
        for t in tasks:
            t.cancel()
        waiter.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for r in results:
            if isinstance(r, Exception):
                raise r

    async def list_once(self) -> None:
        """One full list of every resource (for --once)."""
        from kubernetes_asyncio.client.exceptions import ApiException

        for r in self.resources:
            try:
                await self.relist(r, backdate=True)
            except ApiException as e:
                if e.status != 404:
                    raise
                self.missing.add(r.kind)
                with self.lock:
                    self.state.sync(r.kind, [])
