"""An incident's blast radius: the jobs, tenants and GPUs its findings touch while it lasts
(telemetry/correlate/incidents.py raises an incident's severity by it and writes it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from telemetry.store import Store
from telemetry.times import ts_param, valid_during


class Named(Protocol):
    """What impact reads of a finding (an incidents Member)."""

    @property
    def subject_type(self) -> str: ...
    @property
    def subject(self) -> str: ...
    @property
    def evidence(self) -> Mapping[str, Any]: ...


@dataclass
class Impact:
    jobs: list[str] = field(default_factory=list)  # namespace/job
    tenants: list[str] = field(default_factory=list)
    gpus: int = 0


@dataclass(frozen=True)
class Span:
    """One incident asked about: its findings, and the span it lasted."""

    members: Iterable[Named]
    lo: datetime
    hi: datetime


def impacts(store: Store, cluster: str, spans: Sequence[Span]) -> list[Impact]:
    """The jobs (and their tenants and GPUs) each incident of `spans` touches: jobs it names,
    jobs with pods on the nodes of its GPUs/NICs/nodes, and jobs whose flows left through its
    ports, while it lasted (inventory as of that span). Two statements at most for all of them:
    the jobs on their nodes, pods and ports; the GPUs of those jobs' pods and their namespaces'
    tenants."""
    p: dict[str, Any] = {"c": cluster}
    pods_t = store.table("pod", final=True)
    found = []  # each incident's jobs (tagged with its index): on its nodes/pods, and both ends
    # of the flows through its ports
    jobs: list[set[str]] = []
    # each incident's inventory condition: versions valid at some point of its span
    during = [
        valid_during(ts_param(f"lo{i}"), ts_param(f"hi{i}"), closed=True) for i in range(len(spans))
    ]
    for i, sp in enumerate(spans):
        nodes, pods, named, ports = _subjects(sp.members)
        jobs.append(named)
        p |= {f"lo{i}": sp.lo, f"hi{i}": sp.hi}
        if nodes or pods:
            p |= {f"nodes{i}": sorted(nodes), f"pods{i}": sorted(pods)}
            found.append(
                f"SELECT DISTINCT {i}, 'pod', namespace, job, '', '' FROM {pods_t} "
                f"WHERE cluster = {{c:String}} AND job != '' AND (node IN {{nodes{i}:Array(String)}} "
                f"OR concat(namespace, '/', pod) IN {{pods{i}:Array(String)}}) AND {during[i]}"
            )
        if ports:
            p[f"ports{i}"] = sorted(ports)
            found.append(
                f"SELECT DISTINCT {i}, 'flow', src_namespace, src_job, dst_namespace, dst_job "
                f"FROM {store.table('attributed_flow')} WHERE cluster = {{c:String}} "
                f"AND ts >= {ts_param(f'lo{i}')} - INTERVAL 1 MINUTE AND ts <= {ts_param(f'hi{i}')} "
                f"AND (switch, out_port) IN {{ports{i}:Array(Tuple(String, String))}}"
            )
    for i, what, ns, job, ns2, job2 in (
        store.query_rows(" UNION ALL ".join(found), p) if found else []
    ):
        for a, b in ((ns, job), (ns2, job2)) if what == "flow" else ((ns, job),):
            if b and (a or what == "pod"):  # a pod's job (never ''), a flow's end with both
                jobs[i].add(f"{a}/{b}")
    if not any(jobs):
        return [Impact() for _ in spans]
    gpus_of = []  # each incident's GPUs: its jobs' pods while it lasted
    for i, js in enumerate(jobs):
        if js:
            p[f"jobs{i}"] = sorted(tuple(j.split("/", 1)) for j in js)
            gpus_of.append(
                f"SELECT {i}, 'gpus', '', '', sum(n) FROM (SELECT namespace, pod, "
                "length(JSONExtractArrayRaw(argMax(gpus, valid_from))) AS n "
                f"FROM {pods_t} WHERE cluster = {{c:String}} "
                f"AND (namespace, job) IN {{jobs{i}:Array(Tuple(String, String))}} "
                f"AND {during[i]} GROUP BY namespace, pod)"
            )
    p["nss"] = sorted({j.split("/", 1)[0] for js in jobs for j in js})
    tenant: dict[str, str] = {}
    gpus: dict[int, int] = {}
    for i, what, a, b, n in store.query_rows(
        " UNION ALL ".join(gpus_of)
        + " UNION ALL SELECT -1, 'tenant', namespace, argMax(tenant, valid_from), 0 "
        f"FROM {store.table('namespace', final=True)} "
        "WHERE cluster = {c:String} AND namespace IN {nss:Array(String)} GROUP BY namespace",
        p,
    ):
        if what == "gpus":
            gpus[i] = int(n or 0)
        else:
            tenant[a] = b
    out = []
    for i, js in enumerate(jobs):
        nss = {j.split("/", 1)[0] for j in js}
        out.append(Impact(sorted(js), sorted({tenant.get(ns) or ns for ns in nss}), gpus.get(i, 0)))
    return out


def _subjects(
    members: Iterable[Named],
) -> tuple[set[str], set[str], set[str], set[tuple[str, ...]]]:
    """The nodes, pods, jobs and (switch, port)s an incident's findings name."""
    nodes: set[str] = set()
    pods: set[str] = set()
    jobs: set[str] = set()
    ports: set[tuple[str, ...]] = set()
    for m in members:
        if m.subject_type in ("gpu", "nic", "node"):
            nodes.add(m.subject.split("/")[0])
        elif m.subject_type == "job":
            jobs.add(m.subject)
        elif m.subject_type == "flow" and "->" in m.subject:
            pods.update(p for p in m.subject.split("->") if "/" in p)
        elif m.subject_type == "port" and ":" in m.subject:
            ports.add(tuple(m.subject.split(":", 1)))
        nodes.update(n for n in m.evidence.get("nodes", []) if isinstance(n, str))
        pods.update(p for p in m.evidence.get("pods", []) if isinstance(p, str))
    return nodes, pods, jobs, ports
