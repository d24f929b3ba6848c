"""A pod's NCCL settings: the NCCL_* environment variables of its containers, as the pod spec
gives them (`env` and `envFrom`), as `nccl_setting` facts.

A value written in the spec is taken as it is; one from a ConfigMap is resolved when the inventory
has that ConfigMap at hand (listed, watched or in the same dump), else stored as '' with its
source named (`configmap_unresolved`, `ref` = the ConfigMap and key). A value from a Secret
(`secretKeyRef`, `envFrom.secretRef`) and a variable whose name looks like a secret are never
stored, not even by name. Reads plain dicts; never talks to a cluster.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from exporters.inventory.objects import JOB_NAME_LABELS, KEY_FIELDS, Fact, check_row
from telemetry.times import iso_to_ms

# What a setting is (a variable name prefix) and what is never stored: names that look like
# secrets, whatever their prefix (operators set NCCL_* plugin credentials through env too).
PREFIXES = ("NCCL_",)
SECRET_NAME = re.compile(r"(SECRET|PASSWORD|PASSWD|TOKEN|CREDENTIAL|PRIVATE|API_?KEY|AUTH)", re.I)
# a ConfigMap value kept for resolving env: settings are short; a large blob is not one
MAX_VALUE_CHARS = 4096

ConfigMaps = Mapping[tuple[str, str], Mapping[str, str]]  # (namespace, name) -> data


def is_setting(name: str, prefixes: tuple[str, ...] = PREFIXES) -> bool:
    return name.startswith(prefixes) and not SECRET_NAME.search(name)


def configmap_data(obj: Mapping[str, Any]) -> dict[str, str]:
    """The string data of a ConfigMap worth keeping for env resolution (binaryData and values
    longer than MAX_VALUE_CHARS left out)."""
    data = obj.get("data")
    if not isinstance(data, Mapping):
        return {}
    return {str(k): v for k, v in data.items() if isinstance(v, str) and len(v) <= MAX_VALUE_CHARS}


def settings(
    ns: str,
    spec: Mapping[str, Any],
    configmaps: ConfigMaps,
    prefixes: tuple[str, ...] = PREFIXES,
) -> tuple[list[dict[str, str]], set[str]]:
    """Every NCCL setting of the pod's containers (init containers first, as the spec orders
    them): rows of container, name, value, source, ref; and the ConfigMaps it names that were not
    at hand (so the caller can resolve them once they are). Later entries of one container win,
    as in Kubernetes (`env` over `envFrom`, a later `env` over an earlier one)."""
    out: list[dict[str, str]] = []
    missing: set[str] = set()
    for section in ("initContainers", "containers"):
        cs = spec.get(section)
        for c in cs if isinstance(cs, list) else []:
            if not isinstance(c, Mapping):
                continue
            name = str(c.get("name") or "")
            found: dict[str, dict[str, str]] = {}
            for row in _env_from(ns, c.get("envFrom"), configmaps, prefixes, missing):
                found[row["name"]] = row
            for row in _env(ns, c.get("env"), configmaps, prefixes, missing):
                found[row["name"]] = row
            for row in found.values():
                out.append({"container": name, **row})
    return out, missing


def _env_from(
    ns: str,
    entries: Any,
    configmaps: ConfigMaps,
    prefixes: tuple[str, ...],
    missing: set[str],
) -> list[dict[str, str]]:
    rows = []
    for e in entries if isinstance(entries, list) else []:
        if not isinstance(e, Mapping):
            continue
        ref = e.get("configMapRef")
        if not isinstance(ref, Mapping):
            continue  # secretRef: never read
        cm, prefix = str(ref.get("name") or ""), str(e.get("prefix") or "")
        data = configmaps.get((ns, cm))
        if data is None:
            missing.add(cm)
            continue  # which variables it holds is unknown until it is at hand
        for key, value in data.items():
            var = prefix + key
            if is_setting(var, prefixes):
                rows.append(_row(var, value, "configmap", f"configmap {cm} (envFrom)"))
    return rows


def _env(
    ns: str,
    entries: Any,
    configmaps: ConfigMaps,
    prefixes: tuple[str, ...],
    missing: set[str],
) -> list[dict[str, str]]:
    rows = []
    for e in entries if isinstance(entries, list) else []:
        if not isinstance(e, Mapping) or not isinstance(e.get("name"), str):
            continue
        var = e["name"]
        if not is_setting(var, prefixes):
            continue
        src = e.get("valueFrom")
        if not isinstance(src, Mapping):
            value = e.get("value")
            rows.append(_row(var, value if isinstance(value, str) else "", "value", ""))
            continue
        if "secretKeyRef" in src:
            continue  # a secret: not stored, not even by name
        cmk = src.get("configMapKeyRef")
        if isinstance(cmk, Mapping):
            cm, key = str(cmk.get("name") or ""), str(cmk.get("key") or "")
            ref = f"configmap {cm} key {key}"
            data = configmaps.get((ns, cm))
            if data is not None and key in data:
                rows.append(_row(var, data[key], "configmap", ref))
            else:
                if data is None:
                    missing.add(cm)
                rows.append(_row(var, "", "configmap_unresolved", ref))
        elif isinstance(src.get("fieldRef"), Mapping):
            rows.append(_row(var, "", "field", f"fieldRef {src['fieldRef'].get('fieldPath', '')}"))
        elif isinstance(src.get("resourceFieldRef"), Mapping):
            res = src["resourceFieldRef"].get("resource", "")
            rows.append(_row(var, "", "resource", f"resourceFieldRef {res}"))
    return rows


def _row(name: str, value: str, source: str, ref: str) -> dict[str, str]:
    return {"name": name, "value": value, "source": source, "ref": ref}


def setting_facts(
    obj: Mapping[str, Any], configmaps: ConfigMaps, prefixes: tuple[str, ...] = PREFIXES
) -> tuple[list[Fact], set[str]]:
    """A Pod object's `nccl_setting` facts (from its creation time, like the pod fact) and the
    ConfigMaps it names that were not at hand."""
    meta, spec = obj.get("metadata"), obj.get("spec")
    if not isinstance(meta, Mapping) or not isinstance(spec, Mapping):
        return [], set()
    ns, pod = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
    labels = meta.get("labels")
    labels = labels if isinstance(labels, Mapping) else {}
    job = next((str(labels[k]) for k in JOB_NAME_LABELS if labels.get(k)), "")
    start = iso_to_ms(meta.get("creationTimestamp"))
    rows, missing = settings(ns, spec, configmaps, prefixes)
    facts = []
    for r in rows:
        row = {"namespace": ns, "pod": pod, **r, "job": job}
        check_row("nccl_setting", row, f"Pod {ns}/{pod}: env {r['name']}")
        key = tuple(str(row.pop(k)) for k in KEY_FIELDS["nccl_setting"])
        facts.append(Fact("nccl_setting", key, tuple(sorted(row.items())), start))
    return facts, missing


class Settings:
    """The inventory's side of pods' NCCL settings: the ConfigMaps at hand, and the pods whose
    env named one that was not (read again once it is). Pods wait only when ConfigMaps will come
    at all (`expected`: watched, or in a dump), so a cluster without them keeps none in memory."""

    def __init__(self, prefixes: tuple[str, ...] = PREFIXES) -> None:
        self.prefixes = prefixes
        self.configmaps: dict[tuple[str, str], dict[str, str]] = {}
        self.waiting: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = {}
        self.expected = False

    def facts(self, pod: Mapping[str, Any], ns: str, name: str) -> list[Fact]:
        facts, missing = setting_facts(pod, self.configmaps, self.prefixes)
        for cm in missing if self.expected else ():
            self.waiting.setdefault((ns, cm), {})[name] = pod
        return facts

    def configmap(self, etype: str, key: tuple[str, str], obj: Mapping[str, Any]) -> list[Any]:
        """A ConfigMap event; returns the pods that waited for it (to be read again). A change
        to it or its deletion changes nothing of a running container's env."""
        if etype == "DELETED":
            self.configmaps.pop(key, None)
            return []
        self.configmaps[key] = configmap_data(obj)
        return list(self.waiting.pop(key, {}).values())

    def pod_gone(self, ns: str, name: str) -> None:
        for (wns, _), pods in self.waiting.items():
            if wns == ns:
                pods.pop(name, None)

    def listed(self, keys: set[tuple[str, str]]) -> None:
        """A full list of ConfigMaps: the ones no longer listed are gone."""
        self.configmaps = {k: v for k, v in self.configmaps.items() if k in keys}


__all__ = ["PREFIXES", "Settings", "configmap_data", "is_setting", "setting_facts", "settings"]
