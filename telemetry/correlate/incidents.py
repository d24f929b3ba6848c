"""Incidents: findings grouped by root cause, stored in `incidents` + `incident_findings`.

Reads the findings each evaluation wrote (`IncidentTracker.observe`, called by the engine after
the findings are stored) and groups them: one cause seen many times (the same subject, the same
link seen from both ends, the same IDC pair, the same placement-policy failure) overlapping in
time is one incident; a consequence finding (kinds.yaml `effect_of`: the kinds that describe an
effect) joins the incident of the cause its evidence names. It never changes a
finding and never runs a detector; an incident is updated by writing a newer version of the same
id (ReplacingMergeTree), so nothing is duplicated.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from telemetry.correlate.causes import effect_kinds, model, prefer_usual
from telemetry.correlate.impact import Impact, Span, impacts
from telemetry.correlate.kinds import kinds
from telemetry.correlate.pending import Pending
from telemetry.correlate.remediation import remediation, runbook
from telemetry.problems import Problems
from telemetry.records import FINDING, INCIDENT, INCIDENT_FINDING
from telemetry.store import Store
from telemetry.times import as_utc
from telemetry.unionfind import DisjointSets

log = logging.getLogger(__name__)

SEVERITIES = ("critical", "warning", "info")
_RANK = {s: i for i, s in enumerate(SEVERITIES)}
# Blast radius that raises an incident one severity step above its worst member: a fault that
# slows two jobs, two tenants or 1,024 GPUs pages louder than one that touches a single job.
RAISE_AT = {"jobs": 2, "tenants": 2, "gpus": 1024}
STATES = ("open", "resolved")


@dataclass
class Member:
    """A finding as incidents see it."""

    finding_id: str
    kind: str
    severity: str
    subject_type: str
    subject: str
    summary: str
    evidence: dict[str, Any]
    first_seen: datetime
    last_seen: datetime

    @property
    def quiet(self) -> bool:
        """A finding that pages no one (its evidence says `quiet`: an IGNORE-class Xid that has
        not repeated): kept as a finding, it opens and joins no incident. One that paged before
        (it repeated) stays in its incident as it was when it paged."""
        return bool(self.evidence.get("quiet"))

    @classmethod
    def of(cls, f: Any) -> Member:
        """From a `findings.Finding` (ids set) or a findings row (dict)."""
        g: Any = f.get if isinstance(f, Mapping) else lambda k: getattr(f, k)
        ev = g("evidence")
        return cls(
            str(g("finding_id")),
            str(g("kind")),
            str(g("severity")),
            str(g("subject_type")),
            str(g("subject")),
            str(g("summary")),
            json.loads(ev) if isinstance(ev, str) and ev else dict(ev or {}),
            as_utc(g("first_seen")),
            as_utc(g("last_seen")),
        )

    @property
    def seconds(self) -> float:
        return (self.last_seen - self.first_seen).total_seconds()


# --- grouping ------------------------------------------------------------------------------------


def _norm(name: str) -> str:
    # detectors write a port as switch:port or switch/port; both name the same thing
    return name.strip().replace(":", "/")


def _link(a: str, b: str) -> str:
    return "<->".join(sorted((_norm(a), _norm(b))))


# How each scope kinds.yaml declares (and explains) names the level at which one cause shows up as
# many findings, from a finding's evidence and its subject's HyperNode.
SCOPE_RULES: dict[str, Callable[[Member, Mapping[str, str]], str]] = {
    "idc_pair": lambda m, hn: (
        "idc/" + _link(m.evidence.get("from_idc", ""), m.evidence.get("to_idc", ""))
    ),
    "placement_policy": lambda m, hn: "policy/" + _placement_shape(m.evidence.get("layouts")),
    "dci": lambda m, hn: "dci",
    "job": lambda m, hn: "job/" + str(m.evidence.get("job", "")),
    "hypernode": lambda m, hn: _hypernode_of(m, hn),
}


def _node(m: Member) -> str:
    return re.split(r"[/:]", _norm(m.subject), maxsplit=1)[0]


def _hypernode_of(m: Member, hypernodes: Mapping[str, str]) -> str:
    hn = hypernodes.get(_node(m))
    return f"hypernode/{hn}" if hn else f"{m.subject_type}/{_norm(m.subject)}"


def _scope_rule(kind: str) -> str | None:
    return k.scope if (k := kinds().get(kind)) is not None else None


def _places(members: Sequence[Member]) -> list[str]:
    """Where one cause showed up, for causes whose members are spread over places: the writer
    IDCs of replica placement failures (the IDC holding most of each layout's replicas)."""
    out = set()
    for m in members:
        if _scope_rule(m.kind) != "placement_policy":
            continue
        for lay in m.evidence.get("layouts") or []:
            try:
                d = json.loads(lay) if isinstance(lay, str) else dict(lay)
                out.add(max(d, key=lambda k: (int(d[k]), k)))
            except (ValueError, TypeError, AttributeError):
                continue
    return sorted(out)


def _placement_shape(layouts: Any) -> str:
    """What a placement policy's failure looks like whichever IDC wrote the blocks: the replica
    counts per IDC, largest first, without the IDC names ({"idc-a": 3, "idc-b": 1} written from
    idc-a and {"idc-b": 3, "idc-a": 1} from idc-b are one failure: [3, 1])."""
    shapes: set[tuple[Any, ...]] = set()
    for lay in layouts or []:
        try:
            d = json.loads(lay) if isinstance(lay, str) else dict(lay)
            shapes.add(tuple(sorted((int(v) for v in d.values()), reverse=True)))
        except (ValueError, TypeError, AttributeError):
            shapes.add((str(lay),))  # not a layout: kept as written
    return json.dumps(sorted(shapes, key=str))


_ENTITY = re.compile(r"^[^\s]*[-/:.][^\s]*$")  # names of things: no spaces, a separator
_TIME = re.compile(r"^\d{4}-\d\d-\d\d")


def scope(m: Member, peers: Mapping[str, str], hypernodes: Mapping[str, str] | None = None) -> str:
    """What `m` is about at the level its cause lives at (its kind's declared scope, see
    SCOPE_RULES; `hypernodes`: node -> its leaf HyperNode); ports become links."""
    rule = _scope_rule(m.kind)
    if rule is not None:
        return f"{m.kind}/{SCOPE_RULES[rule](m, hypernodes or {})}"
    if m.subject_type == "port":
        peer = peers.get(_norm(m.subject))
        return "link/" + _link(m.subject, peer) if peer else "port/" + _norm(m.subject)
    if m.subject_type == "link" and "<->" in m.subject:
        return "link/" + _link(*m.subject.split("<->", 1))
    return f"{m.subject_type}/{_norm(m.subject)}"


def refs(
    m: Member, peers: Mapping[str, str], hypernodes: Mapping[str, str] | None = None
) -> set[str]:
    """Every name `m` mentions: its subject, its scope and the entity names in its evidence
    (ports, NICs, jobs, IPs; not numbers, words or times)."""
    out = {_norm(m.subject), scope(m, peers, hypernodes)}
    stack: list[Any] = [m.evidence]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if _ENTITY.match(v) and not _TIME.match(v):
                n = _norm(v)
                out.add(n)
                if n in peers:
                    out.add("link/" + _link(v, peers[n]))
        elif isinstance(v, dict):  # (the common Mapping, checked first: the ABC check is slow)
            stack.extend(v.values())
        elif isinstance(v, list | tuple):
            stack.extend(v)
        elif not isinstance(v, int | float) and isinstance(v, Mapping):
            stack.extend(v.values())
    return out


def _overlap(a: Member | Sequence[datetime], b: Member, gap: timedelta) -> float | None:
    """Seconds the two spans share (0 when they only come within `gap`); None when apart."""
    a0, a1 = (a.first_seen, a.last_seen) if isinstance(a, Member) else a
    if a0 > b.last_seen + gap or b.first_seen > a1 + gap:
        return None
    return max((min(a1, b.last_seen) - max(a0, b.first_seen)).total_seconds(), 0.0)


@dataclass
class Group:
    members: list[Member]  # root first
    roles: dict[str, str]  # finding_id -> root | cause | consequence

    @property
    def root(self) -> Member:
        return self.members[0]

    @property
    def first_seen(self) -> datetime:
        return min(m.first_seen for m in self.members)

    @property
    def last_seen(self) -> datetime:
        return max(m.last_seen for m in self.members)


def _root_key(m: Member, consequences: set[str]) -> tuple[Any, ...]:
    # a cause before an effect; then the earliest; the most severe; the longest-lasting
    return (
        m.kind in consequences,
        m.first_seen,
        _RANK.get(m.severity, 9),
        -m.seconds,
        m.kind,
        m.subject,
        m.finding_id,
    )


def _components(items: list[Member], linked: Any) -> list[list[Member]]:
    sets = DisjointSets(len(items))
    for i in range(len(items)):
        for j in range(i + 1, len(items)):
            if linked(items[i], items[j]):
                sets.union(i, j)
    out: dict[int, list[Member]] = {}
    for i, m in enumerate(items):
        out.setdefault(sets.find(i), []).append(m)
    return list(out.values())


def _names(
    m: Member,
    peers: Mapping[str, str],
    hypernodes: Mapping[str, str] | None,
    consequences: set[str],
    missing: set[str],
) -> tuple[str, frozenset[str]]:
    """`m`'s scope, and the names it shares with the findings of its cause (`refs`; a kind that
    says a device's data is missing names its silent device, an effect its own node)."""
    names = refs(m, peers, hypernodes)
    if m.kind in missing:
        names.add(f"silent/{_norm(m.subject)}")
    elif m.kind in consequences:
        names.add(f"silent/{_node(m)}")
    return scope(m, peers, hypernodes), frozenset(names)


class NameMemo:
    """What `group` reads of each finding (`_names`), kept across calls: a finding seen again
    with the same kind, subject and evidence (only its time moved) is not read again. It holds
    for one set of peers, HyperNodes and consequence kinds: others (not the same objects) clear
    it."""

    def __init__(self) -> None:
        self._by: dict[str, tuple[Member, str, frozenset[str]]] = {}
        self._for: tuple[Any, ...] = (object(),) * 3  # peers, HyperNodes, consequences

    def names(
        self,
        m: Member,
        peers: Mapping[str, str],
        hypernodes: Mapping[str, str] | None,
        consequences: set[str],
        missing: set[str],
    ) -> tuple[str, frozenset[str]]:
        ctx = (peers, hypernodes, consequences)
        if any(a is not b for a, b in zip(ctx, self._for, strict=True)):
            self._by.clear()
            self._for = ctx
        hit = self._by.get(m.finding_id)
        if hit is not None:
            o = hit[0]
            if (o.kind, o.subject_type, o.subject) == (
                m.kind,
                m.subject_type,
                m.subject,
            ) and o.evidence == m.evidence:
                return hit[1], hit[2]
        sc, names = _names(m, peers, hypernodes, consequences, missing)
        self._by[m.finding_id] = (m, sc, names)
        return sc, names

    def forget(self, finding_ids: Iterable[str]) -> None:
        for fid in finding_ids:
            self._by.pop(fid, None)


def group(
    members: Iterable[Member],
    *,
    consequences: set[str],
    gap: timedelta,
    peers: Mapping[str, str] | None = None,
    hypernodes: Mapping[str, str] | None = None,
    memo: NameMemo | None = None,
) -> list[Group]:
    """Group findings by root cause. Causes (kinds not in `consequences`) that share a scope and
    overlap in time (within `gap`) are one incident. A consequence joins the incident whose member
    it shares a name with (its evidence names the cause's subject, or both name the same port)
    over the longest common time, directly or through another consequence; a consequence that
    names no cause is an incident of its own (grouped by scope like causes). `memo`: the names
    read of each finding by an earlier call (IncidentTracker keeps one)."""
    peers = peers if peers is not None else {}
    ms = sorted(members, key=lambda m: (m.first_seen, m.kind, m.subject, m.finding_id))
    # a kind that says a device's data is missing (kinds.yaml `missing_data`) explains the
    # effects seen on its silent device: they join its incident
    missing = {k.name for k in kinds().values() if k.missing_data}
    read = memo.names if memo is not None else _names
    scopes: dict[str, str] = {}
    names: dict[str, frozenset[str]] = {}
    for m in ms:
        scopes[m.finding_id], names[m.finding_id] = read(
            m, peers, hypernodes, consequences, missing
        )

    def same_cause(a: Member, b: Member) -> bool:
        return scopes[a.finding_id] == scopes[b.finding_id] and _overlap(a, b, gap) is not None

    causes = [m for m in ms if m.kind not in consequences]
    groups = _components(causes, same_cause)
    # for the effects declared so (prefer_usual), a group holding a kind they usually
    # follow comes before a group that only shares a name (a job-wide finding on the same uplinks)
    usual = {k: v for k, v in model().items() if k in prefer_usual()}
    effects = [m for m in ms if m.kind in consequences]
    home: dict[str, int] = {}
    changed = True
    while changed and effects:
        changed = False
        for c in effects:
            if c.finding_id in home:
                continue
            best: tuple[bool, float, int, int] | None = None
            for gi, g in enumerate(groups):
                for m in g:
                    shared = names[c.finding_id] & names[m.finding_id]
                    ov = _overlap(m, c, gap) if shared else None
                    if ov is not None:
                        cand = (m.kind in usual.get(c.kind, ()), ov, len(shared), -gi)
                        best = cand if best is None or cand > best else best
            if best is not None:
                home[c.finding_id] = -best[3]
                groups[-best[3]].append(c)
                changed = True
    groups += _components([c for c in effects if c.finding_id not in home], same_cause)
    out = []
    for g in groups:
        g.sort(key=lambda m: _root_key(m, consequences))
        roles = {
            m.finding_id: "root" if i == 0 else "consequence" if m.kind in consequences else "cause"
            for i, m in enumerate(g)
        }
        out.append(Group(g, roles))
    out.sort(key=lambda g: (g.first_seen, g.root.finding_id))
    return out


# --- the incident ---------------------------------------------------------------------------------


def incident_id(cluster: str, root: Member) -> str:
    key = f"{cluster}\x1f{root.kind}\x1f{root.subject}\x1f{int(root.first_seen.timestamp() * 1000)}"
    return hashlib.sha1(key.encode()).hexdigest()[:20]


def _fresh_id(cluster: str, root: Member, taken: set[str]) -> str:
    """`incident_id` of a new group's root, or a variant of it where that id is in use (an
    incident keeps the id its first root gave it: that finding may since root another group)."""
    iid, n = incident_id(cluster, root), 0
    while iid in taken:
        n += 1
        key = f"{incident_id(cluster, root)}\x1f{n}"
        iid = hashlib.sha1(key.encode()).hexdigest()[:20]
    return iid


@dataclass
class Incident:
    incident_id: str
    cluster: str
    group: Group
    state: str
    impact: Impact
    merged_into: str = ""

    @property
    def root(self) -> Member:
        return self.group.root

    @property
    def first_seen(self) -> datetime:
        return self.group.first_seen

    @property
    def last_seen(self) -> datetime:
        return self.group.last_seen

    @property
    def gpu_hours(self) -> float:
        return self.impact.gpus * (self.last_seen - self.first_seen).total_seconds() / 3600

    @property
    def severity(self) -> str:
        worst = min(_RANK.get(m.severity, 2) for m in self.group.members)
        i = self.impact
        wide = (
            len(i.jobs) >= RAISE_AT["jobs"]
            or len(i.tenants) >= RAISE_AT["tenants"]
            or i.gpus >= RAISE_AT["gpus"]
        )
        return SEVERITIES[max(worst - 1, 0) if wide else worst]

    @property
    def summary(self) -> str:
        others: dict[str, int] = {}
        for m in self.group.members[1:]:
            others[m.kind] = others.get(m.kind, 0) + 1
        tail = ", ".join(f"{n} {k}" for k, n in sorted(others.items()))
        places = _places(self.group.members)
        if len(places) > 1:
            tail += ("; " if tail else "") + f"in {len(places)} places: {', '.join(places)}"
        return self.root.summary + (f" (with {tail})" if tail else "")

    @property
    def action(self) -> str | None:
        """The action its root finding names (a gpu_xid's from NVIDIA's Xid catalog), if any."""
        a = self.root.evidence.get("action")
        return str(a) if a else None

    @property
    def remediation(self) -> str:
        """What to do: the root kind's remediation filled with the root finding's values."""
        r = self.root
        return remediation(r.kind, r.subject_type, r.subject, r.evidence)

    def row(self, now: datetime) -> dict[str, Any]:
        return {
            "incident_id": self.incident_id,
            "cluster": self.cluster,
            "state": self.state,
            "severity": self.severity,
            "root_finding_id": self.root.finding_id,
            "root_kind": self.root.kind,
            "root_subject_type": self.root.subject_type,
            "root_subject": self.root.subject,
            "summary": self.summary,
            "remediation": self.remediation,
            "runbook": runbook(self.root.kind),
            "findings": len(self.group.members),
            "kinds": json.dumps(sorted({m.kind for m in self.group.members})),
            "jobs": json.dumps(self.impact.jobs),
            "tenants": json.dumps(self.impact.tenants),
            "gpus": self.impact.gpus,
            "gpu_hours": round(self.gpu_hours, 3),
            "first_seen": self.first_seen,
            "last_seen": self.last_seen,
            "merged_into": self.merged_into,
            "updated_at": now,
        }


# --- tracking across evaluations -------------------------------------------------------------------


def kinds_without_incidents() -> set[str]:
    """The kinds declared `incident: false`: their findings never open or join an incident."""
    return {k.name for k in kinds().values() if not k.incident}


def consequence_kinds() -> set[str]:
    """The finding kinds that describe an effect, not a cause (kinds.yaml): they join their
    cause's incident."""
    return set(effect_kinds())


class IncidentTracker:
    """Keeps the incidents of one cluster up to date across evaluations. In memory: the member
    findings of open incidents and the findings seen since. Each evaluation regroups them, keeps
    each incident's id while any of its findings stays in it (a merge keeps the older id and marks
    the other `merged_into`), resolves an incident once no member has held for `hysteresis`, and
    writes the incidents and memberships that changed. A restarted follower reads the open
    incidents and their findings back from the store."""

    def __init__(
        self,
        store: Store,
        cluster: str,
        hysteresis: timedelta,
        no_incident: Iterable[str] | None = None,
    ) -> None:
        """`no_incident`: the kinds whose findings never open or join an incident (default: those
        kinds.yaml declares `incident: false`)."""
        from telemetry.contracts import ComponentStats

        self.store, self.cluster, self.hysteresis = store, cluster, hysteresis
        self.stats = ComponentStats("correlate:incidents", unit="findings")
        self.problems = Problems(self.stats, self.stats.name, (), logger=log)
        self.members: dict[str, Member] = {}
        self.open: dict[str, Incident] | None = None  # by id, as last written
        self.changed: list[Incident] = []  # written by the last observe()
        self._consequences: set[str] | None = None
        self._peers: dict[str, str] = {}
        self._hypernodes: dict[str, str] = {}  # node -> its leaf HyperNode, declared now
        self._hn_asked: set[str] = set()
        no_incident = no_incident if no_incident is not None else kinds_without_incidents()
        self._no_incident = set(no_incident)
        self._written: dict[str, tuple[Any, ...]] = {}
        self._impact: dict[str, tuple[frozenset[Any], Impact]] = {}
        self._written_members: dict[str, dict[str, str]] = {}  # incident -> finding -> role
        self._names = NameMemo()  # each finding's scope and names, read once while they hold
        self._pending: Pending | None = None  # a batch run's rows kept back (defer/flush)

    def observe(self, now: datetime, findings: Sequence[Any]) -> list[Incident]:
        """After the evaluation at `now` wrote `findings` (ids set): regroup, write what changed.
        A failure is logged and counted; the engine goes on."""
        try:
            self.changed = self._observe(as_utc(now), findings)
            self.stats.last_success = True
        except Exception as e:
            self.changed = []
            self.stats.last_success = False
            self.problems.exception(e, log=False)
            log.error("incidents failed at %s: %s", now.isoformat(), str(e).splitlines()[:1])
        return self.changed

    def _observe(self, now: datetime, findings: Sequence[Any]) -> list[Incident]:
        if self.open is None:
            self.open = self._load(now)
        if not findings and not self.open:
            return []
        if self._consequences is None:
            self._consequences = consequence_kinds()
        self.stats.received += len(findings)
        for f in findings:
            m = Member.of(f)
            if m.kind in self._no_incident:  # declared so (kinds.yaml `incident: false`)
                continue
            if m.quiet:  # pages no one: never opens an incident, never quiets one it is in
                old = self.members.get(m.finding_id)
                if old is not None and not old.quiet:
                    old.last_seen = max(old.last_seen, m.last_seen)
                if old is None or not old.quiet:
                    continue
            self.members[m.finding_id] = m
        if any(
            m.subject_type == "port" and _norm(m.subject) not in self._peers
            for m in self.members.values()
        ):
            self._peers = self._lldp_peers(now)
        asked = {_node(m) for m in self.members.values() if _scope_rule(m.kind) == "hypernode"}
        if not asked <= self._hn_asked:
            self._hn_asked |= asked
            from telemetry.pool import leaf_hypernodes

            self._hypernodes = leaf_hypernodes(self.store, self.cluster)
        groups = group(
            self.members.values(),
            consequences=self._consequences,
            gap=self.hysteresis,
            peers=self._peers,
            hypernodes=self._hypernodes,
            memo=self._names,
        )
        incidents = self._assign(groups)
        changed: list[Incident] = []
        stale: list[tuple[Incident, frozenset[tuple[str, str]]]] = []  # impact to be (re)read
        for inc in incidents:
            changed.append(inc)
            if inc.merged_into:
                continue
            inc.state = "resolved" if inc.last_seen < now - self.hysteresis else "open"
            key = frozenset(inc.group.roles.items())
            cached = self._impact.get(inc.incident_id)
            if cached is None or cached[0] != key:
                stale.append((inc, key))
            else:
                inc.impact = cached[1]
        spans = [Span(i.group.members, i.group.first_seen, i.group.last_seen) for i, _ in stale]
        for (inc, key), blast in zip(stale, impacts(self.store, self.cluster, spans), strict=True):
            self._impact[inc.incident_id] = (key, blast)
            inc.impact = blast
        stamp = datetime.now(UTC)
        rows = []  # each incident's row, built once: written where it differs from the last
        for inc in changed:
            row = inc.row(stamp)
            digest = self._digest(inc, row)
            if digest != self._written.get(inc.incident_id):
                rows.append((inc, row, digest))
        self._write(rows)
        changed = [inc for inc, _, _ in rows]
        self.open = {i.incident_id: i for i in incidents if i.state == "open" and not i.merged_into}
        live = {fid for i in self.open.values() for fid in i.group.roles}
        for inc in incidents:
            if inc.incident_id not in self.open:  # resolved or merged: final, out of memory
                for m in inc.group.members:
                    if m.finding_id not in live:  # (a merged one's findings live on elsewhere)
                        self.members.pop(m.finding_id, None)
                        self._names.forget((m.finding_id,))
                self._impact.pop(inc.incident_id, None)
                self._written.pop(inc.incident_id, None)
        return changed

    def _assign(self, groups: list[Group]) -> list[Incident]:
        """Ids: an open incident's id stays with the group that holds its root finding (the
        oldest such incident where two roots now share a group: the other is merged into it);
        a group holding no open incident's root takes the id of the open incident it shares
        the most findings with, else a new one (the hash of its root, never an id in use). An
        open incident none of whose findings kept its id is marked merged into the group its
        findings went to. So a cause whose consequences move to another cause keeps its
        incident, and the consequences' new cause opens its own."""
        assert self.open is not None
        owner = {m.finding_id: i.incident_id for i in self.open.values() for m in i.group.members}
        age = {i.incident_id: i.first_seen for i in self.open.values()}
        at = {m.finding_id: k for k, g in enumerate(groups) for m in g.members}
        ids: dict[int, str] = {}
        for iid in sorted(self.open, key=lambda i: (age[i], i)):  # by root, oldest first
            k = at.get(self.open[iid].group.root.finding_id)
            if k is not None and k not in ids:
                ids[k] = iid
        used = set(ids.values())
        taken = set(self.open) | used
        out: list[Incident] = []
        for k, g in enumerate(groups):
            iid = ids.get(k, "")
            if not iid:
                shared = Counter(owner[m.finding_id] for m in g.members if m.finding_id in owner)
                old = sorted(set(shared) - used, key=lambda i: (-shared[i], age[i], i))
                iid = old[0] if old else _fresh_id(self.cluster, g.root, taken)
            used.add(iid)
            taken.add(iid)
            out.append(Incident(iid, self.cluster, g, "open", Impact()))
        for iid, inc in self.open.items():
            if iid in used:
                continue
            into = next(
                (
                    o.incident_id
                    for o in out
                    for m in o.group.members
                    if owner.get(m.finding_id) == iid
                ),
                "",
            )
            out.append(Incident(iid, self.cluster, inc.group, "resolved", inc.impact, into))
        return out

    @staticmethod
    def _digest(inc: Incident, row: Mapping[str, Any]) -> tuple[Any, ...]:
        """What `inc` writes (`row`, its `inc.row`), but when it was written."""
        values = (v for k, v in row.items() if k != "updated_at")
        return (*values, tuple(sorted(inc.group.roles.items())))

    def _write(self, changed: list[tuple[Incident, dict[str, Any], tuple[Any, ...]]]) -> None:
        """Write each incident's row (`inc.row`) and the memberships that changed; remember
        its digest."""
        if not changed:
            return
        stamp = changed[0][1]["updated_at"]
        rows, members = [], []
        for inc, row, digest in changed:
            rows.append(row)
            before = self._written_members.get(inc.incident_id, {})
            now_members = {} if inc.merged_into else inc.group.roles
            for m in inc.group.members:
                fid = m.finding_id
                if fid in now_members and before.get(fid) != now_members[fid]:
                    members.append(self._member_row(inc, m, now_members[fid], 1, stamp))
                elif fid not in now_members and fid in before:
                    members.append(self._member_row(inc, m, before[fid], 0, stamp))
            self._written_members[inc.incident_id] = dict(now_members)
            self._written[inc.incident_id] = digest
        self.stats.sent += len(rows)
        if self._pending is not None:  # a batch run: the last row of each key (FINAL)
            self._pending.add(INCIDENT, rows)
            self._pending.add(INCIDENT_FINDING, members)
            return
        self.store.insert(INCIDENT, INCIDENT.to_arrow(rows))
        if members:
            self.store.insert(INCIDENT_FINDING, INCIDENT_FINDING.to_arrow(members))

    def defer(self) -> None:
        """A batch run: keep the last row of each incident and membership until flush()."""
        self._pending = self._pending or Pending()

    def flush(self, *, stop: bool = False) -> int:
        """Insert what defer() kept; `stop`: evaluations insert their own rows again. A failure
        is logged and counted, as observe()'s are; what failed is kept for the next flush (the
        last, `stop`, gives up on it). Returns the rows inserted."""
        n = 0
        try:
            n = self._pending.flush(self.store) if self._pending is not None else 0
        except Exception as e:
            self.stats.last_success = False
            self.problems.exception(e, log=False)
            log.error("incidents failed writing: %s", str(e).splitlines()[:1])
        if stop:
            self._pending = None
        return n

    def _member_row(
        self, inc: Incident, m: Member, role: str, member: int, stamp: datetime
    ) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "incident_id": inc.incident_id,
            "finding_id": m.finding_id,
            "role": role,
            "member": member,
            "first_seen": m.first_seen,
            "updated_at": stamp,
        }

    def _lldp_peers(self, now: datetime) -> dict[str, str]:
        from telemetry.topology.store_io import latest_lldp_sql

        res = self.store.query(
            latest_lldp_sql(self.store, lo=None, hi="hi"), {"cluster": self.cluster, "hi": now}
        )
        return {
            _norm(f"{r[0]}:{r[1]}"): _norm(f"{r[2]}:{r[3]}")
            for r in res.result_rows
            if r[2] and r[3]
        }

    def _load(self, now: datetime) -> dict[str, Incident]:
        """Open incidents as of `now` and their member findings, from the store."""
        ids = [
            r[0]
            for r in self.store.query_rows(
                f"SELECT incident_id FROM {self.store.table(INCIDENT, final=True)} "
                "WHERE cluster = {c:String} AND merged_into = '' AND first_seen <= {now:DateTime64(3, 'UTC')} "
                "AND last_seen >= {t:DateTime64(3, 'UTC')}",
                {"c": self.cluster, "now": now, "t": now - self.hysteresis},
            )
        ]
        if not ids:
            return {}
        cols = ", ".join(f"f.{c}" for c in FINDING.columns)
        rows = self.store.query_rows(
            f"SELECT m.incident_id, m.role, {cols} FROM (SELECT incident_id, finding_id, role "
            f"FROM {self.store.table(INCIDENT_FINDING, final=True)} WHERE cluster = {{c:String}} "
            "AND member = 1 AND incident_id IN {ids:Array(String)}) AS m "
            f"INNER JOIN (SELECT * FROM {self.store.table(FINDING, final=True)} WHERE cluster = {{c:String}} "
            "AND first_seen <= {now:DateTime64(3, 'UTC')}) AS f ON f.finding_id = m.finding_id",
            {"c": self.cluster, "ids": ids, "now": now},
        )
        by: dict[str, list[tuple[str, Member]]] = {}
        for r in rows:
            m = Member.of(dict(zip(FINDING.columns, r[2:], strict=True)))
            self.members[m.finding_id] = m
            by.setdefault(r[0], []).append((r[1], m))
        out = {}
        for iid, ms in by.items():
            ms.sort(key=lambda rm: rm[0] != "root")
            g = Group([m for _, m in ms], {m.finding_id: role for role, m in ms})
            out[iid] = Incident(iid, self.cluster, g, "open", Impact())
            self._written_members[iid] = dict(g.roles)
        return out


__all__ = ["Incident", "IncidentTracker", "Member", "group"]
