"""What to do about a finding: the templates its kind declares (kinds.yaml `do`), filled with the
finding's own values (its subject and evidence), and the kind's runbook (docs/runbooks.md,
rendered from the same declarations: `python -m telemetry.correlate.remediation > docs/runbooks.md`).

Reads the kinds' declarations only; never queries the store, never changes a finding.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any

from telemetry.correlate.kinds import kinds

RUNBOOKS = "docs/runbooks.md"


def runbook(kind: str) -> str:
    """The kind's section of the runbooks page (docs/runbooks.md#kind)."""
    return f"{RUNBOOKS}#{kind}"


def values(subject_type: str, subject: str, evidence: Mapping[str, Any]) -> dict[str, Any]:
    """What a template may name: the subject, its parts, and the evidence's keys (lists joined;
    empty values left out, so a template naming them is not used)."""
    out: dict[str, Any] = {"subject": subject, "subject_type": subject_type}
    head, _, tail = subject.partition("/")
    if subject_type == "nic":
        out.update(node=head, nic=tail)
    elif subject_type == "gpu":
        out.update(node=head, gpu=tail.removeprefix("gpu"))
    elif subject_type == "port":
        out.update(zip(("switch", "port"), subject.split(":", 1), strict=False))
    elif subject_type == "communicator":
        job_key, _, comm = subject.rpartition("/")
        out.update(job_key=job_key, comm=comm)
    for k, v in evidence.items():
        if isinstance(v, list | tuple):
            v = ", ".join(str(x) for x in v if isinstance(x, str | int | float))
        elif isinstance(v, Mapping):
            v = ", ".join(f"{a}={b}" for a, b in v.items())
        if v is None or v == "":
            continue
        out[k] = v
    return out


def remediation(kind: str, subject_type: str, subject: str, evidence: Mapping[str, Any]) -> str:
    """The first template of `kind` whose every field the finding has, filled; '' for a kind
    kinds.yaml does not declare."""
    entry = kinds().get(kind)
    if entry is None:
        return ""
    have = values(subject_type, subject, evidence)
    for item in entry.do:
        template = item
        if isinstance(item, Mapping):  # {when: {key: [values]}, then: template}
            if not _holds(item["when"], evidence):
                continue
            template = item["then"]
        try:
            return string.Formatter().vformat(template, (), _Strict(have))
        except (KeyError, ValueError, TypeError):  # a field it lacks, or of another type
            continue
    return ""


def _holds(when: Mapping[str, Any], evidence: Mapping[str, Any]) -> bool:
    """Every key of `when` has one of its listed values in the evidence (a bare value is a list
    of one; a key the evidence lacks holds only where null is listed)."""
    for key, allowed in when.items():
        allowed = allowed if isinstance(allowed, list) else [allowed]
        if evidence.get(key) not in allowed:
            return False
    return True


def _text(item: Any) -> str:
    """A template as the runbook shows it: a guarded one with its condition first."""
    if not isinstance(item, Mapping):
        return str(item)
    cond = "; ".join(
        f"{k} {' or '.join('unknown' if v is None else str(v) for v in (vs if isinstance(vs, list) else [vs]))}"
        for k, vs in item["when"].items()
    )
    return f"*{cond}:* {item['then']}"


class _Strict(dict[str, Any]):
    def __missing__(self, key: str) -> Any:
        raise KeyError(key)


def markdown() -> str:
    """docs/runbooks.md: one section per kind (its anchor is the kind), what it means, what to
    do (the templates as written, {names} filled from the finding), and where it is described."""
    lines = [
        "# Runbooks: what to do about each finding",
        "",
        "Rendered from `telemetry/correlate/kinds.yaml` (`python -m "
        "telemetry.correlate.remediation > docs/runbooks.md`; a test checks it is current). Every "
        "incident carries its root finding's remediation, filled with that finding's values "
        "(`railscope incidents`, `railscope report --job`, the HTML report, and Alertmanager's "
        "`remediation` annotation), and a link to its kind's section here (`runbook_url`). The "
        "first template whose every `{name}` the finding has is the one used; a template that "
        "starts with a condition in italics (*action RESTART_APP:*) is used only for a finding "
        "whose evidence meets it.",
        "",
    ]
    for kind, entry in kinds().items():
        lines += [f"## {kind}", "", f"{entry.means[:1].upper()}{entry.means[1:]}.", ""]
        lines += [f"- {_text(t)}" for t in entry.do]
        lines += ["", f"More: [{entry.doc}]({entry.doc.removeprefix('docs/')})", ""]
    return "\n".join(lines)


__all__ = ["RUNBOOKS", "markdown", "remediation", "runbook", "values"]

if __name__ == "__main__":
    print(markdown(), end="")
