"""Kubernetes/Volcano objects -> inventory facts (pod, pod_ip_lease, node, hypernode, job, and for
the GPU pool queue, podgroup, priority_class, resource_quota; pod preemption/eviction events as
pod_event rows), and the loader for `kubectl get -o json|yaml` dumps (List objects, single objects, multi-document YAML).

Reads plain dicts as the API serves them; never talks to a cluster. A malformed object raises
`Malformed` naming it; the caller reports and skips it.
"""

from __future__ import annotations

import json
import re
import reprlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

from telemetry.errors import UserError
from telemetry.records import KINDS
from telemetry.times import iso_to_ms
from telemetry.topology.hypernodes import (
    MalformedHyperNode,
    member_problems,
    parse_hypernode,
    stored_selector,
)

NETWORK_STATUS = "k8s.v1.cni.cncf.io/network-status"
# what Multus before v3.4.1 wrote instead (v3.4.1 onwards writes both)
OLD_NETWORK_STATUS = "k8s.v1.cni.cncf.io/networks-status"
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
    "nccl_setting": ("namespace", "pod", "container", "name"),
}
GPU = "nvidia.com/gpu"
GPU_PRODUCT = "nvidia.com/gpu.product"  # GPU Feature Discovery's model label
GROUP_NAME = "scheduling.k8s.io/group-name"  # Volcano's PodGroup annotation on its pods
# Volcano Jobs are `kind: Job` of this API group; Kubernetes' batch/v1 Job has the same kind
VOLCANO_JOB_GROUP = "batch.volcano.sh"
VOLCANO_JOB_API = VOLCANO_JOB_GROUP + "/v1alpha1"
HIERARCHY = "volcano.sh/hierarchy"


_short = reprlib.Repr()
_short.maxstring = _short.maxother = 40


def _what(v: Any) -> str:
    """A value as an error message names it: its type and a short repr."""
    return f"{type(v).__name__} {_short.repr(v)}"


def mapping(v: Any, where: str) -> Mapping[str, Any]:
    """A field that must hold an object: {} when absent/empty, Malformed when it holds another type."""
    if not v:
        return {}
    if not isinstance(v, Mapping):
        raise Malformed(f"{where} is a {_what(v)}, not an object")
    return v


def items(v: Any, where: str) -> list[Mapping[str, Any]]:
    """A field that must hold a list of objects ([] when absent/empty)."""
    if not v:
        return []
    if not isinstance(v, list):
        raise Malformed(f"{where} is a {_what(v)}, not a list")
    for i, e in enumerate(v):
        if not isinstance(e, Mapping):
            raise Malformed(f"{where}[{i}] is a {_what(e)}, not an object")
    return v


_INT_RANGE = {
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def check_row(kind: str, row: Mapping[str, Any], where: str) -> None:
    """Every value of a row fits its record field (what Arrow would reject later, named now):
    text that is a str and encodes as UTF-8 (no lone surrogate), integers in the column's
    range, booleans that are bool."""
    k = KINDS[kind]
    for name, v in row.items():
        f = k.by_name.get(name)
        if f is None or v is None:
            continue
        t = str(f.arrow_type)
        if t == "string":
            ok = isinstance(v, str) and (v.isascii() or _utf8(v))
        elif t == "bool":
            ok = isinstance(v, bool)
        elif t in _INT_RANGE:
            lo, hi = _INT_RANGE[t]
            ok = isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi
        else:
            continue
        if not ok:
            raise Malformed(f"{where}: {name} {_what(v)} does not fit a {t} column")


def _utf8(s: str) -> bool:
    try:
        s.encode()
    except UnicodeEncodeError:
        return False
    return True


def _fact(kind: str, start_ms: int | None = None, **fields: Any) -> Fact:
    keys = KEY_FIELDS[kind]
    where = f"{kind} {'/'.join(_short.repr(fields.get(k)) for k in keys)}"
    check_row(kind, fields, where)
    key = tuple(str(fields.pop(k)) for k in keys)
    return Fact(kind, key, tuple(sorted(fields.items())), start_ms)


def _created(kind: str, meta: Mapping[str, Any], **fields: Any) -> list[Fact]:
    """The one `kind` fact of an object, holding from its metadata.creationTimestamp."""
    return [_fact(kind, iso_to_ms(meta.get("creationTimestamp")), **fields)]


def object_id(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return (
        _short.repr(obj.get("kind") or "").strip("'"),
        _short.repr(meta.get("namespace") or "").strip("'"),
        _short.repr(meta.get("name") or "").strip("'"),
    )


def describe(obj: Mapping[str, Any]) -> str:
    k, ns, name = object_id(obj)
    return f"{k} {ns + '/' if ns else ''}{name or '?'}"


def sections(
    obj: Mapping[str, Any], kind: str
) -> tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any], str]:
    """metadata, spec and status (each an object or absent) and metadata.name (a string), of an
    object that must have a name; Malformed naming the object and the field otherwise."""
    meta = mapping(obj.get("metadata"), f"{kind} metadata")
    name = meta.get("name")
    if not name:
        raise Malformed(f"{kind} without metadata.name")
    ns = meta.get("namespace")
    if not isinstance(name, str) or not (ns is None or isinstance(ns, str)):
        raise Malformed(
            f"{kind} {_short.repr(ns)}/{_short.repr(name)}: name/namespace not a string"
        )
    where = f"{kind} {ns + '/' if ns else ''}{_short.repr(name)}"
    return (
        meta,
        mapping(obj.get("spec"), f"{where}: spec"),
        mapping(obj.get("status"), f"{where}: status"),
        name,
    )


def string_map(meta: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
    """metadata.labels / annotations: a string -> string map (a value of another type is named)."""
    out = {}
    for k, v in mapping(meta.get(key), f"{where}: metadata.{key}").items():
        if not isinstance(v, str):
            raise Malformed(
                f"{where}: metadata.{key}[{_short.repr(k)}] is a {_what(v)}, not a string"
            )
        out[str(k)] = v
    return out


# --- per kind ----------------------------------------------------------------------------------
def pod_facts(obj: Mapping[str, Any], warnings: list[str]) -> list[Fact]:
    meta, spec, status, name = sections(obj, "Pod")
    ns = meta.get("namespace") or "default"
    where = f"Pod {ns}/{name}"
    labels = string_map(meta, "labels", where)
    annotations = string_map(meta, "annotations", where)
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
            gpu_requests=pod_gpu_requests(spec, where, warnings),
            priority_class=spec.get("priorityClassName") or "",
            podgroup=annotations.get(GROUP_NAME) or "",
            gpu_model=required_gpu_model(spec, where),
        )
    ]
    # An IP belongs to a pod while it is Pending/Running; hostNetwork pods share the node's IP.
    if phase not in ("Pending", "Running") or spec.get("hostNetwork"):
        return facts
    ip_start = iso_to_ms(status.get("startTime")) or start
    entries: list[Mapping[str, Any]] = []
    key = NETWORK_STATUS if NETWORK_STATUS in annotations else OLD_NETWORK_STATUS
    raw = annotations.get(key)
    if raw:
        try:
            parsed = json.loads(raw)
            if not isinstance(parsed, list) or not all(isinstance(e, Mapping) for e in parsed):
                raise ValueError("not a JSON list of objects")
            entries = parsed
        except ValueError as e:
            warnings.append(
                f"Pod {ns}/{name}: annotation {key} is not valid network-status JSON ({e}); "
                "its secondary IPs were skipped"
            )
    primary_ips = [
        p.get("ip") for p in items(status.get("podIPs"), f"{where}: status.podIPs") if p.get("ip")
    ] or ([status["podIP"]] if status.get("podIP") else [])
    default = next((e for e in entries if e.get("default")), {})
    seen: set[str] = set()

    def lease(ip: Any, interface: str, network: str, mac: str, pci: str, primary: bool) -> None:
        if not isinstance(ip, str):
            raise Malformed(f"{where}: pod IP {_what(ip)} is not text")
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
        pci_info = dev.get("pci") if isinstance(dev, Mapping) else None
        pci = pci_info.get("pci-address", "") if isinstance(pci_info, Mapping) else ""
        ips = ent.get("ips") or []
        for ip in ips if isinstance(ips, list) else [ips]:
            ip = str(ip).split("/")[0]  # device-info-spec examples carry CIDR notation
            if ip not in seen:
                lease(ip, ent.get("interface") or "", ent.get("name") or "", ent.get("mac") or "",
                      pci or "", False)  # fmt: skip
    return facts


TENANT_LABEL = "railscope.io/tenant"


def namespace_facts(obj: Mapping[str, Any]) -> list[Fact]:
    """A namespace is a tenant; the railscope.io/tenant label groups several namespaces."""
    meta, _, _, name = sections(obj, "Namespace")
    labels = string_map(meta, "labels", f"Namespace {name}")
    return _created(
        "namespace",
        meta,
        namespace=name,
        tenant=labels.get(TENANT_LABEL) or name,
        labels=json.dumps(labels, sort_keys=True, separators=(",", ":")),
    )


def node_facts(obj: Mapping[str, Any], warnings: list[str]) -> list[Fact]:
    meta, _, status, name = sections(obj, "Node")
    labels = string_map(meta, "labels", f"Node {name}")
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
    # stored as declared; a member Volcano resolves to nothing is named, the others still count
    warnings.extend(f"HyperNode {p.subject}: {p.message}" for p in member_problems(spec))
    start = iso_to_ms(mapping(obj.get("metadata"), "HyperNode metadata").get("creationTimestamp"))
    return [
        _fact(
            "hypernode",
            start,
            hypernode=spec.name,
            member=m.render(),
            tier=spec.tier,
            tier_name=spec.tier_name,
            member_type=m.type,
            selector=stored_selector(m),
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
        tier = _integer(tier, f"{where}: highestTierAllowed")
    return {
        "topology_mode": mode,
        "highest_tier_allowed": tier,
        "highest_tier_name": nt.get("highestTierName"),
    }


def job_facts(obj: Mapping[str, Any], allocated: str = "") -> list[Fact]:
    meta, spec, _, name = sections(obj, "Job")
    where = f"Job {meta.get('namespace')}/{name}"
    replicas = 0
    for t in items(spec.get("tasks"), f"{where}: spec.tasks"):
        replicas += _integer(t.get("replicas") or 0, f"{where}: tasks[].replicas")
    return [_job_fact(obj, replicas, allocated)]


def is_volcano_job(obj: Mapping[str, Any]) -> bool:
    """A Volcano Job, as an object or an ownerReference: kind Job of API group batch.volcano.sh
    (any version). A Kubernetes batch/v1 Job is not one."""
    api = obj.get("apiVersion")
    return (
        obj.get("kind") == "Job"
        and isinstance(api, str)
        and api.rpartition("/")[0] == VOLCANO_JOB_GROUP
    )


def podgroup_job(obj: Mapping[str, Any]) -> str:
    """The Volcano Job owning a PodGroup ('' when none: a standalone PodGroup, or one Volcano's
    PodGroup controller made for the pod of another controller, e.g. a batch/v1 Job)."""
    meta = mapping(obj.get("metadata"), "PodGroup metadata")
    for o in items(meta.get("ownerReferences"), "PodGroup metadata.ownerReferences"):
        if is_volcano_job(o):
            return str(o.get("name") or "")
    return ""


def podgroup_facts(obj: Mapping[str, Any]) -> list[Fact]:
    """A standalone PodGroup (no owning Job) is stored as a job row of its own."""
    meta, spec, _, name = sections(obj, "PodGroup")
    where = f"PodGroup {meta.get('namespace')}/{name}"
    allocated = string_map(meta, "annotations", where).get(ALLOCATED_HYPERNODE, "")
    return [
        _job_fact(obj, _integer(spec.get("minMember") or 0, f"{where}: spec.minMember"), allocated)
    ]


def _job_fact(obj: Mapping[str, Any], replicas: int, allocated: str) -> Fact:
    """The job row of a Volcano Job or a standalone PodGroup (they differ in where replicas and
    the allocated HyperNode come from)."""
    meta, spec, _, _ = sections(obj, str(obj.get("kind") or "Job"))
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
    """An integer field (a number or its decimal text); Malformed naming it otherwise."""
    try:
        if isinstance(value, float) and not value.is_integer():
            raise ValueError
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise Malformed(f"{what} {_what(value)} is not an integer") from None


_parts = sections


# A Kubernetes resource.Quantity (apimachinery pkg/api/resource/quantity.go): a signed decimal
# number, then a binary SI suffix, a decimal SI suffix or a decimal exponent ("1E" is 10**18,
# "1E3" is 1000).
_QUANTITY = re.compile(
    r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)
_BINARY_SI = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}  # powers of 1024
_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def parse_quantity(raw: Any) -> Fraction:
    """The exact value of a Kubernetes quantity ("8", "1k", "2Ki", "1e3", "500m"; a YAML number
    is read as its decimal text). ValueError saying why when it is not one, or when it lies
    outside 1e-30..1e21 (no count railscope reads comes near)."""
    m = (
        _QUANTITY.fullmatch(str(raw))
        if isinstance(raw, str | int | float) and not isinstance(raw, bool)
        else None
    )
    if m is None:
        raise ValueError("not a Kubernetes quantity")
    number, suffix = Decimal(m[1]), m[2] or ""
    binary = _BINARY_SI.get(suffix, 0)
    exp10 = 3 * binary if binary else _DECIMAL_SI.get(suffix)
    if exp10 is None:
        exp10 = int(suffix[1:]) if len(suffix) < 12 else 10**9  # eN / EN
    if number and not -30 <= number.adjusted() + exp10 <= 21:
        raise ValueError("a Kubernetes quantity out of range")
    return Fraction(number) * (Fraction(1024) ** binary if binary else Fraction(10) ** exp10)


def gpu_quantity(resources: Any, where: str, warnings: list[str], key: str = GPU) -> int | None:
    """nvidia.com/gpu (or `key`) from a resource list, a Kubernetes quantity (None when absent).
    GPUs are whole devices: a value that is not a quantity or not a whole number is reported and
    read as absent, never rounded."""
    if not isinstance(resources, Mapping) or key not in resources:
        return None
    raw = resources[key]
    try:
        value = parse_quantity(raw)
    except ValueError as e:
        warnings.append(f"{where} {key} {raw!r} is {e}; ignored")
        return None
    if value < 0 or value.denominator != 1:
        warnings.append(f"{where} {key} {raw!r} is not a whole number of GPUs; ignored")
        return None
    return int(value)


def pod_gpu_requests(spec: Mapping[str, Any], where: str, warnings: list[str]) -> int | None:
    """GPUs a pod requests: the sum over its containers (an extended resource's request defaults
    to its limit), or the largest init container's if that is more, as the scheduler counts it."""

    def one(c: Mapping[str, Any]) -> int:
        res = mapping(c.get("resources"), f"{where}: containers[].resources")
        req = gpu_quantity(res.get("requests"), where, warnings)
        return req if req is not None else gpu_quantity(res.get("limits"), where, warnings) or 0

    main = sum(one(c) for c in items(spec.get("containers"), f"{where}: spec.containers"))
    init = max(
        (one(c) for c in items(spec.get("initContainers"), f"{where}: spec.initContainers")),
        default=0,
    )
    return max(main, init) or None


def required_gpu_model(spec: Mapping[str, Any], where: str = "Pod") -> str:
    """The GPU model(s) a pod may run on: its nodeSelector, else a required node affinity `In`
    term on nvidia.com/gpu.product ('|'-joined); '' = any model."""
    sel = mapping(spec.get("nodeSelector"), f"{where}: spec.nodeSelector").get(GPU_PRODUCT)
    if sel:
        return str(sel)
    affinity = mapping(spec.get("affinity"), f"{where}: spec.affinity")
    required = mapping(
        mapping(affinity.get("nodeAffinity"), f"{where}: spec.affinity.nodeAffinity").get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ),
        f"{where}: nodeAffinity.required",
    )
    for term in items(required.get("nodeSelectorTerms"), f"{where}: nodeSelectorTerms"):
        for e in items(
            term.get("matchExpressions"), f"{where}: nodeSelectorTerms[].matchExpressions"
        ):
            values = e.get("values")
            if e.get("key") == GPU_PRODUCT and e.get("operator") == "In" and values:
                if not isinstance(values, list):
                    raise Malformed(
                        f"{where}: matchExpressions[].values is a {_what(values)}, not a list"
                    )
                return "|".join(sorted(str(v) for v in values))
    return ""


def queue_facts(obj: Mapping[str, Any], warnings: list[str]) -> list[Fact]:
    meta, spec, status, name = _parts(obj, "Queue")
    where = f"Queue {name}:"
    parent = spec.get("parent") or ""
    path = string_map(meta, "annotations", where).get(HIERARCHY) or ""
    if not parent and "/" in path:  # hierarchy by annotation (root/eng/prod): its parent segment
        parent = path.rsplit("/", 2)[-2]
    weight = _integer(spec.get("weight") or 1, f"{where} spec.weight")
    guarantee = mapping(spec.get("guarantee"), f"{where} spec.guarantee")
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
            guarantee.get("resource"),
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
            for c in items(status.get("conditions"), f"PodGroup {ns}/{name}: status.conditions")
            if c.get("type") == "Unschedulable" and str(c.get("status")) == "True"
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
    where = f"PriorityClass {name}"
    tags = {**string_map(meta, "annotations", where), **string_map(meta, "labels", where)}
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
    inv = mapping(obj.get("involvedObject") or obj.get("regarding"), "Event involvedObject")
    reason = str(obj.get("reason") or "")
    if inv.get("kind") != "Pod" or reason not in POD_EVENT_REASONS:
        return None
    meta = mapping(obj.get("metadata"), "Event metadata")
    where = f"Event {_short.repr(meta.get('namespace'))}/{_short.repr(meta.get('name'))}"
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
        raise Malformed(f"{where}: no timestamp")
    pre, on = _PREEMPTOR.search(msg), _ON_NODE.search(msg)
    source = mapping(obj.get("source"), f"{where}: source")
    row = {
        "ts": ts,
        "namespace": inv.get("namespace") or meta.get("namespace") or "default",
        "pod": str(inv.get("name") or ""),
        "uid": str(meta.get("uid") or meta.get("name") or ""),
        "reason": reason,
        "message": msg,
        "preemptor": pre.group(1) if pre else "",
        "node": on.group(1) if on else "",
        "source": str(source.get("component") or obj.get("reportingComponent") or ""),
        "count": _integer(obj.get("count") or 1, f"{where}: count"),
    }
    check_row("pod_event", row, where)
    return row


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
