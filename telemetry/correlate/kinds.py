"""Finding kinds, each declared once in kinds.yaml: its category (the detector module it lives in),
what it means and what to do, the causes it is usually the effect of, the scope its incidents
group at and whether it opens one, and the thresholds.yaml sections it judges with.

Leaf data: imports nothing of the engine. Everything else that needs to know a kind (the
registry, remediation, causes, incidents, the scorer, the alert rules) reads it from here.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

# the levels an incident may group a kind at (incidents.SCOPE_RULES implements each)
SCOPES = ("idc_pair", "placement_policy", "dci", "job", "hypernode")
# thresholds.yaml sections every detector reads (evaluation spacing, windows, time): no kind's own
ENGINE_THRESHOLDS = ("sliding", "time")

_FIELDS = {
    "category",
    "means",
    "doc",
    "do",
    "effect_of",
    "prefer_usual",
    "scope",
    "missing_data",
    "incident",
    "thresholds",
}
_REQUIRED = ("category", "means", "doc", "do")


@dataclass(frozen=True)
class Kind:
    name: str
    category: str  # the detector module: telemetry/correlate/detectors/<category>.py
    means: str
    doc: str
    do: tuple[Any, ...]  # remediation templates (a str, or {when: ..., then: ...})
    effect_of: tuple[str, ...] | None  # None: a cause
    prefer_usual: bool = False
    scope: str | None = None  # one of SCOPES; None: the subject itself
    missing_data: bool = False
    incident: bool = True
    thresholds: tuple[str, ...] = ()

    @property
    def is_effect(self) -> bool:
        return self.effect_of is not None


class KindError(ValueError):
    """kinds.yaml (or a reader of it) declares something that does not hold."""


@functools.cache
def kinds() -> dict[str, Kind]:
    """kinds.yaml, checked: every finding kind by name, in the file's order."""
    text = resources.files("telemetry.correlate").joinpath("kinds.yaml").read_text()
    # the C parser where there is one: config validation reads this once per process (~4 ms; the
    # pure-Python parse is ten times that)
    return parse(yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {})


def parse(raw: Mapping[str, Any]) -> dict[str, Kind]:
    """Declarations as kinds.yaml holds them, checked; a KindError names the first fault."""
    out: dict[str, Kind] = {}
    for name, d in raw.items():
        if not isinstance(d, Mapping):
            raise KindError(f"kinds.yaml: {name}: a mapping of fields expected")
        unknown = sorted(set(d) - _FIELDS)
        if unknown:
            raise KindError(f"kinds.yaml: {name}: unknown field(s) {', '.join(unknown)}")
        missing = [f for f in _REQUIRED if not d.get(f)]
        if missing:
            raise KindError(f"kinds.yaml: {name}: missing {', '.join(missing)}")
        scope = d.get("scope")
        if scope is not None and scope not in SCOPES:
            raise KindError(
                f"kinds.yaml: {name}: scope {scope!r} is not one of {', '.join(SCOPES)}"
            )
        effect_of = d.get("effect_of")
        out[name] = Kind(
            name=str(name),
            category=str(d["category"]),
            means=str(d["means"]),
            doc=str(d["doc"]),
            do=tuple(d["do"]),
            effect_of=None if effect_of is None else tuple(effect_of),
            prefer_usual=bool(d.get("prefer_usual", False)),
            scope=scope,
            missing_data=bool(d.get("missing_data", False)),
            incident=bool(d.get("incident", True)),
            thresholds=tuple(d.get("thresholds") or ()),
        )
    for k in out.values():
        strays = [c for c in k.effect_of or () if c not in out]
        if strays:
            raise KindError(f"kinds.yaml: {k.name}: effect_of names undeclared {', '.join(strays)}")
        if k.prefer_usual and not k.effect_of:
            raise KindError(f"kinds.yaml: {k.name}: prefer_usual without effect_of kinds")
    return out


def kind(name: str) -> Kind:
    """The declaration of `name`; a KindError for a kind kinds.yaml does not declare."""
    try:
        return kinds()[name]
    except KeyError:
        raise KindError(f"{name}: not a finding kind declared in kinds.yaml") from None


def check_declared(names: Iterable[str], where: str) -> None:
    """Raise KindError when `where` names a kind kinds.yaml does not declare."""
    strays = sorted(set(names) - set(kinds()))
    if strays:
        raise KindError(f"{where}: undeclared finding kind(s) {', '.join(strays)}")


def check_threshold_sections(sections: Iterable[str]) -> None:
    """thresholds.yaml's top-level sections against the declarations: each is the engine's or
    listed by a kind, and each section a kind lists exists."""
    have = set(sections)
    claimed = {s for k in kinds().values() for s in k.thresholds}
    unclaimed = sorted(have - claimed - set(ENGINE_THRESHOLDS))
    if unclaimed:
        raise KindError(
            f"thresholds.yaml: section(s) {', '.join(unclaimed)} judged by no declared kind "
            "(list them in its kinds.yaml `thresholds`)"
        )
    for k in kinds().values():
        absent = [s for s in k.thresholds if s not in have]
        if absent:
            raise KindError(
                f"kinds.yaml: {k.name}: thresholds section(s) {', '.join(absent)} absent"
            )


__all__ = [
    "ENGINE_THRESHOLDS",
    "SCOPES",
    "Kind",
    "KindError",
    "check_declared",
    "check_threshold_sections",
    "kind",
    "kinds",
    "parse",
]
