"""Kubernetes/Volcano objects -> inventory facts (pod, pod_ip_lease, node, hypernode, job, and for
the GPU pool queue, podgroup, priority_class, resource_quota; pod preemption/eviction events as
pod_event rows), and the loader for `kubectl get -o json|yaml` dumps (List objects, single objects, multi-document YAML).

Reads plain dicts as the API serves them; never talks to a cluster. A malformed object raises
`Malformed` naming it; the caller reports and skips it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from telemetry.errors import UserError
from telemetry.times import iso_to_ms
from telemetry.topology.hypernodes import MalformedHyperNode, parse_hypernode

NETWORK_STATUS = "k8s.v1.cni.cncf.io/network-status"
ALLOCATED_HYPERNODE = "volcano.sh/job-allocated-hypernode"
JOB_NAME_LABELS = ("volcano.sh/job-name", "batch.volcano.sh/job-name")
# Node labels that name the data center and scalable unit, first present wins.
IDC_LABELS = ("railscope.io/idc", "topology.kubernetes.io/region", "topology.kubernetes.io/zone")
SU_LABELS = ("railscope.io/su",)


class Malformed(ValueError):
    """An object that cannot be turned into facts; the message names it."""


@dataclass(frozen=True)
class Fact:
    """One inventory fact: record kind, key (the kind's ORDER BY fields minus cluster/valid_from),
    the other values, and when it started if the object says so (ms)."""

    kind: str
    key: tuple[str, ...]
    values: tuple[tuple[str, Any], ...]
    start_ms: int | None = None


KEY_FIELDS: dict[str, tuple[str, ...]] = {
    "namespace": ("namespace",),
    "pod": ("namespace", "pod"),
    "pod_ip_lease": ("ip",),
    "node": ("node",),
    "hypernode": ("hypernode", "member"),
    "job": ("namespace", "job"),
    "queue": ("queue",),
    "podgroup": ("namespace", "podgroup"),
    "priority_class": ("priority_class",),
    "resource_quota": ("namespace", "quota"),
}
GPU = "nvidia.com/gpu"
GPU_PRODUCT = "nvidia.com/gpu.product"  # GPU Feature Discovery's model label
GROUP_NAME = "scheduling.k8s.io/group-name"  # Volcano's PodGroup annotation on its pods
HIERARCHY = "volcano.sh/hierarchy"


def _fact(kind: str, start_ms: int | None = None, **fields: Any) -> Fact:
    keys = KEY_FIELDS[kind]
    key = tuple(str(fields.pop(k)) for k in keys)
    return Fact(kind, key, tuple(sorted(fields.items())), start_ms)


def _created(kind: str, meta: Mapping[str, Any], **fields: Any) -> list[Fact]:
    """The one `kind` fact of an object, holding from its metadata.creationTimestamp."""
    return [_fact(kind, iso_to_ms(meta.get("creationTimestamp")), **fields)]


def object_id(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return (
        str(obj.get("kind") or ""),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


def describe(obj: Mapping[str, Any]) -> str:
    k, ns, name = object_id(obj)
    return f"{k} {ns + '/' if ns else ''}{name or '?'}"


# --- per kind ----------------------------------------------------------------------------------
def pod_facts(obj: Mapping[str, Any], warnings: list[str]) -> list[Fact]:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    ns, name = meta.get("namespace") or "default", meta.get("name")
    if not name:
        raise Malformed("Pod without metadata.name")
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    job = next((labels[k] for k in JOB_NAME_LABELS if labels.get(k)), "")
    node = spec.get("nodeName") or ""
    phase = status.get("phase") or ""
    start = iso_to_ms(meta.get("creationTimestamp"))
    facts = [
        _fact(
            "pod",
            start,
            namespace=ns,
            pod=name,
            uid=meta.get("uid") or "",
            node=node,
            job=job,
            phase=phase,
            gpus="",
            gpu_requests=pod_gpu_requests(spec, f"Pod {ns}/{name}", warnings),
            priority_class=spec.get("priorityClassName") or "",
            podgroup=annotations.get(GROUP_NAME) or "",
            gpu_model=required_gpu_model(spec),
        )
    ]
    # An IP belongs to a pod while it is Pending/Running; hostNetwork pods share the node's IP.
    if phase not in ("Pending", "Running") or spec.get("hostNetwork"):
        return facts
    ip_start = iso_to_ms(status.get("startTime")) or start
    entries: list[Mapping[str, Any]] = []
    raw = annotations.get(NETWORK_STATUS)
    if raw:
        try:
            parsed = json.loads(raw)
            if not isinstance(parsed, list) or not all(isinstance(e, Mapping) for e in parsed):
                raise ValueError("not a JSON list of objects")
            entries = parsed
        except ValueError as e:
            warnings.append(
                f"Pod {ns}/{name}: annotation {NETWORK_STATUS} is not valid network-status JSON ({e}); "
                "its secondary IPs were skipped"
            )
    primary_ips = [p.get("ip") for p in status.get("podIPs") or [] if p.get("ip")] or (
        [status["podIP"]] if status.get("podIP") else []
    )
    default = next((e for e in entries if e.get("default")), {})
    seen: set[str] = set()

    def lease(ip: str, interface: str, network: str, mac: str, pci: str, primary: bool) -> None:
        seen.add(ip)
        facts.append(
            _fact("pod_ip_lease", ip_start, ip=ip, namespace=ns, pod=name, node=node,
                  interface=interface, network=network, mac=mac, pci_address=pci,
                  primary=primary)
        )  # fmt: skip

    for ip in primary_ips:
        lease(ip, default.get("interface") or "eth0", "", default.get("mac") or "", "", True)
    for ent in entries:
        if ent.get("default"):
            continue
        dev = ent.get("device-info") or {}
        pci = (dev.get("pci") or {}).get("pci-address", "") if isinstance(dev, Mapping) else ""
        for ip in ent.get("ips") or []:
            ip = str(ip).split("/")[0]  # device-info-spec examples carry CIDR notation
            if ip not in seen:
                lease(ip, ent.get("interface") or "", ent.get("name") or "", ent.get("mac") or "",
                      pci or "", False)  # fmt: skip
    return facts


TENANT_LABEL = "railscope.io/tenant"


def namespace_facts(obj: Mapping[str, Any]) -> list[Fact]:
    """A namespace is a tenant; the railscope.io/tenant label groups several namespaces."""
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not name:
        raise Malformed("Namespace without metadata.name")
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    return _created(
        "namespace",
        meta,
        namespace=name,
        tenant=labels.get(TENANT_LABEL) or name,
        labels=json.dumps(labels, sort_keys=True, separators=(",", ":")),
    )


def node_facts(obj: Mapping[str, Any], warnings: list[str]) -> list[Fact]:
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    name = meta.get("name")
    if not name:
        raise Malformed("Node without metadata.name")
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    gpus = gpu_quantity(status.get("allocatable"), f"Node {name}: allocatable", warnings) or 0
    capacity = gpu_quantity(status.get("capacity"), f"Node {name}: capacity", warnings)
    return _created(
        "node",
        meta,
        node=name,
        labels=json.dumps(labels, sort_keys=True, separators=(",", ":")),
        idc=next((labels[k] for k in IDC_LABELS if labels.get(k)), ""),
        su=next((labels[k] for k in SU_LABELS if labels.get(k)), ""),
        gpus=gpus,
        gpu_capacity=capacity,
        gpu_model=labels.get(GPU_PRODUCT, ""),
    )


def hypernode_facts(obj: Mapping[str, Any], warnings: list[str]) -> list[Fact]:
    try:
        spec = parse_hypernode(obj)
    except MalformedHyperNode as e:
        raise Malformed(str(e)) from None
    start = iso_to_ms((obj.get("metadata") or {}).get("creationTimestamp"))
    return [
        _fact(
            "hypernode",
            start,
            hypernode=spec.name,
            member=m.render(),
            tier=spec.tier,
            tier_name=spec.tier_name,
            member_type=m.type,
            selector=m.selector,
        )
        for m in spec.members
    ]


def topology_fields(nt: Any, where: str) -> dict[str, Any]:
    if not nt:
        return {"topology_mode": "", "highest_tier_allowed": None, "highest_tier_name": None}
    if not isinstance(nt, Mapping):
        raise Malformed(f"{where}: spec.networkTopology is not a mapping")
    mode = nt.get("mode") or "hard"
    if mode not in ("hard", "soft"):
        raise Malformed(f"{where}: spec.networkTopology.mode {mode!r} is not hard or soft")
    tier = nt.get("highestTierAllowed")
    if tier is not None:
        try:
            tier = int(tier)
        except (TypeError, ValueError):
            raise Malformed(f"{where}: highestTierAllowed {tier!r} is not an integer") from None
    return {
        "topology_mode": mode,
        "highest_tier_allowed": tier,
        "highest_tier_name": nt.get("highestTierName"),
    }


def job_facts(obj: Mapping[str, Any], allocated: str = "") -> list[Fact]:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    name = meta.get("name")
    if not name:
        raise Malformed("Job without metadata.name")
    replicas = 0
    for t in spec.get("tasks") or []:
        try:
            replicas += int(t.get("replicas") or 0)
        except (TypeError, ValueError):
            raise Malformed(
                f"Job {meta.get('namespace')}/{name}: tasks[].replicas is not an integer"
            ) from None
    return [_job_fact(obj, replicas, allocated)]


def podgroup_job(obj: Mapping[str, Any]) -> str:
    """The Volcano Job owning a PodGroup ('' when it is a standalone PodGroup)."""
    for o in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if o.get("kind") == "Job":
            return str(o.get("name") or "")
    return ""


def podgroup_facts(obj: Mapping[str, Any]) -> list[Fact]:
    """A standalone PodGroup (no owning Job) is stored as a job row of its own."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    name = meta.get("name")
    if not name:
        raise Malformed("PodGroup without metadata.name")
    allocated = (meta.get("annotations") or {}).get(ALLOCATED_HYPERNODE, "")
    return [_job_fact(obj, int(spec.get("minMember") or 0), allocated)]


def _job_fact(obj: Mapping[str, Any], replicas: int, allocated: str) -> Fact:
    """The job row of a Volcano Job or a standalone PodGroup (they differ in where replicas and
    the allocated HyperNode come from)."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    return _fact(
        "job",
        iso_to_ms(meta.get("creationTimestamp")),
        namespace=meta.get("namespace") or "default",
        job=meta["name"],
        queue=spec.get("queue") or "default",
        replicas=replicas,
        allocated_hypernode=allocated,
        **topology_fields(spec.get("networkTopology"), describe(obj)),
    )


# --- GPU pool ----------------------------------------------------------------------------------
def _integer(value: Any, what: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise Malformed(f"{what} {value!r} is not an integer") from None


def _parts(
    obj: Mapping[str, Any], kind: str
) -> tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any], str]:
    """metadata, spec, status and the name of an object that must have one."""
    meta = obj.get("metadata") or {}
    if not meta.get("name"):
        raise Malformed(f"{kind} without metadata.name")
    return meta, obj.get("spec") or {}, obj.get("status") or {}, str(meta["name"])


def gpu_quantity(resources: Any, where: str, warnings: list[str], key: str = GPU) -> int | None:
    """nvidia.com/gpu from a resource list (None when absent). GPUs are whole devices: a value
    that is not a whole number is reported and read as absent."""
    if not isinstance(resources, Mapping) or key not in resources:
        return None
    raw = resources[key]
    try:
        value = float(str(raw))
        if value < 0 or value != int(value):
            raise ValueError
    except ValueError:
        warnings.append(f"{where} {key} {raw!r} is not a whole number of GPUs; ignored")
        return None
    return int(value)


def pod_gpu_requests(spec: Mapping[str, Any], where: str, warnings: list[str]) -> int | None:
    """GPUs a pod requests: the sum over its containers (an extended resource's request defaults
    to its limit), or the largest init container's if that is more, as the scheduler counts it."""

    def one(c: Mapping[str, Any]) -> int:
        res = c.get("resources") or {}
        req = gpu_quantity(res.get("requests"), where, warnings)
        return req if req is not None else gpu_quantity(res.get("limits"), where, warnings) or 0

    main = sum(one(c) for c in spec.get("containers") or [] if isinstance(c, Mapping))
    init = max(
        (one(c) for c in spec.get("initContainers") or [] if isinstance(c, Mapping)), default=0
    )
    return max(main, init) or None


def required_gpu_model(spec: Mapping[str, Any]) -> str:
    """The GPU model(s) a pod may run on: its nodeSelector, else a required node affinity `In`
    term on nvidia.com/gpu.product ('|'-joined); '' = any model."""
    sel = (spec.get("nodeSelector") or {}).get(GPU_PRODUCT)
    if sel:
        return str(sel)
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in required.get("nodeSelectorTerms") or []:
        for e in (term or {}).get("matchExpressions") or []:
            if e.get("key") == GPU_PRODUCT and e.get("operator") == "In" and e.get("values"):
                return "|".join(sorted(str(v) for v in e["values"]))
    return ""


def queue_facts(obj: Mapping[str, Any], warnings: list[str]) -> list[Fact]:
    meta, spec, status, name = _parts(obj, "Queue")
    where = f"Queue {name}:"
    parent = spec.get("parent") or ""
    path = str((meta.get("annotations") or {}).get(HIERARCHY) or "")
    if not parent and "/" in path:  # hierarchy by annotation (root/eng/prod): its parent segment
        parent = path.rsplit("/", 2)[-2]
    weight = _integer(spec.get("weight") or 1, f"{where} spec.weight")
    guarantee = spec.get("guarantee") or {}
    return _created(
        "queue",
        meta,
        queue=name,
        parent=str(parent),
        state=str(status.get("state") or ""),
        weight=weight,
        reclaimable=spec.get("reclaimable") is not False,
        capability_gpus=gpu_quantity(spec.get("capability"), f"{where} capability", warnings),
        deserved_gpus=gpu_quantity(spec.get("deserved"), f"{where} deserved", warnings),
        guarantee_gpus=gpu_quantity(
            guarantee.get("resource") if isinstance(guarantee, Mapping) else None,
            f"{where} guarantee",
            warnings,
        ),
    )


def podgroup_gang_facts(obj: Mapping[str, Any], warnings: list[str]) -> list[Fact]:
    """The gang itself (every PodGroup, owned by a Job or not)."""
    meta, spec, status, name = _parts(obj, "PodGroup")
    ns = meta.get("namespace") or "default"
    unsched = next(
        (
            c
            for c in status.get("conditions") or []
            if isinstance(c, Mapping)
            and c.get("type") == "Unschedulable"
            and str(c.get("status")) == "True"
        ),
        None,
    )
    return _created(
        "podgroup",
        meta,
        namespace=ns,
        podgroup=name,
        job=podgroup_job(obj),
        queue=spec.get("queue") or "default",
        priority_class=spec.get("priorityClassName") or "",
        min_member=_integer(spec.get("minMember") or 0, f"PodGroup {ns}/{name}: spec.minMember"),
        min_gpus=gpu_quantity(
            spec.get("minResources"), f"PodGroup {ns}/{name}: minResources", warnings
        )
        or 0,
        phase=str(status.get("phase") or ""),
        unschedulable=unsched is not None,
        reason=(
            ": ".join(str(unsched[k]) for k in ("reason", "message") if unsched.get(k))
            if unsched
            else ""
        ),
    )


# Where a PriorityClass says its provisioning type and purpose: labels first, then annotations.
PROVISIONING_KEYS = ("railscope.io/provisioning",)
PURPOSE_KEYS = ("railscope.io/purpose",)


def priority_class_facts(
    obj: Mapping[str, Any],
    provisioning_keys: tuple[str, ...] = PROVISIONING_KEYS,
    purpose_keys: tuple[str, ...] = PURPOSE_KEYS,
) -> list[Fact]:
    meta, _, _, name = _parts(obj, "PriorityClass")
    tags = {**(meta.get("annotations") or {}), **(meta.get("labels") or {})}
    return _created(
        "priority_class",
        meta,
        priority_class=name,
        value=_integer(obj.get("value") or 0, f"PriorityClass {name}: value"),
        preemption_policy=str(obj.get("preemptionPolicy") or "PreemptLowerPriority"),
        global_default=bool(obj.get("globalDefault")),
        provisioning=next((str(tags[k]) for k in provisioning_keys if tags.get(k)), ""),
        purpose=next((str(tags[k]) for k in purpose_keys if tags.get(k)), ""),
    )


def resource_quota_facts(obj: Mapping[str, Any], warnings: list[str]) -> list[Fact]:
    meta, spec, status, name = _parts(obj, "ResourceQuota")
    ns = meta.get("namespace") or "default"
    where = f"ResourceQuota {ns}/{name}:"
    key = "requests." + GPU
    return _created(
        "resource_quota",
        meta,
        namespace=ns,
        quota=name,
        gpus_hard=gpu_quantity(spec.get("hard"), f"{where} hard", warnings, key),
        gpus_used=gpu_quantity(status.get("used"), f"{where} used", warnings, key),
    )


# Events that take GPUs away from a pod: kube-scheduler's preemption, Volcano's evictor
# (preempt/reclaim), the kubelet's node-pressure eviction.
POD_EVENT_REASONS = frozenset({"Preempted", "Evict", "Evicted"})
_PREEMPTOR = re.compile(r"[Pp]reempted by (?:pod )?(\S+)")
_ON_NODE = re.compile(r"on node (\S+)")


def pod_event_row(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """A pod_event row for a preemption/eviction Event, None for any other event."""
    inv = obj.get("involvedObject") or obj.get("regarding") or {}
    reason = str(obj.get("reason") or "")
    if inv.get("kind") != "Pod" or reason not in POD_EVENT_REASONS:
        return None
    meta = obj.get("metadata") or {}
    msg = str(obj.get("message") or obj.get("note") or "")
    ts = next(
        (
            t
            for t in (
                iso_to_ms(obj.get(k)) for k in ("lastTimestamp", "eventTime", "firstTimestamp")
            )
            if t is not None
        ),
        iso_to_ms(meta.get("creationTimestamp")),
    )
    if ts is None:
        raise Malformed(f"Event {meta.get('namespace')}/{meta.get('name')}: no timestamp")
    pre, on = _PREEMPTOR.search(msg), _ON_NODE.search(msg)
    source = obj.get("source") or {}
    return {
        "ts": ts,
        "namespace": inv.get("namespace") or meta.get("namespace") or "default",
        "pod": str(inv.get("name") or ""),
        "uid": str(meta.get("uid") or meta.get("name") or ""),
        "reason": reason,
        "message": msg,
        "preemptor": pre.group(1) if pre else "",
        "node": on.group(1) if on else "",
        "source": str(source.get("component") or obj.get("reportingComponent") or ""),
        "count": int(obj.get("count") or 1),
    }


# --- dumps -------------------------------------------------------------------------------------
def iter_objects(doc: Any) -> Iterator[dict[str, Any]]:
    """Flatten List objects (kind: List / PodList ...)."""
    if not isinstance(doc, Mapping):
        return
    items = doc.get("items")
    if isinstance(items, list) and str(doc.get("kind", "")).endswith("List"):
        item_kind = str(doc.get("kind"))[: -len("List")]
        for it in items:
            if isinstance(it, Mapping):
                it = dict(it)
                if not it.get("kind") and item_kind:
                    it["kind"] = item_kind
                yield from iter_objects(it) if str(it.get("kind", "")).endswith("List") else [it]
        return
    yield dict(doc)


def load_dump(path: str | Path) -> list[dict[str, Any]]:
    """Objects from a file or a directory of *.json / *.yaml / *.yml files (sorted by name)."""
    import yaml

    p = Path(path)
    if not p.exists():
        raise UserError(f"{p}: no such file or directory")
    files = (
        sorted(f for f in p.rglob("*") if f.suffix in (".json", ".yaml", ".yml") and f.is_file())
        if p.is_dir()
        else [p]
    )
    objs: list[dict[str, Any]] = []
    for f in files:
        text = f.read_text()
        try:
            if f.suffix == ".json" or text.lstrip().startswith(("{", "[")):
                data = json.loads(text)
                docs = data if isinstance(data, list) else [data]
            else:
                docs = list(yaml.safe_load_all(text))
        except (ValueError, yaml.YAMLError) as e:
            raise UserError(f"{f}: not valid JSON/YAML: {str(e).splitlines()[0]}") from None
        for d in docs:
            objs.extend(iter_objects(d))
    return objs
