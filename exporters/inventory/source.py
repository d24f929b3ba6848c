"""The `railscope inventory` source: Kubernetes/Volcano inventory as time-versioned facts.

Reads Pods (primary + Multus secondary IPs), Nodes, Volcano HyperNodes, Jobs and PodGroups from the
API (list+watch) or from `kubectl get -o json|yaml` dumps, and writes pod, pod_ip_lease, node,
hypernode and job rows. It never writes to the Kubernetes API.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

from exporters.inventory.config import InventoryConfig
from exporters.inventory.objects import KEY_FIELDS
from exporters.inventory.watch import API_REASONS
from telemetry.contracts import Batch
from telemetry.errors import UserError
from telemetry.pipeline import BaseSource, ConfigFlags
from telemetry.times import ms_to_iso

log = logging.getLogger(__name__)

# the facts it keeps (time-versioned), then the events it records as they happen
KINDS = (*KEY_FIELDS, "pod_event")


def _now_ms() -> int:
    return int(time.time() * 1000)


class InventorySource(BaseSource):
    """Kubernetes/Volcano inventory: Pods (primary and Multus secondary IPs), Nodes, HyperNodes,
    Volcano Jobs and PodGroups, stored as history (valid_from/valid_to).

    Live: list+watch with kubeconfig (--kubeconfig, --context) or in-cluster auth (--in-cluster).
    Offline: --from FILE|DIR loads `kubectl get ... -o json|yaml` dumps.
    Extra verb:  railscope inventory who IP [--at TIME]   (who held the IP at TIME)
    """

    name = "inventory"
    unit = "objects"  # Kubernetes objects listed, watched or loaded from a dump
    reasons = ("malformed_object", "connection", *API_REASONS)
    Config = InventoryConfig
    cfg: InventoryConfig
    config_flags: ClassVar[ConfigFlags] = {
        "--kubeconfig": ("kubeconfig", "FILE"),
        "--context": ("context", None),
        "--in-cluster": ("in_cluster", None),
    }

    def __init__(
        self,
        *,
        config: InventoryConfig | None = None,
        from_path: str | None = None,
        once: bool = False,
        store: Any = None,
        cluster: str = "default",
        clock: Any = _now_ms,
    ) -> None:
        super().__init__(config, from_path)
        from exporters.inventory.state import InventoryState

        self.once = once
        self.store = store  # seeds open facts so a restart does not repeat history
        self.cluster = cluster
        self.state = InventoryState(
            clock,
            provisioning_keys=tuple(self.cfg.provisioning_keys),
            purpose_keys=tuple(self.cfg.purpose_keys),
            setting_prefixes=tuple(self.cfg.setting_prefixes),
        )
        self.state.watched = set(self.cfg.resources)
        self.state.settings.expected = "ConfigMap" in self.cfg.resources
        self.lock = threading.Lock()
        self._seeded = False
        self._told_undated = False
        self.from_path_done = False  # the capture loaded once (a later load is a later step)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._reported = 0
        self.watcher: Any = None

    # -- CLI ----------------------------------------------------------------------------------
    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "verb",
            nargs="?",
            choices=["who"],
            help="who IP [--at TIME]: the pod that held IP at TIME",
        )
        p.add_argument("verb_args", nargs="*", metavar="ARG", help=argparse.SUPPRESS)
        p.add_argument(
            "--at",
            metavar="TIME",
            help="for `who`: ISO-8601 time, ms since the epoch, or now (default)",
        )
        cls.add_config_flags(p)

    @classmethod
    def fold_args(cls, args: argparse.Namespace, section: dict[str, Any]) -> dict[str, Any]:
        """The `sources.inventory` section with this command line's flags on top."""
        return cls.fold_config_flags(args, section)

    @classmethod
    def build(
        cls, c: InventoryConfig, cfg: Any, *, from_path: str | None, once: bool
    ) -> InventorySource:
        """Built without a store; `bind_store` hands it the pipeline's (to seed open facts)."""
        if c.kubeconfig and not from_path and not os.path.isfile(c.kubeconfig):
            raise UserError(f"kubeconfig {c.kubeconfig}: no such file")
        return cls(config=c, from_path=from_path, once=once, cluster=cfg.cluster)

    def bind_store(self, store: Any) -> None:
        """The store this source's rows go to: open facts are seeded from it so a restart does
        not repeat history."""
        self.store = store

    @classmethod
    def run_subcommand(cls, args: argparse.Namespace, cfg: Any, store: Any) -> int | None:
        """`railscope inventory who IP [--at TIME]`; `store()` opens the store."""
        if args.verb is None:
            if args.verb_args:
                raise UserError(f"inventory: unexpected argument {args.verb_args[0]!r}")
            return None
        from exporters.inventory.who import parse_at, who_owned

        if len(args.verb_args) != 1:
            raise UserError("usage: railscope inventory who IP [--at TIME]")
        ip, at = args.verb_args[0], parse_at(args.at)
        lease = who_owned(store(), ip, at, cluster=cfg.cluster)
        if lease is None:
            print(f"{ip} at {at.isoformat()}: no pod held it")
            return 1
        out = {"ip": ip, "at": at.isoformat(), **lease}
        print(json.dumps(out, default=str))
        return 0

    # -- collection ---------------------------------------------------------------------------
    def _seed(self) -> None:
        if self._seeded:
            return
        self._seeded = True
        if self.store is not None:
            with self.lock:
                self.state.load_open_from_store(self.store, self.cluster)

    def _collect(self) -> list[Batch]:
        self._seed()
        if self.from_path:
            self._load_dump()
        elif self.once:
            asyncio.run(self._list_once())
        else:
            self._ensure_watching()
        return self._drain()

    def _load_dump(self) -> None:
        from exporters.inventory.objects import load_dump

        objs = load_dump(self.from_path) if self.from_path else []
        self.stats.received += len(objs)
        with self.lock:
            undated = self.state.apply_dump(
                objs,
                captured_ms=_oldest_mtime_ms(self.from_path),
                date_undated=not self.from_path_done,  # the capture; a reload is a later step
            )
        if undated.objects and not self._told_undated:
            self._told_undated = True  # once: a replay loaded again each cycle is the same capture
            shown = ", ".join(undated.objects[:10])
            more = f" and {len(undated.objects) - 10} more" if len(undated.objects) > 10 else ""
            if undated.at_ms is None:
                log.warning(
                    "inventory: %s carry no creationTimestamp: dated when loaded", shown + more
                )
            else:
                why = (
                    "the earliest creationTimestamp of the capture"
                    if undated.source == "creationTimestamp"
                    else "the capture files' oldest modification time (no object has a "
                    "creationTimestamp)"
                )
                log.warning(
                    "inventory: %d object(s) carry no creationTimestamp (manifests, not `kubectl "
                    "get` output): %s%s; dated at %s, %s",
                    len(undated.objects), shown, more, ms_to_iso(undated.at_ms), why,
                )  # fmt: skip
        self.from_path_done = True

    def _drain(self) -> list[Batch]:
        with self.lock:
            rows = self.state.drain_rows()
            problems = self.state.problems[self._reported :]
            self._reported = len(self.state.problems)
            open_by_kind: dict[str, int] = dict.fromkeys(KEY_FIELDS, 0)
            for kind, _ in self.state.ledger.open:
                open_by_kind[kind] += 1
        # served as railscope_component_<name>{component="source:inventory"}
        for kind, n in open_by_kind.items():
            self.stats.extra[f"inventory_open_{kind}_facts"] = float(n)
        if self.watcher is not None:
            self.stats.extra["inventory_relists"] = float(sum(self.watcher.relists.values()))
        for msg in problems:  # malformed objects: skipped, counted, named in the log
            self.stats.dropped += 1
            self.problems.add("malformed_object", msg)
        return [Batch.from_rows(k, rows[k]) for k in KINDS if rows.get(k)]

    def _resources(self) -> tuple[Any, ...]:
        from exporters.inventory.watch import RESOURCES

        unknown = set(self.cfg.resources) - {r.kind for r in RESOURCES}
        if unknown:
            raise UserError(f"sources.inventory.resources: unknown kind(s) {sorted(unknown)}")
        return tuple(r for r in RESOURCES if r.kind in self.cfg.resources)

    async def _watcher(self) -> Any:
        from exporters.inventory.watch import Watcher, make_api_client

        in_cluster = self.cfg.in_cluster
        if in_cluster is None:
            in_cluster = (
                not self.cfg.kubeconfig
                and not os.environ.get("KUBECONFIG")
                and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
            )
        api = await make_api_client(
            self.cfg.kubeconfig, self.cfg.context, in_cluster, self.cfg.service_account_dir
        )
        self.watcher = Watcher(
            api,
            self.state,
            self.lock,
            self.stats,
            self.problems,
            resources=self._resources(),
            page_size=self.cfg.page_size,
            watch_timeout_s=self.cfg.watch_timeout_seconds,
        )
        return self.watcher

    async def _list_once(self) -> None:
        w = await self._watcher()
        try:
            await w.list_once()
        except Exception as e:
            raise UserError(f"inventory: cannot list from the Kubernetes API: {e}") from None
        finally:
            await w.api.close()

    def health(self) -> str | None:
        """For /healthz: the watch thread died, or a resource's watch is down now (the API
        unreachable or answering errors); None while every watch is up."""
        if self._thread is not None and not self._thread.is_alive():
            return "the watch thread died (restarted at the next collection)"
        return self.watcher.health() if self.watcher is not None else None

    def _ensure_watching(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        if self._thread is not None:  # it died: start it again, counted; the interval backs off
            log.error("inventory: the watch thread died; starting it again")
            with self.stats.lock:
                self.stats.extra["restarts"] = self.stats.extra.get("restarts", 0.0) + 1
        ready = threading.Event()

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._stop = asyncio.Event()
            ready.set()
            try:
                loop.run_until_complete(self._watch_forever())
            finally:
                loop.close()

        self._thread = threading.Thread(target=main, name="inventory-watch", daemon=True)
        self._thread.start()
        ready.wait()

    async def _watch_forever(self) -> None:
        w = await self._watcher()
        try:
            assert self._stop is not None
            await w.run(self._stop)
        finally:
            await w.api.close()

    def close(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout=10)


__all__ = ["InventorySource"]


def _oldest_mtime_ms(path: str | Path | None) -> int | None:
    """The oldest modification time of a capture's files (a file, or a directory's *.json/*.yaml)."""
    if not path:
        return None
    p = Path(path)
    files = [f for f in p.rglob("*") if f.is_file()] if p.is_dir() else [p]
    times = [f.stat().st_mtime for f in files if f.suffix in (".json", ".yaml", ".yml") or f == p]
    return int(min(times) * 1000) if times else None
