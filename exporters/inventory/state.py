"""Time-versioned inventory state: turns object events (list, watch, dumps) into history rows.

A fact that appears opens a row (valid_to null); a fact that changes or disappears closes the open
row (the same ORDER BY key re-inserted with valid_to and a newer updated_at) and, on change, opens
a new one. It must never emit a row for an unchanged fact: re-lists and reconnects stay silent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from exporters.inventory.nccl_env import PREFIXES, Settings
from exporters.inventory.objects import (
    KEY_FIELDS,
    PROVISIONING_KEYS,
    PURPOSE_KEYS,
    VOLCANO_JOB_API,
    Fact,
    Malformed,
    describe,
    hypernode_facts,
    is_volcano_job,
    job_facts,
    namespace_facts,
    node_facts,
    pod_event_row,
    pod_facts,
    podgroup_facts,
    podgroup_gang_facts,
    podgroup_job,
    priority_class_facts,
    queue_facts,
    resource_quota_facts,
    sections,
    string_map,
)
from telemetry.records import KINDS
from telemetry.times import as_of, iso_to_ms, ms_to_iso
from telemetry.topology.hypernodes import HyperNodeTree, MalformedHyperNode, parse_hypernode

Owner = tuple[str, str, str]  # (API kind, namespace, name)
FactKey = tuple[str, tuple[str, ...]]  # (record kind, key)

_OWNER_KIND = {
    "namespace": "Namespace",
    "pod": "Pod",
    "pod_ip_lease": "Pod",
    "node": "Node",
    "hypernode": "HyperNode",
    "job": "Job",
    "queue": "Queue",
    "podgroup": "PodGroup",
    "priority_class": "PriorityClass",
    "resource_quota": "ResourceQuota",
    "nccl_setting": "Pod",
}
# The key field that holds the owning object's name, per fact kind.
_OWNER_NAME = {
    "namespace": "namespace",
    "pod": "pod",
    "pod_ip_lease": "pod",
    "node": "node",
    "hypernode": "hypernode",
    "job": "job",
    "queue": "queue",
    "podgroup": "podgroup",
    "priority_class": "priority_class",
    "resource_quota": "quota",
    "nccl_setting": "pod",
}
_NAMESPACED = ("pod", "pod_ip_lease", "job", "podgroup", "resource_quota", "nccl_setting")
_CLUSTER_SCOPED = ("Node", "HyperNode", "Namespace", "Queue", "PriorityClass")
_META = ("cluster", "valid_from", "valid_to", "updated_at")
_JOB_KINDS = {"Job", "PodGroup"}
# parsers that note what they skip in a warnings list (reported once per object)
_WARNING_PARSERS: dict[str, Callable[[Mapping[str, Any], list[str]], list[Fact]]] = {
    "Pod": pod_facts,
    "Node": node_facts,
    "HyperNode": hypernode_facts,
    "Queue": queue_facts,
    "ResourceQuota": resource_quota_facts,
}


@dataclass
class _Open:
    values: tuple[tuple[str, Any], ...]
    valid_from: int
    owner: Owner


class Ledger:
    """Open facts and the rows that record their history. Times are ms since the epoch."""

    def __init__(self, clock: Callable[[], int]) -> None:
        self.clock = clock
        self.open: dict[FactKey, _Open] = {}
        self.owned: dict[Owner, set[FactKey]] = {}
        self.closed_at: dict[FactKey, int] = {}
        self.rows: dict[str, list[dict[str, Any]]] = {}
        self._version = 0
        self.opened = 0
        self.closed = 0

    def _updated_at(self) -> int:
        # strictly rising: a close must out-version the open row even within one millisecond
        self._version = max(self._version + 1, self.clock())
        return self._version

    def _row(self, fk: FactKey, o: _Open, valid_to: int | None) -> None:
        kind, key = fk
        row: dict[str, Any] = dict(zip(KEY_FIELDS[kind], key, strict=True))
        row.update(o.values)
        row.update(valid_from=o.valid_from, valid_to=valid_to, updated_at=self._updated_at())
        self.rows.setdefault(kind, []).append(row)

    def load_open(self, kind: str, rows: Iterable[Mapping[str, Any]]) -> None:
        """Seed from the store's open rows, so a restart continues history instead of repeating it."""
        keys = KEY_FIELDS[kind]
        for r in rows:
            key = tuple(str(r[k]) for k in keys)
            values = tuple(sorted((k, v) for k, v in r.items() if k not in keys and k not in _META))
            ns = str(r.get("namespace") or "") if kind in _NAMESPACED else ""
            name = str(r.get(_OWNER_NAME[kind]))
            # a stored job row may come from a Job or from a standalone PodGroup: which one is
            # known once both have been listed (see `sync`)
            owner = ("Job?" if kind == "job" else _OWNER_KIND[kind], ns, name)
            vf = r["valid_from"]
            vf_ms = vf if isinstance(vf, int) else int(vf.timestamp() * 1000)
            self.open[(kind, key)] = _Open(values, vf_ms, owner)
            self.owned.setdefault(owner, set()).add((kind, key))

    def _close(self, fk: FactKey, at: int) -> None:
        o = self.open.pop(fk)
        self.owned.get(o.owner, set()).discard(fk)
        end = max(at, o.valid_from)
        self._row(fk, o, end)
        self.closed_at[fk] = end
        self.closed += 1

    def apply(
        self, owner: Owner, facts: Iterable[Fact], at: int, *, backdate: bool = False
    ) -> None:
        """The owner's facts as of `at`. `backdate`: a fact never seen before may start at the
        object's own start time (first list after railscope starts) instead of `at`."""
        now_keys: set[FactKey] = set()
        for f in facts:
            fk = (f.kind, f.key)
            now_keys.add(fk)
            cur = self.open.get(fk)
            if cur is not None and cur.values == f.values:
                if cur.owner != owner:  # same fact, new owner object (e.g. loaded from the store)
                    self.owned.get(cur.owner, set()).discard(fk)
                    cur.owner = owner
                    self.owned.setdefault(owner, set()).add(fk)
                continue
            start = at
            if cur is not None and cur.valid_from >= at:
                start = cur.valid_from  # changed within the instant it opened: re-version that row
                self.owned.get(cur.owner, set()).discard(fk)
            elif cur is not None:
                self._close(fk, at)
            elif backdate and f.start_ms is not None:
                start = min(at, max(f.start_ms, self.closed_at.get(fk, f.start_ms)))
            self.open[fk] = _Open(f.values, start, owner)
            self.owned.setdefault(owner, set()).add(fk)
            self._row(fk, self.open[fk], None)
            self.opened += 1
        for fk in list(self.owned.get(owner, set()) - now_keys):
            if fk in self.open and self.open[fk].owner == owner:
                self._close(fk, at)
        if not self.owned.get(owner):
            self.owned.pop(owner, None)

    def delete(self, owner: Owner, at: int) -> None:
        self.apply(owner, [], at)

    def owners(self, api_kind: str) -> set[Owner]:
        return {o for o in self.owned if o[0] == api_kind}

    def drain(self) -> dict[str, list[dict[str, Any]]]:
        rows, self.rows = self.rows, {}
        return rows


class InventoryState:
    """Object events -> ledger. Keeps what is needed to combine objects (a Volcano Job and its
    PodGroup) and to check HyperNodes against each other (cycles)."""

    def __init__(
        self,
        clock: Callable[[], int],
        *,
        provisioning_keys: tuple[str, ...] = PROVISIONING_KEYS,
        purpose_keys: tuple[str, ...] = PURPOSE_KEYS,
        setting_prefixes: tuple[str, ...] = PREFIXES,
    ) -> None:
        self.ledger = Ledger(clock)
        self.settings = Settings(setting_prefixes)  # pods' NCCL settings (nccl_env.py)
        self.provisioning_keys = provisioning_keys
        self.purpose_keys = purpose_keys
        self.event_counts: dict[str, int] = {}  # event uid -> count already emitted
        self.clock = clock
        self.problems: list[str] = []
        self.warnings: list[str] = []
        self.jobs: dict[tuple[str, str], Mapping[str, Any]] = {}
        self.allocated: dict[tuple[str, str], str] = {}  # (ns, job) -> allocated HyperNode
        self.hypernodes: dict[str, Mapping[str, Any]] = {}
        self.watched: set[str] = set(_JOB_KINDS)  # API kinds that will be listed
        self.synced: set[str] = set()  # API kinds listed at least once

    def _warned(self, facts: list[Fact]) -> list[Fact]:
        for w in self.warnings:
            self.report(w)
        self.warnings.clear()
        return facts

    def report(self, msg: str) -> None:
        """A malformed object (or part of one), by name: the source counts and logs it."""
        self.problems.append(msg)

    # -- one object ---------------------------------------------------------------------------
    def event(
        self,
        etype: str,
        obj: Mapping[str, Any],
        at: int | None = None,
        *,
        backdate: bool = False,
        cycles_checked: bool = False,
    ) -> None:
        """Apply one ADDED / MODIFIED / DELETED object. `cycles_checked`: the caller already
        checked a whole list of HyperNodes for cycles (saves a tree build per object)."""
        at = self.clock() if at is None else at
        kind, ns, name = owner = (str(obj.get("kind") or ""), *_ns_name(obj))
        if kind == "Job" and not is_volcano_job(obj):
            return  # another API group's Job (Kubernetes batch/v1): not read
        try:
            if kind == "Event":
                self._pod_event(etype, obj)
                return
            if kind == "ConfigMap":
                self._configmap(etype, obj, at)
                return
            if kind == "PodGroup":
                self._podgroup(etype, obj, at, backdate)
                return
            if (
                kind == "HyperNode"
                and etype != "DELETED"
                and not cycles_checked
                and self._hypernode_cycles(obj)
            ):
                return
            if etype == "DELETED":
                self.ledger.delete(owner, at)
                if kind == "Pod":
                    self.settings.pod_gone(ns, name)
                if kind == "Job":
                    self.jobs.pop((ns, name), None)
                if kind == "HyperNode":
                    self.hypernodes.pop(name, None)
                return
            facts = self._facts(obj)
        except Malformed as e:
            self.report(f"{e}; skipped")
            return
        if kind == "Job":
            self.jobs[(ns, name)] = obj
        if kind == "HyperNode":
            self.hypernodes[name] = obj
        self.ledger.apply(owner, facts, at, backdate=backdate)

    def _facts(self, obj: Mapping[str, Any]) -> list[Fact]:
        kind = obj.get("kind")
        if kind == "Namespace":
            return namespace_facts(obj)
        if kind == "PriorityClass":
            return priority_class_facts(obj, self.provisioning_keys, self.purpose_keys)
        if kind == "Job":
            ns, name = _ns_name(obj)
            return job_facts(obj, self.allocated.get((ns, name), ""))
        parse = _WARNING_PARSERS.get(str(kind))
        if parse is None:
            return []
        facts = parse(obj, self.warnings)
        for w in self.warnings:
            self.report(w)
        self.warnings.clear()
        if kind == "Pod":
            facts += self.settings.facts(obj, *_ns_name(obj))
        return facts

    def _configmap(self, etype: str, obj: Mapping[str, Any], at: int) -> None:
        """A ConfigMap at hand resolves the env of the pods that waited for it."""
        for pod in self.settings.configmap(etype, _ns_name(obj), obj):
            if ("Pod", *_ns_name(pod)) in self.ledger.owned:  # still there
                self.event("MODIFIED", pod, at)

    def _podgroup(self, etype: str, obj: Mapping[str, Any], at: int, backdate: bool) -> None:
        ns, name = _ns_name(obj)
        job = podgroup_job(obj)
        owner = ("PodGroup", ns, name)
        if etype == "DELETED":
            self.ledger.delete(owner, at)
        else:
            gang = self._warned(podgroup_gang_facts(obj, self.warnings))
            # a standalone PodGroup is also a job row of its own
            extra = [] if job else podgroup_facts(obj)
            self.ledger.apply(owner, [*gang, *extra], at, backdate=backdate)
        if not job:
            return
        alloc = (
            ""
            if etype == "DELETED"
            else string_map(
                sections(obj, "PodGroup")[0], "annotations", f"PodGroup {ns}/{name}"
            ).get("volcano.sh/job-allocated-hypernode", "")
        )
        if self.allocated.get((ns, job), "") == alloc:
            return
        self.allocated[(ns, job)] = alloc
        if (ns, job) in self.jobs:
            self.ledger.apply(
                ("Job", ns, job), job_facts(self.jobs[(ns, job)], alloc), at, backdate=backdate
            )

    def _pod_event(self, etype: str, obj: Mapping[str, Any]) -> None:
        """A preemption/eviction Event becomes one pod_event row; the same event (uid) again is
        silent unless its count rose. A deleted Event (TTL) deletes nothing: it happened."""
        if etype == "DELETED":
            return
        row = pod_event_row(obj)
        if row is None or self.event_counts.get(row["uid"], 0) >= row["count"]:
            return
        if len(self.event_counts) > 100_000:  # bounded: old events are not re-listed for long
            self.event_counts.clear()
        self.event_counts[row["uid"]] = row["count"]
        self.ledger.rows.setdefault("pod_event", []).append(row)

    def _hypernode_cycles(self, obj: Mapping[str, Any]) -> bool:
        try:
            new = parse_hypernode(obj)
        except MalformedHyperNode as e:
            raise Malformed(str(e)) from None
        specs = {}
        for n, o in self.hypernodes.items():
            try:
                specs[n] = parse_hypernode(o)
            except MalformedHyperNode:
                continue
        specs[new.name] = new
        tree = HyperNodeTree.build(specs.values(), {})
        for p in tree.problems:
            if p.kind == "cycle" and p.subject == new.name:
                self.report(f"HyperNode {new.name}: {p.message}; skipped")
                return True
        return False

    # -- a full list of one resource ---------------------------------------------------------
    def sync(
        self,
        api_kind: str,
        objs: Iterable[Mapping[str, Any]],
        at: int | None = None,
        *,
        backdate: bool = False,
    ) -> None:
        """A complete list of one API kind (initial list or re-list after 410 Gone): apply each
        object, then close what the list no longer has."""
        at = self.clock() if at is None else at
        seen: set[Owner] = set()
        objs = list(objs)
        objs = [{**o, "kind": o.get("kind") or api_kind} for o in objs]
        bad: set[str] = set()
        if api_kind == "HyperNode":  # a cycle is judged on the whole list, not object by object
            self.hypernodes = {}
            bad = self._cycle_names(objs)
        for o in objs:
            if _ns_name(o)[1] in bad:
                continue
            seen.add((api_kind, *_ns_name(o)))
            self.event("ADDED", o, at, backdate=backdate, cycles_checked=True)
        if api_kind == "PodGroup":
            listed = {
                (ns, job) for o in objs for ns, job in [(_ns_name(o)[0], _owner_job(o))] if job
            }
            for key in [k for k in self.allocated if k not in listed]:
                self.event(
                    "DELETED",
                    {
                        "kind": "PodGroup",
                        "metadata": {
                            "namespace": key[0],
                            "name": "",
                            "ownerReferences": [
                                {"apiVersion": VOLCANO_JOB_API, "kind": "Job", "name": key[1]}
                            ],
                        },
                    },
                    at,
                )
        if api_kind == "ConfigMap":  # ones no longer listed are gone (nothing else to close)
            self.settings.listed({o[1:] for o in seen})
        for owner in self.ledger.owners(api_kind) - seen:
            gone = {"kind": api_kind, "metadata": {"namespace": owner[1], "name": owner[2]}}
            if api_kind == "Job":  # only Volcano Jobs are owners
                gone["apiVersion"] = VOLCANO_JOB_API
            self.event("DELETED", gone, at)
        self.synced.add(api_kind)
        if api_kind in _JOB_KINDS and (self.watched & _JOB_KINDS) <= self.synced:
            for owner in self.ledger.owners("Job?"):  # stored job rows neither list claimed
                self.ledger.delete(owner, at)

    def apply_dump(
        self,
        objs: Iterable[Mapping[str, Any]],
        at: int | None = None,
        *,
        captured_ms: int | None = None,
        date_undated: bool = True,
    ) -> Undated:
        """Objects from a dump: opened or updated, never closed by absence (a dump may be partial).
        HyperNodes on a cycle are checked across the whole dump first, so every one is skipped.

        An object without metadata.creationTimestamp (a manifest, not `kubectl get` output) is
        dated at the capture's own time, as the objects around it are: the earliest
        creationTimestamp in the dump, else `captured_ms` (the caller's: the dump files' oldest
        mtime), never the time it is loaded (which would put a manifest's HyperNodes and Jobs after
        the flows they explain). `date_undated=False` (a dump loaded again, as a stepped replay
        loads each step): such objects start when loaded, as a watch sees them appear. Returns
        which objects were dated so, and when."""
        at = self.clock() if at is None else at
        objs = sorted(objs, key=lambda o: o.get("kind") != "ConfigMap")  # resolves pods' env
        self.settings.expected |= any(o.get("kind") == "ConfigMap" for o in objs)
        bad = self._cycle_names(objs)
        undated = capture_time(objs, captured_ms) if date_undated else Undated((), None, "")
        for o in objs:
            if o.get("kind") == "HyperNode" and _ns_name(o)[1] in bad:
                continue
            if undated.at_ms is not None and _undated(o):
                o = _dated(o, undated.at_ms)
            self.event("ADDED", o, at, backdate=True, cycles_checked=True)
        return undated

    def _cycle_names(self, objs: list[Mapping[str, Any]]) -> set[str]:
        specs = []
        for o in objs:
            if o.get("kind") == "HyperNode":
                try:
                    specs.append(parse_hypernode(o))
                except MalformedHyperNode:
                    continue  # reported when the object itself is applied
        bad: set[str] = set()
        for p in HyperNodeTree.build(specs, {}).problems:
            if p.kind == "cycle":
                bad.add(p.subject)
                self.report(f"HyperNode {p.subject}: {p.message}; skipped")
        return bad

    def drain_rows(self) -> dict[str, list[dict[str, Any]]]:
        return self.ledger.drain()

    def load_open_from_store(self, store: Any, cluster: str) -> None:
        """Seed the ledger from the store's still-open rows (valid_to null) of this cluster."""
        for kind in KEY_FIELDS:
            k = KINDS[kind]
            cols = ", ".join(f"`{c}`" for c in k.columns)
            t = store.query_arrow(
                f"SELECT {cols} FROM {store.table(k, final=True)} WHERE cluster = {{c:String}} AND {as_of(None)}",
                {"c": cluster},
            )
            rows = t.to_pylist()
            self.ledger.load_open(kind, rows)
            if kind == "job":  # so a re-list does not reopen a job row before its PodGroup is seen
                for r in rows:
                    if r["allocated_hypernode"]:
                        self.allocated[(str(r["namespace"]), str(r["job"]))] = r[
                            "allocated_hypernode"
                        ]


def _owner_job(obj: Mapping[str, Any]) -> str:
    """The PodGroup's owning Job, '' when none or malformed (reported when it is applied)."""
    try:
        return podgroup_job(obj)
    except Malformed:
        return ""


def _ns_name(obj: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name) as text whatever the object holds (the parsers judge it)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    kind = obj.get("kind")
    ns = "" if kind in _CLUSTER_SCOPED else str(meta.get("namespace") or "default")
    return ns, str(meta.get("name") or "")


__all__ = ["InventoryState", "Ledger", "describe"]


@dataclass(frozen=True)
class Undated:
    """The objects of a dump that carry no creationTimestamp ("Kind ns/name"), and the time they
    are dated at (None: none such, or no time to date them at)."""

    objects: tuple[str, ...]
    at_ms: int | None
    source: str  # "creationTimestamp" or "mtime": where at_ms came from


def _undated(obj: Mapping[str, Any]) -> bool:
    meta = obj.get("metadata")
    return isinstance(meta, Mapping) and iso_to_ms(meta.get("creationTimestamp")) is None


def _dated(obj: Mapping[str, Any], ms: int) -> dict[str, Any]:
    """`obj` with metadata.creationTimestamp set to `ms` (a shallow copy: the dump is not edited)."""
    meta = dict(obj.get("metadata") or {})
    meta["creationTimestamp"] = ms_to_iso(ms)
    return {**obj, "metadata": meta}


def capture_time(objs: list[Mapping[str, Any]], fallback_ms: int | None) -> Undated:
    """When a dump was captured, for its undated objects: its earliest creationTimestamp, else
    `fallback_ms`."""
    names = []
    earliest: int | None = None
    for o in objs:
        meta = o.get("metadata")
        if not isinstance(meta, Mapping):
            continue
        ms = iso_to_ms(meta.get("creationTimestamp"))
        if ms is None:
            ns, name = _ns_name(o)
            names.append(f"{o.get('kind')} {ns + '/' if ns else ''}{name}")
        elif earliest is None or ms < earliest:
            earliest = ms
    if not names:
        return Undated((), None, "")
    if earliest is not None:
        return Undated(tuple(names), earliest, "creationTimestamp")
    return Undated(tuple(names), fallback_ms, "mtime")
