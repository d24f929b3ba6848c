"""Detection quality: compare the `findings` table with a simulation's ground truth.

Reads findings (kind, subject, window) from the store and maps their kinds onto fault kinds with
`finding_map.yaml` only — never the engine's internals; which kinds are effects (unscored, and
never an incident's root) it takes from the kinds' declarations (telemetry/correlate/kinds.yaml).
Precision is per finding, recall and localization per injected fault. With no findings it says so and computes nothing. Incidents are
scored the same way by their root finding (`score_incidents`): what a person is paged for.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from telemetry.correlate.causes import effect_kinds
from telemetry.correlate.kinds import check_declared
from telemetry.sim.faults import CONSEQUENCE_FAULT_KINDS, SETTING_FAULT_KINDS
from telemetry.sim.model import Fault, GroundTruth
from telemetry.sim.scenario import FAULT_KINDS

FINDING_MAP_FILE = Path(__file__).parent / "finding_map.yaml"


@dataclass
class Finding:
    kind: str
    subject: str
    start_ms: int
    end_ms: int
    action: str = ""  # the action its evidence recommends (a gpu_xid's, from NVIDIA's catalog)


class Rate:
    """A score's rate: one of its counts over another, None when the denominator is 0."""

    def __init__(self, num: str, den: str) -> None:
        self.num, self.den = num, den

    def __get__(self, obj: Any, owner: Any = None) -> float | None:
        d = getattr(obj, self.den)
        return getattr(obj, self.num) / d if d else None


class Counts:
    """A dataclass of counts (and lists of names) with Rate attributes; as JSON: the counts, the
    rates, then the lists."""

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)  # type: ignore[call-overload]
        lists = {k: d.pop(k) for k in list(d) if isinstance(d[k], list)}
        rates = {k: getattr(self, k) for k, v in vars(type(self)).items() if isinstance(v, Rate)}
        return {**d, **rates, **lists}


@dataclass
class KindScore(Counts):
    kind: str
    faults: int = 0
    detected: int = 0
    localized: int = 0
    findings: int = 0
    true_findings: int = 0

    precision = Rate("true_findings", "findings")
    recall = Rate("detected", "faults")
    localization = Rate("localized", "detected")


@dataclass
class IncidentScore(Counts):
    """Incidents judged by their root finding: true when the root's kind detects a fault (or is
    implied by it) whose window it overlaps and whose names include the root's subject."""

    incidents: int = 0  # scored: roots that are causes
    true_incidents: int = 0
    faults: int = 0
    detected: int = 0  # faults with a true incident
    consequence_roots: int = 0  # incidents whose root is an effect: not scored
    quiet_faults: int = 0  # IGNORE-class events: they must not page (not in `faults`)
    quiet_paged: int = 0  # incidents about one of those only (counted false)
    false: list[str] = field(default_factory=list)  # root kind + subject of each false incident
    missed: list[str] = field(default_factory=list)  # fault kind + subject of each missed fault

    precision = Rate("true_incidents", "incidents")
    recall = Rate("detected", "faults")
    incidents_per_fault = Rate("incidents", "faults")


@dataclass
class Score:
    findings_total: int
    kinds: list[KindScore]
    unmapped: dict[str, int] = field(default_factory=dict)
    consequences: dict[str, int] = field(default_factory=dict)
    incidents: IncidentScore | None = None
    # faults whose ground truth names the action to take (detail["action"]): how many were found
    # by a true finding recommending exactly that action, and the others
    actions_judged: int = 0
    actions_right: int = 0
    actions_wrong: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "findings_total": self.findings_total,
            "kinds": [k.to_json() for k in self.kinds],
            "unmapped": self.unmapped,
            "consequences": self.consequences,
            "incidents": self.incidents.to_json() if self.incidents else None,
            "actions": {
                "judged": self.actions_judged,
                "right": self.actions_right,
                "wrong": self.actions_wrong,
            },
        }


def load_finding_map(path: str | Path = FINDING_MAP_FILE) -> tuple[dict[str, str], set[str]]:
    """(finding kind -> fault kind, the effect kinds left unscored): finding_map.yaml's map, and
    the engine's effects (kinds.yaml `effect_of`) that the map gives no fault kind of their own.
    A key that is not a declared finding kind is refused (a dead alias scores nothing)."""
    d = yaml.safe_load(Path(path).read_text())
    mapping = dict(d.get("finding_kinds") or {})
    check_declared(mapping, str(path))
    known = (*FAULT_KINDS, *SETTING_FAULT_KINDS, *CONSEQUENCE_FAULT_KINDS)
    bad = sorted(v for v in mapping.values() if v not in known)
    if bad:
        raise ValueError(f"{path}: unknown fault kind(s) {bad}")
    effects = effect_kinds()
    # derived truth (a slowdown a collision caused) must be what the engine calls an effect, or
    # the scorer and the engine's incidents would disagree on what is paged for
    causes = sorted(
        k for k, v in mapping.items() if v in CONSEQUENCE_FAULT_KINDS and k not in effects
    )
    if causes:
        raise ValueError(
            f"{path}: {causes} map onto derived fault kinds but the engine's causal model "
            "(effect_of in telemetry/correlate/kinds.yaml) does not declare them effects"
        )
    return mapping, {k for k in effects if k not in mapping}


def _spans(
    store: Any, kind: str, what: str, where: str, cluster: str, start_ms: int, end_ms: int
) -> list[Finding]:
    """`what` (a kind, a subject and an action column) of the `kind` table's rows of `cluster`
    that overlap start .. end, each standing for its whole span, first_seen .. last_seen."""
    rows = store.query_rows(
        f"SELECT {what}, toUnixTimestamp64Milli(first_seen), toUnixTimestamp64Milli(last_seen) "
        f"FROM {store.table(kind, final=True)} WHERE cluster = {{c:String}}{where} "
        "AND last_seen >= fromUnixTimestamp64Milli({s:Int64}, 'UTC') AND first_seen <= fromUnixTimestamp64Milli({e:Int64}, 'UTC')",
        {"c": cluster, "s": start_ms, "e": end_ms},
    )
    return [Finding(str(k), str(s), int(a), int(b), str(x)) for k, s, x, a, b in rows]


def read_findings(store: Any, cluster: str, start_ms: int, end_ms: int) -> list[Finding]:
    """Findings in the window (a finding that persisted stands for its whole span), with the
    action their evidence recommends ('' for none)."""
    what = "kind, subject, JSONExtractString(evidence, 'action')"
    return _spans(store, "finding", what, "", cluster, start_ms, end_ms)


def read_incidents(store: Any, cluster: str, start_ms: int, end_ms: int) -> list[Finding]:
    """Incidents in the window as their root: (root kind, root subject, first .. last seen)."""
    live = " AND merged_into = ''"  # a merged incident lives on in the one it joined
    what = "root_kind, root_subject, ''"
    return _spans(store, "incident", what, live, cluster, start_ms, end_ms)


def pages(g: Fault) -> bool:
    """Whether a fault should page: not an IGNORE-class event (its ground truth's action, taken
    from NVIDIA's Xid catalog by the simulator)."""
    return g.detail.get("action") != "IGNORE"


def score_incidents(
    truth: GroundTruth, roots: list[Finding], tolerance_s: float = 60.0
) -> IncidentScore:
    """Incident-level precision and recall, and incidents per fault (see IncidentScore)."""
    mapping, _ = load_finding_map()
    # an effect (derived truth too: a slowdown a collision caused) is paged for as part of its
    # cause's incident (the engine's causal model): only root faults are counted
    # ... unless the map gives the effect an injected fault kind of its own (a collective timeout
    # with no cause at hand: the rank that never entered the collective is the fault)
    consequences = {k for k in effect_kinds() if mapping.get(k) in (None, *CONSEQUENCE_FAULT_KINDS)}
    roots_of = [g for g in truth.faults if g.kind not in CONSEQUENCE_FAULT_KINDS]
    faults = [g for g in roots_of if g.scored and pages(g)]
    tol = int(tolerance_s * 1000)
    out = IncidentScore(
        faults=len(faults), quiet_faults=sum(1 for g in roots_of if g.scored and not pages(g))
    )
    hit: set[str] = set()
    for r in roots:
        if r.kind in consequences:
            out.consequence_roots += 1
            continue
        fk = mapping.get(r.kind)
        subj = _norm(r.subject)
        match = [
            g
            for g in roots_of
            if (g.kind == fk or fk in g.implied_kinds)
            and _overlaps(r, g, tol)
            and subj in {_norm(x) for x in g.subjects}
        ]
        if match and not any(g.scored for g in match):
            continue  # about a fault not scored either way (Fault.scored)
        match = [g for g in match if g.scored]
        out.incidents += 1
        if any(pages(g) for g in match):
            out.true_incidents += 1
            hit.update(g.id for g in match if pages(g))
        elif match:  # about an IGNORE-class event only: it must not page
            out.quiet_paged += 1
            out.false.append(f"{r.kind} {r.subject} (an IGNORE-class event: must not page)")
        else:
            out.false.append(f"{r.kind} {r.subject}")
    out.detected = sum(1 for g in faults if g.id in hit)
    out.missed = [f"{g.kind} {g.subject}" for g in faults if g.id not in hit]
    return out


def _overlaps(f: Finding, fault: Fault, tol_ms: int) -> bool:
    return f.start_ms <= fault.end_ms + tol_ms and f.end_ms >= fault.start_ms - tol_ms


def score(truth: GroundTruth, findings: list[Finding], tolerance_s: float = 60.0) -> Score:
    """Per fault kind: precision (per finding), recall and localization (per injected fault)."""
    mapping, consequences = load_finding_map()
    tol = int(tolerance_s * 1000)
    kinds = {
        k: KindScore(k) for k in (*FAULT_KINDS, *SETTING_FAULT_KINDS, *CONSEQUENCE_FAULT_KINDS)
    }
    out = Score(len(findings), [])
    by_fault: dict[str, list[Finding]] = {}
    for f in findings:
        if f.kind in consequences:
            out.consequences[f.kind] = out.consequences.get(f.kind, 0) + 1
            continue
        fk = mapping.get(f.kind)
        if fk is None:
            out.unmapped[f.kind] = out.unmapped.get(f.kind, 0) + 1
            continue
        ks = kinds[fk]
        ks.findings += 1
        subj = _norm(f.subject)
        hits = [g for g in truth.faults if g.kind == fk and _overlaps(f, g, tol)]
        implied = [g for g in truth.faults if fk in g.implied_kinds and _overlaps(f, g, tol)]
        named = [g for g in hits if subj in {_norm(x) for x in g.subjects}]
        if named and not any(g.scored for g in named):
            ks.findings -= 1  # about a fault not scored either way (Fault.scored)
            continue
        named, hits = [g for g in named if g.scored], [g for g in hits if g.scored]
        if not named and any(subj in {_norm(x) for x in g.subjects} for g in implied):
            ks.findings -= 1  # true, but a side effect of another injected fault: not scored
        elif named or hits:
            ks.true_findings += 1
            for g in named or hits:
                by_fault.setdefault(g.id, []).append(f)
        elif implied:
            ks.findings -= 1
    for g in truth.faults:
        if not g.scored:
            continue
        ks = kinds[g.kind]
        ks.faults += 1
        found = by_fault.get(g.id, [])
        if found:
            ks.detected += 1
            names = {_norm(x) for x in g.subjects}
            if any(_norm(f.subject) in names for f in found):
                ks.localized += 1
        want = g.detail.get("action")
        if want:  # the action railscope recommends must be the one the ground truth names
            out.actions_judged += 1
            said = sorted({f.action for f in found if f.kind == _ACTION_KINDS.get(g.kind)})
            if said == [want]:
                out.actions_right += 1
            else:
                out.actions_wrong.append(f"{g.kind} {g.subject}: {want}, railscope said {said}")
    out.kinds = [k for k in kinds.values() if k.faults or k.findings]
    return out


# the finding kind whose evidence carries the action for a fault kind with an expected action
_ACTION_KINDS = {"gpu_xid": "gpu_xid", "gpu_lost": "gpu_lost"}


def _norm(subject: str) -> str:
    # engines write a port as switch/port or switch:port; both name the same thing
    return subject.strip().replace(":", "/")


def render(s: Score, truth: GroundTruth) -> str:
    span = f"{_iso(truth.start_ms)} .. {_iso(truth.end_ms)}"
    marginal = sum(1 for f in truth.faults if not f.scored)
    lines = [
        f"scenario {truth.scenario} (seed {truth.seed}), {span}: {len(truth.faults) - marginal} ground-truth fault(s), "
        f"{s.findings_total} finding(s) in the window"
        + (
            f"; {marginal} too close to a threshold to score, or that nothing could show (not counted either way)"
            if marginal
            else ""
        )
    ]
    if s.findings_total == 0:
        lines.append(
            "no findings in the store for this run: nothing to score (a healthy run finds nothing; "
            "if the correlation engine has not run, run `railscope correlate`). Ground truth per kind:"
        )
        for k in sorted({f.kind for f in truth.faults}):
            lines.append(f"  {k:<34} {sum(1 for f in truth.faults if f.kind == k)} fault(s)")
        return "\n".join(lines)

    def pct(v: float | None) -> str:
        return "   -" if v is None else f"{v * 100:4.0f}%"

    lines.append(
        f"  {'fault kind':<34} {'faults':>6} {'found':>6} {'findings':>8} {'precision':>9} {'recall':>7} {'localized':>9}"
    )
    for ks in s.kinds:
        lines.append(
            f"  {ks.kind:<34} {ks.faults:>6} {ks.detected:>6} {ks.findings:>8} {pct(ks.precision):>9} "
            f"{pct(ks.recall):>7} {pct(ks.localization):>9}"
        )
    tf = sum(k.findings for k in s.kinds)
    tt = sum(k.true_findings for k in s.kinds)
    nf = sum(k.faults for k in s.kinds)
    nd = sum(k.detected for k in s.kinds)
    nl = sum(k.localized for k in s.kinds)
    lines.append(
        f"  {'all':<34} {nf:>6} {nd:>6} {tf:>8} {pct(tt / tf if tf else None):>9} "
        f"{pct(nd / nf if nf else None):>7} {pct(nl / nd if nd else None):>9}"
    )
    if s.actions_judged:
        lines.append(
            f"  actions: {s.actions_right}/{s.actions_judged} events found with the action their "
            f"ground truth names ({pct(s.actions_right / s.actions_judged).strip()})"
        )
        lines += [f"    wrong action: {x}" for x in s.actions_wrong]
    if s.unmapped:
        lines.append(
            "  finding kinds not in finding_map.yaml (not scored): "
            + ", ".join(f"{k} ({n})" for k, n in sorted(s.unmapped.items()))
        )
    if s.consequences:
        lines.append(
            "  consequence findings (not scored): "
            + ", ".join(f"{k} ({n})" for k, n in sorted(s.consequences.items()))
        )
    inc = s.incidents
    if inc is not None:
        per = inc.incidents_per_fault
        lines.append(
            f"  incidents: {inc.incidents} for {inc.faults} fault(s) ({'-' if per is None else f'{per:.2f}'} per fault), "
            f"precision {pct(inc.precision).strip()}, recall {pct(inc.recall).strip()}"
            + (
                f"; {inc.consequence_roots} rooted in a consequence (not scored)"
                if inc.consequence_roots
                else ""
            )
        )
        if inc.quiet_faults:
            lines.append(
                f"  IGNORE-class events: {inc.quiet_faults}, incidents for them: {inc.quiet_paged}"
            )
        for x in inc.false:
            lines.append(f"    false incident: {x}")
        for x in inc.missed:
            lines.append(f"    fault without an incident: {x}")
    return "\n".join(lines)


def _iso(ms: int) -> str:
    from datetime import UTC

    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


__all__ = [
    "Finding",
    "IncidentScore",
    "Score",
    "load_finding_map",
    "pages",
    "read_findings",
    "read_incidents",
    "render",
    "score",
    "score_incidents",
]
