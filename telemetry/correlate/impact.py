"""An incident's blast radius: the jobs, tenants and GPUs its findings touch while it lasts
(telemetry/correlate/incidents.py raises an incident's severity by it and writes it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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


def impact(
    store: Store, cluster: str, members: Iterable[Named], lo: datetime, hi: datetime
) -> Impact:
    """The jobs (and their tenants and GPUs) an incident touches: jobs it names, jobs with pods
    on the nodes of its GPUs/NICs/nodes, and jobs whose flows left through its ports, while it
    lasted (inventory as of that span). Two statements at most: the jobs on its nodes, pods and
    ports; the GPUs of their pods and their namespaces' tenants."""
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
    p: dict[str, Any] = {
        "c": cluster,
        "lo": lo,
        "hi": hi,
        "nodes": sorted(nodes),
        "pods": sorted(pods),
        "ports": sorted(ports),
    }
    during = valid_during(ts_param("lo"), ts_param("hi"), closed=True)
    pods_t = store.table("pod", final=True)
    found = []  # its jobs: on its nodes/pods, and both ends of the flows through its ports
    if nodes or pods:
        found.append(
            f"SELECT DISTINCT 'pod', namespace, job, '', '' FROM {pods_t} WHERE cluster = {{c:String}} "
            "AND job != '' AND (node IN {nodes:Array(String)} OR concat(namespace, '/', pod) IN "
            f"{{pods:Array(String)}}) AND {during}"
        )
    if ports:
        found.append(
            "SELECT DISTINCT 'flow', src_namespace, src_job, dst_namespace, dst_job "
            f"FROM {store.table('attributed_flow')} WHERE cluster = {{c:String}} "
            "AND ts >= {lo:DateTime64(3, 'UTC')} - INTERVAL 1 MINUTE AND ts <= {hi:DateTime64(3, 'UTC')} "
            "AND (switch, out_port) IN {ports:Array(Tuple(String, String))}"
        )
    for what, ns, job, ns2, job2 in store.query_rows(" UNION ALL ".join(found), p) if found else []:
        for a, b in ((ns, job), (ns2, job2)) if what == "flow" else ((ns, job),):
            if b and (a or what == "pod"):  # a pod's job (never ''), a flow's end with both
                jobs.add(f"{a}/{b}")
    if not jobs:
        return Impact()
    p["jobs"] = sorted(tuple(j.split("/", 1)) for j in jobs)
    nss = sorted({j.split("/", 1)[0] for j in jobs})
    p["nss"] = nss
    tenant, gpus = {}, 0
    for what, a, b, n in store.query_rows(
        "SELECT 'gpus', '', '', sum(n) FROM (SELECT namespace, pod, length(JSONExtractArrayRaw(argMax(gpus, valid_from))) AS n "
        f"FROM {pods_t} WHERE cluster = {{c:String}} AND (namespace, job) IN {{jobs:Array(Tuple(String, String))}} "
        f"AND {during} GROUP BY namespace, pod) "
        f"UNION ALL SELECT 'tenant', namespace, argMax(tenant, valid_from), 0 FROM {store.table('namespace', final=True)} "
        "WHERE cluster = {c:String} AND namespace IN {nss:Array(String)} GROUP BY namespace",
        p,
    ):
        if what == "gpus":
            gpus = int(n or 0)
        else:
            tenant[a] = b
    return Impact(sorted(jobs), sorted({tenant.get(ns) or ns for ns in nss}), gpus)
