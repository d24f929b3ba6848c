"""What the log-born detectors (logs.py) resolve a log line's names to: a pod and its job as of
the line's time, a peer's RDMA IP or GID to the pod, node, rail and NIC that held it then
(pod_ip_leases, time-versioned; for a host-network pod, whose RDMA address is its node's NIC's and
in no inventory record, the rank that printed that address as its own local GID), a NIC to the
leaf port LLDP shows it cabled to, and a rank to its pod and GPU (from the ranks' own NCCL
`Init COMPLETE` lines).

Reads the store only; never writes, never judges. A name it cannot resolve stays unresolved
(None), never guessed.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from telemetry.correlate.lease_index import nic_sql
from telemetry.correlate.registry import Context
from telemetry.correlate.sql import lldp_peers
from telemetry.records import ms
from telemetry.times import as_utc

_TS = "DateTime64(3, 'UTC')"


def events(
    ctx: Context, kinds: tuple[str, ...], since: datetime | None = None
) -> list[dict[str, Any]]:
    """log_event rows of `kinds` in the window (from `since` instead of its start), oldest first,
    with `fields` parsed (a row whose fields are not a JSON object is left out). In a batch run
    the rows are read once and only the newer ones at each later tick (`_Tail`)."""
    since = since or ctx.window.start
    tail = _Tail.of(ctx)
    if tail is not None:
        return tail.events(ctx, kinds, since)
    return [row for _, row in _read(ctx, kinds, since, ctx.window.end)]


def rows_version(ctx: Context, kinds: tuple[str, ...]) -> tuple[int, ...] | None:
    """A number per kind that changes whenever the rows `events` last returned of it changed
    (rows arrived or aged out of the window): what is derived from them needs no rebuilding
    while it stands (Context.remembered). None outside a batch run: derive it every tick."""
    tail = _Tail.of(ctx)
    return None if tail is None else tuple(tail.version.get(k, -1) for k in kinds)


# a log_event row's place in `events`' order (its ORDER BY, `fields` as stored)
_Key = tuple[datetime, str, str, str, str, str]
_VERSIONS = itertools.count(1)  # rows_version's numbers, never reused (a new tail starts above)


def _read(
    ctx: Context, kinds: Iterable[str], since: datetime, until: datetime
) -> list[tuple[_Key, dict[str, Any]]]:
    rows = ctx.rows(
        f"""
        SELECT ts, node, namespace, pod, kind, fields FROM {ctx.table("log_event")}
        WHERE cluster = {{cluster:String}} AND ts >= {{since:{_TS}}} AND ts < {{until:{_TS}}}
          AND kind IN {{kinds:Array(String)}}
        ORDER BY ts, node, namespace, pod, kind, fields""",
        {"kinds": sorted(kinds), "since": since, "until": until},
    )
    out = []
    for r in rows:
        try:
            f = json.loads(r["fields"])
        except ValueError:
            continue
        if isinstance(f, dict):
            ts = utc(r["ts"])
            key = (ts, r["node"], r["namespace"], r["pod"], r["kind"], r["fields"])
            out.append((key, {**r, "ts": ts, "fields": f}))
    return out


@dataclass
class _Tail:
    """A batch run's log_event rows, per kind, as `events` last returned them: from the `since`
    it asked for up to `until` (the tick). At a later tick only the rows from `until` on are
    read, for every kind held, in one statement, and rows older than a new `since` dropped: the
    stored rows do not change during a batch run (as Context.as_of_state assumes), so the rows
    are those a full read returns, at a cost that follows the new rows, not the day read back.

    Kept in the engine's memo, which outlives a run: a tail serves only the run that made it.
    Each run numbers its state epochs (Context.as_of_state) above every number of the runs
    before, so a tick whose smallest epoch exceeds the largest the tail has seen starts a new
    tail (within a run that happens only when every state kind changed at once: a full read
    then, never a wrong one). Live ticks and the per-tick loop have no epochs: no tail."""

    mark: int  # the largest state epoch seen
    until: datetime
    held: dict[str, tuple[datetime, list[tuple[_Key, dict[str, Any]]]]] = field(
        default_factory=dict
    )
    version: dict[str, int] = field(default_factory=dict)

    MEMO = "log_resolve.tail"

    @classmethod
    def of(cls, ctx: Context) -> _Tail | None:
        epochs, memo = ctx.extra.get("state_epochs"), ctx.extra.get("memo")
        if not epochs or memo is None:
            return None
        tail = memo.get(cls.MEMO)
        now = ctx.window.end
        if not isinstance(tail, cls) or min(epochs.values()) > tail.mark or now < tail.until:
            tail = memo[cls.MEMO] = cls(max(epochs.values()), now)
        tail.mark = max(tail.mark, *epochs.values())
        return tail

    def events(self, ctx: Context, kinds: tuple[str, ...], since: datetime) -> list[dict[str, Any]]:
        now = ctx.window.end
        if now > self.until:
            if self.held and _may_hold(ctx, self.until, now):
                for key, row in _read(ctx, self.held, self.until, now):
                    self.held[row["kind"]][1].append((key, row))
                    self.version[row["kind"]] = next(_VERSIONS)
            self.until = now
        missing = [k for k in kinds if k not in self.held or self.held[k][0] > since]
        if missing:
            for k in missing:
                self.held[k] = (since, [])
                self.version[k] = next(_VERSIONS)
            for key, row in _read(ctx, missing, since, now):
                self.held[row["kind"]][1].append((key, row))
        lists = []
        for k in dict.fromkeys(kinds):
            start, rows = self.held[k]
            if start < since:
                drop = bisect.bisect_left(rows, since, key=lambda kr: kr[0][0])
                if drop:
                    rows = rows[drop:]
                    self.version[k] = next(_VERSIONS)
                self.held[k] = (since, rows)
            lists.append(rows)
        merged = lists[0] if len(lists) == 1 else heapq.merge(*lists, key=lambda kr: kr[0])
        return [row for _, row in merged]


def _may_hold(ctx: Context, since: datetime, until: datetime) -> bool:
    """log_event rows may lie in [since, until): the batch run's Activity (engine.py) says where
    its rows lie (at bucket granularity); without one, or without log_event in it, they may."""
    act = ctx.extra.get("activity")
    if act is None or "log_event" not in act.buckets:
        return True
    return bool(act.any_in("log_event", ms(since), ms(until)))


def utc(v: Any) -> Any:
    """A datetime the store returned, as UTC-aware (the window's bounds are); others as given."""
    return as_utc(v) if isinstance(v, datetime) else v


def _utc_row(r: dict[str, Any], *cols: str) -> dict[str, Any]:
    for c in cols:
        r[c] = utc(r[c])
    return r


def _valid(v: dict[str, Any], at: datetime) -> bool:
    return v["valid_from"] <= at and (v["valid_to"] is None or v["valid_to"] > at)


@dataclass
class Pods:
    """Pod versions of the pods asked for: their job and node as of a time."""

    versions: dict[tuple[str, str], list[dict[str, Any]]]

    @classmethod
    def of(cls, ctx: Context, pods: set[tuple[str, str]]) -> Pods:
        out: dict[tuple[str, str], list[dict[str, Any]]] = {}
        if pods:
            for r in ctx.rows(
                f"""
                SELECT namespace, pod, node, job, valid_from, valid_to
                FROM {ctx.table("pod", final=True)}
                WHERE cluster = {{cluster:String}} AND (namespace, pod) IN {{pods:Array(Tuple(String, String))}}
                  AND valid_from < {{we:{_TS}}}
                ORDER BY valid_from""",
                {"pods": sorted(pods)},
            ):
                out.setdefault((r["namespace"], r["pod"]), []).append(
                    _utc_row(r, "valid_from", "valid_to")
                )
        return cls(out)

    def at(self, ns: str, pod: str, at: datetime) -> dict[str, Any] | None:
        vs = [v for v in self.versions.get((ns, pod), []) if _valid(v, at)]
        return vs[-1] if vs else None


def rail_of(network: str) -> int | None:
    """The rail of a Multus network named like rdma-rail3 / rail_3 (lease_index._rail's rule)."""
    import re

    m = re.search(r"(?i)rail[-_]?(\d+)", network or "")
    return int(m.group(1)) if m else None


def leases(ctx: Context, ips: set[str]) -> dict[str, list[dict[str, Any]]]:
    """ip -> its lease versions (namespace, pod, node, network, valid_from, valid_to)."""
    out: dict[str, list[dict[str, Any]]] = {}
    if not ips:
        return out
    for r in ctx.rows(
        f"""
        SELECT ip, namespace, pod, node, network, valid_from, valid_to
        FROM {ctx.table("pod_ip_lease", final=True)}
        WHERE cluster = {{cluster:String}} AND ip IN {{ips:Array(String)}}
          AND valid_from < {{we:{_TS}}}
        ORDER BY valid_from""",
        {"ips": sorted(ips)},
    ):
        out.setdefault(r["ip"], []).append(_utc_row(r, "valid_from", "valid_to"))
    return out


def lease_at(
    by_ip: dict[str, list[dict[str, Any]]], ip: str, at: datetime
) -> dict[str, Any] | None:
    vs = [v for v in by_ip.get(ip, []) if _valid(v, at)]
    return vs[-1] if vs else None


def ip_of_gid(gid: Any) -> str | None:
    """The IPv4 address of a RoCE v2 GID printed as ::ffff:a.b.c.d; None for anything else."""
    if isinstance(gid, str) and gid.lower().startswith("::ffff:") and gid.count(".") == 3:
        return gid[7:]
    return None


def own_addresses(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """IPv4 address -> the lines (ib_completion_error rows of `events`) whose rank printed it as
    its own: NCCL's `localGid` is the GID of the NIC the reporting rank's connection runs on, so
    the line names that address's node, pod and CUDA device at its time. Oldest first."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        ip = ip_of_gid(r["fields"].get("local_gid"))
        if ip and r["pod"]:
            out.setdefault(ip, []).append(r)
    return out


@dataclass
class Nics:
    """Per node: each GPU's rail and NIC (gpu_nic_affinity), each rail's NIC and leaf port (LLDP),
    and each leaf's ports towards other switches (the ECMP group a pair under two leaves crosses)."""

    gpu: dict[tuple[str, int], tuple[int | None, str]]  # (node, gpu) -> (rail, nic)
    rail: dict[tuple[str, int], tuple[str, str]]  # (node, rail) -> (nic, leaf port)
    uplinks: dict[str, list[str]]  # leaf -> its ports whose neighbour is a switch

    @classmethod
    def of(cls, ctx: Context) -> Nics:
        def build() -> Nics:
            gpu = {
                (r["node"], int(r["gpu"])): (
                    None if r["rail"] is None else int(r["rail"]),
                    r["nic"],
                )
                for r in ctx.rows(f"""
                SELECT node, gpu, argMax(rail, ts) AS rail, argMax(nic, ts) AS nic
                FROM {ctx.table("gpu_nic_affinity")}
                WHERE cluster = {{cluster:String}} AND ts < {{we:{_TS}}}
                GROUP BY node, gpu""")
            }
            rail = {
                (r["node"], int(r["rail"])): (r["nic"], r["port"]) for r in ctx.rows(nic_sql(ctx))
            }
            nodes = {n for n, _ in gpu}
            up: dict[str, list[str]] = {}
            leaves = {p.split(":", 1)[0] for _, p in rail.values() if p}
            for (dev, port), (rdev, _) in lldp_peers(ctx).items():
                if dev in leaves and rdev and rdev not in nodes:
                    up.setdefault(dev, []).append(f"{dev}:{port}")
            return cls(gpu, rail, {k: sorted(v) for k, v in up.items()})

        # the state as of the tick: read again where the affinity or LLDP changed
        return ctx.as_of_state("log_resolve.nics", ("gpu_nic_affinity", "lldp_link"), build)  # type: ignore[no-any-return]

    def rail_of_nic(self, node: str, nic: str) -> int | None:
        """The rail of a NIC the node's inventory names (NCCL 2.2x+ prints the `hca` an IB
        completion error came from); None for a name the inventory does not know (a VF's)."""
        rails = sorted(r for (n, r), (name, _) in self.rail.items() if n == node and name == nic)
        return rails[0] if rails else None

    def gpu_of_rail(self, node: str, rail: int) -> int | None:
        gs = sorted(g for (n, g), (r, _) in self.gpu.items() if n == node and r == rail)
        return gs[0] if gs else None


@dataclass
class Ranks:
    """Per communicator member: from the `nccl_init_complete` lines of the window, each pod's
    ranks (its local ranks in order: local rank k drives the pod's k-th GPU), the ranks' count
    and the communicator's id."""

    of_pod: dict[tuple[str, str], list[int]]  # (ns, pod) -> its ranks, sorted (latest comm)
    pod_of: dict[tuple[str, str, int], tuple[str, str]]  # (ns, comm id, rank) -> (node, pod)
    comm_of: dict[tuple[str, str], tuple[str, int]]  # (ns, pod) -> (comm id, nranks)

    @classmethod
    def of(cls, ctx: Context) -> Ranks:
        """From the init lines of the `logs.state_seconds` before the window's end (a job's
        ranks initialise once, long before the errors they later log)."""
        return ctx.cached("log_resolve.ranks", lambda: cls._of(ctx))  # type: ignore[no-any-return]

    @classmethod
    def _of(cls, ctx: Context) -> Ranks:
        since = ctx.window.end - timedelta(seconds=float(ctx.t("logs.state_seconds")))
        kinds = ("nccl_init_complete",)
        rows = events(ctx, kinds, since)
        version = rows_version(ctx, kinds)
        if version is None:
            return cls._from(rows)
        # a batch run: built again only where the init lines changed
        return ctx.remembered("log_resolve.ranks", version, lambda: cls._from(rows))  # type: ignore[no-any-return]

    @classmethod
    def _from(cls, rows: list[dict[str, Any]]) -> Ranks:
        of_pod: dict[tuple[str, str], set[int]] = {}
        pod_of: dict[tuple[str, str, int], tuple[str, str]] = {}
        comm_of: dict[tuple[str, str], tuple[str, int]] = {}
        for e in rows:
            f = e["fields"]
            try:
                rank, n, comm = int(f["rank"]), int(f["nranks"]), str(f.get("comm_id") or "")
            except (KeyError, TypeError, ValueError):
                continue
            key = (e["namespace"], e["pod"])
            if comm_of.get(key, (comm, n)) != (comm, n):
                of_pod[key] = set()  # a newer communicator of the pod: its ranks from now on
            comm_of[key] = (comm, n)
            of_pod.setdefault(key, set()).add(rank)
            pod_of[(e["namespace"], comm, rank)] = (e["node"], e["pod"])
        return cls({k: sorted(v) for k, v in of_pod.items()}, pod_of, comm_of)

    def rank(self, ns: str, pod: str, local: int) -> int | None:
        rs = self.of_pod.get((ns, pod), [])
        return rs[local] if 0 <= local < len(rs) else None

    def local(self, ns: str, pod: str, rank: int) -> int | None:
        rs = self.of_pod.get((ns, pod), [])
        return rs.index(rank) if rank in rs else None


__all__ = [
    "Nics",
    "Pods",
    "Ranks",
    "events",
    "ip_of_gid",
    "lease_at",
    "leases",
    "own_addresses",
    "rail_of",
    "rows_version",
]
