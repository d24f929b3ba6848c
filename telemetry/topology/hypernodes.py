"""Volcano HyperNode tree: parse manifests, resolve members against Node labels, validate, and
answer "lowest common HyperNode" for arrays of node pairs.

Reads HyperNode objects (`topology.volcano.sh/v1alpha1`) as dicts; never talks to a cluster and
never mutates the objects it was given. Problems are reported as data (`Problem`), not raised.
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

API_VERSION = "topology.volcano.sh/v1alpha1"


@dataclass(frozen=True)
class Member:
    """One `spec.members[]` entry. `selector` is exactMatch | regexMatch | labelMatch; `value` the
    name, the pattern, or the label selector (matchLabels dict + matchExpressions list)."""

    type: str  # Node | HyperNode
    selector: str
    value: Any

    def render(self) -> str:
        """The member as one string (stored in hypernodes.member)."""
        if self.selector == "labelMatch":
            return render_label_selector(self.value)
        return str(self.value)


@dataclass(frozen=True)
class HyperNodeSpec:
    name: str
    tier: int
    tier_name: str
    members: tuple[Member, ...]


@dataclass(frozen=True)
class Problem:
    """Something wrong in the declared tree; `subject` names the HyperNode (or node)."""

    kind: str  # bad_regex | bad_object | cycle | ignored_member | multi_claim | unresolved | tier_order | mixed_depth | multi_parent
    subject: str
    message: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.subject}: {self.message}"


class MalformedHyperNode(ValueError):
    """A HyperNode object that cannot be understood; the message names it."""


# --- parsing -----------------------------------------------------------------------------------
def render_label_selector(sel: Mapping[str, Any]) -> str:
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for e in sel.get("matchExpressions") or []:
        op = e.get("operator", "")
        vals = ",".join(str(v) for v in e.get("values") or [])
        parts.append(f"{e.get('key')} {op} ({vals})" if vals else f"{e.get('key')} {op}")
    return ",".join(parts)


def parse_hypernode(obj: Mapping[str, Any]) -> HyperNodeSpec:
    """One HyperNode object -> spec. Accepts the CRD format and the design-doc sketch format
    (top-level `name`, members with only `name`). Raises MalformedHyperNode naming the object."""
    meta = obj.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise MalformedHyperNode(f"HyperNode metadata is a {type(meta).__name__}, not an object")
    name = meta.get("name") or obj.get("name")
    if not name or not isinstance(name, str):
        raise MalformedHyperNode("HyperNode without metadata.name")
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise MalformedHyperNode(f"HyperNode {name}: no spec")
    raw_tier = spec.get("tier")
    try:
        if isinstance(raw_tier, float) and not raw_tier.is_integer():
            raise ValueError
        tier = int(raw_tier)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise MalformedHyperNode(
            f"HyperNode {name}: spec.tier {_short(raw_tier)} is not an integer"
        ) from None
    if tier < 1 or tier > 255:
        raise MalformedHyperNode(f"HyperNode {name}: spec.tier {tier} out of range 1..255")
    tier_name = spec.get("tierName") or ""
    if not isinstance(tier_name, str):
        raise MalformedHyperNode(f"HyperNode {name}: spec.tierName {_short(tier_name)} is not text")
    raw_members = spec.get("members") or []
    if not isinstance(raw_members, list):
        raise MalformedHyperNode(f"HyperNode {name}: spec.members is not a list")
    members = []
    for i, m in enumerate(raw_members):
        if not isinstance(m, Mapping):
            raise MalformedHyperNode(f"HyperNode {name}: members[{i}] is not a mapping")
        mtype = m.get("type") or ""
        if not isinstance(mtype, str) or mtype not in ("Node", "HyperNode", ""):
            raise MalformedHyperNode(
                f"HyperNode {name}: members[{i}].type {mtype!r} is not Node or HyperNode"
            )
        sel = m.get("selector")
        if sel is None and m.get("name"):  # design-doc sketch: members by name only, type optional
            members.append(Member(mtype, "exactMatch", _text(m["name"], name, i)))
            continue
        mtype = mtype or "Node"
        if not isinstance(sel, Mapping):
            raise MalformedHyperNode(f"HyperNode {name}: members[{i}] has no selector")
        if "exactMatch" in sel:
            em = sel["exactMatch"] or {}
            value = em.get("name") if isinstance(em, Mapping) else None
            if not value:
                raise MalformedHyperNode(
                    f"HyperNode {name}: members[{i}].selector.exactMatch has no name"
                )
            members.append(Member(mtype, "exactMatch", _text(value, name, i)))
        elif "regexMatch" in sel:
            rm = sel["regexMatch"] or {}
            pattern = rm.get("pattern") if isinstance(rm, Mapping) else None
            if not isinstance(pattern, str) or not pattern:
                raise MalformedHyperNode(
                    f"HyperNode {name}: members[{i}].selector.regexMatch has no pattern"
                )
            members.append(Member(mtype, "regexMatch", pattern))
        elif "labelMatch" in sel:
            lm = sel["labelMatch"] or {}
            if not isinstance(lm, Mapping):
                raise MalformedHyperNode(
                    f"HyperNode {name}: members[{i}].selector.labelMatch is not an object"
                )
            labels = lm.get("matchLabels") or {}
            exprs = lm.get("matchExpressions") or []
            if not isinstance(labels, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str | int | float | bool)
                for k, v in labels.items()
            ):
                raise MalformedHyperNode(
                    f"HyperNode {name}: members[{i}] labelMatch.matchLabels is not a map of labels"
                )
            if not isinstance(exprs, list):
                raise MalformedHyperNode(
                    f"HyperNode {name}: members[{i}] labelMatch.matchExpressions is not a list"
                )
            for expr in exprs:
                op = expr.get("operator") if isinstance(expr, Mapping) else None
                if not isinstance(op, str) or op not in ("In", "NotIn", "Exists", "DoesNotExist"):
                    raise MalformedHyperNode(
                        f"HyperNode {name}: members[{i}] labelMatch operator {_short(op)} is not supported"
                    )
                values = expr.get("values") or []
                if not isinstance(expr.get("key"), str) or not isinstance(values, list):
                    raise MalformedHyperNode(
                        f"HyperNode {name}: members[{i}] labelMatch expression needs a key and a list of values"
                    )
            members.append(
                Member(
                    mtype,
                    "labelMatch",
                    {"matchLabels": dict(labels), "matchExpressions": list(exprs)},
                )
            )
        else:
            raise MalformedHyperNode(
                f"HyperNode {name}: members[{i}].selector has none of exactMatch/regexMatch/labelMatch"
            )
    return HyperNodeSpec(name, tier, tier_name, tuple(members))


def _short(v: Any) -> str:
    return reprlib.repr(v)


def _text(v: Any, hypernode: str, i: int) -> str:
    """A member name: text (a number is read as its decimal name, as YAML may give it)."""
    if isinstance(v, str):
        return v
    if isinstance(v, int | float) and not isinstance(v, bool):
        return str(v)
    raise MalformedHyperNode(f"HyperNode {hypernode}: members[{i}] name {_short(v)} is not text")


# RE2's POSIX classes (Go regexp/syntax perl_groups.go), as code point ranges; Python's re reads
# `[[:digit:]]` as the set `[:digt` followed by `]` (a FutureWarning, and it matches nothing).
_POSIX_CLASSES: dict[str, tuple[tuple[int, int], ...]] = {
    "alnum": ((0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)),
    "alpha": ((0x41, 0x5A), (0x61, 0x7A)),
    "ascii": ((0x00, 0x7F),),
    "blank": ((0x09, 0x09), (0x20, 0x20)),
    "cntrl": ((0x00, 0x1F), (0x7F, 0x7F)),
    "digit": ((0x30, 0x39),),
    "graph": ((0x21, 0x7E),),
    "lower": ((0x61, 0x7A),),
    "print": ((0x20, 0x7E),),
    "punct": ((0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E)),
    "space": ((0x09, 0x0D), (0x20, 0x20)),
    "upper": ((0x41, 0x5A),),
    "word": ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)),
    "xdigit": ((0x30, 0x39), (0x41, 0x46), (0x61, 0x66)),
}


def _class_items(ranges: Sequence[tuple[int, int]], negated: bool) -> str:
    """Code point ranges as the inside of a Python character set (`[:^name:]`: the complement)."""
    if negated:
        out, lo = [], 0
        for a, b in ranges:
            if a > lo:
                out.append((lo, a - 1))
            lo = b + 1
        ranges = [*out, (lo, 0x10FFFF)]
    esc = "\\U{:08x}".format
    return "".join(esc(a) if a == b else f"{esc(a)}-{esc(b)}" for a, b in ranges)


# What Python's re compiles and RE2 (Go, ClickHouse's match) refuses: such a pattern matches
# nothing in Volcano and must never reach a store query.
_BACKREF = frozenset("123456789")
_NOT_RE2 = ("(?=", "(?!", "(?<=", "(?<!", "(?P=", "(?>", "(?(", "*+", "++", "?+", "}+")


def go_regex(pattern: str) -> re.Pattern[str]:
    """A Go (RE2) regexp compiled by Python's re: POSIX classes inside bracket expressions
    (`[[:digit:]]`, `[[:^space:]x]`) become the code points RE2 gives them. re.error when Python
    cannot compile what is left; an unknown class name is one, as in Go."""
    out: list[str] = []
    i, n = 0, len(pattern)
    in_set = first = False
    while i < n:
        c = pattern[i]
        if c == "\\":
            if not in_set and pattern[i + 1 : i + 2] in _BACKREF:
                raise re.error(
                    f"invalid escape sequence {pattern[i : i + 2]!r} (RE2 has no backreferences)"
                )
            out.append(pattern[i : i + 2])
            i += 2
            first = False
            continue
        if not in_set:
            for bad in _NOT_RE2:
                if pattern.startswith(bad, i):
                    raise re.error(
                        f"{bad!r} at {i}: RE2 has no lookaround, atomic or possessive forms"
                    )
            out.append(c)
            i += 1
            if c == "[":
                in_set = first = True
                if pattern.startswith("^", i):
                    out.append("^")
                    i += 1
            continue
        if c == "]" and not first:  # a `]` first in the set is a literal, in Go as in Python
            in_set = False
        first = False
        end = pattern.find(":]", i + 2) if pattern.startswith("[:", i) else -1
        if end < 0:
            out.append(c)
            i += 1
            continue
        name = pattern[i + 2 : end]
        ranges = _POSIX_CLASSES.get(name.removeprefix("^"))
        if ranges is None:
            raise re.error(f"invalid character class range [:{name}:]")
        out.append(_class_items(ranges, name.startswith("^")))
        i = end + 2
    return re.compile("".join(out))


def member_issue(m: Member) -> tuple[str, str] | None:
    """(problem kind, message) for a member Volcano resolves to nothing whatever the nodes are
    (pkg/scheduler/api/hyper_node_info.go): a HyperNode member by regexMatch or labelMatch (only
    exactMatch names a HyperNode), a labelMatch with no criteria, a pattern re cannot compile.
    The HyperNode's other members still count."""
    what = f"{m.type} member {m.selector} {m.render()!r}"
    if m.type == "HyperNode" and m.selector != "exactMatch":
        return (
            "ignored_member",
            f"{what} is ignored: Volcano takes HyperNode members by exactMatch only",
        )
    if m.selector == "labelMatch" and not (
        m.value.get("matchLabels") or m.value.get("matchExpressions")
    ):
        return (
            "ignored_member",
            f"{m.type} member labelMatch {{}} has no criteria: it matches nothing",
        )
    if m.selector == "regexMatch":
        try:
            go_regex(m.value)
        except (re.error, RecursionError, OverflowError) as e:
            return "bad_regex", f"{what} is not a valid regex ({e}): it matches nothing"
    return None


# The selector a regexMatch member RE2 cannot compile is stored under: no store query may hand
# its pattern to ClickHouse's match(), which fails the whole statement; Volcano matches nothing.
INVALID_REGEX = "invalidRegex"


def stored_selector(m: Member) -> str:
    """The selector column of `m`'s hypernode row: INVALID_REGEX for a bad regexMatch."""
    issue = member_issue(m) if m.selector == "regexMatch" else None
    return INVALID_REGEX if issue and issue[0] == "bad_regex" else m.selector


def member_problems(spec: HyperNodeSpec) -> list[Problem]:
    """The `member_issue` of each member of one HyperNode, naming it."""
    return [
        Problem(kind, spec.name, msg)
        for kind, msg in filter(None, (member_issue(m) for m in spec.members))
    ]


def label_selector_matches(sel: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != str(v):
            return False
    for e in sel.get("matchExpressions") or []:
        key, op, vals = e.get("key"), e.get("operator"), [str(v) for v in e.get("values") or []]
        if (
            (op == "In" and labels.get(key) not in vals)
            or (op == "NotIn" and key in labels and labels[key] in vals)
            or (op == "Exists" and key not in labels)
            or (op == "DoesNotExist" and key in labels)
        ):
            return False
    return True


# --- the tree ----------------------------------------------------------------------------------
@dataclass
class HyperNodeTree:
    """Resolved HyperNodes. `node_index` maps node name -> row of `anc`, the ancestor HyperNode id
    per tier column (-1 = none); `tiers` are the distinct tiers, lowest first."""

    specs: dict[str, HyperNodeSpec]
    nodes: dict[str, set[str]]  # HyperNode -> resolved node members (direct)
    children: dict[str, set[str]]  # HyperNode -> resolved child HyperNodes
    parent: dict[str, str]
    problems: list[Problem]
    tiers: list[int] = field(default_factory=list)
    hn_names: list[str] = field(default_factory=list)
    node_names: list[str] = field(default_factory=list)
    node_index: dict[str, int] = field(default_factory=dict)
    anc: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int32))
    # node -> the other HyperNodes of the same tier that claim it
    extra_claims: dict[str, list[str]] = field(default_factory=dict)
    # `anc` one contiguous array per tier column, for fast gathers in lca_many
    _anc_cols: list[np.ndarray] = field(default_factory=list, repr=False)

    @classmethod
    def build(
        cls,
        specs: Iterable[HyperNodeSpec],
        node_labels: Mapping[str, Mapping[str, str]] | None = None,
    ) -> HyperNodeTree:
        """Resolve members. `node_labels`: every known Node and its labels; when None, the node
        universe is the exactMatch names (regex/label members then resolve to nothing)."""
        specs_d: dict[str, HyperNodeSpec] = {}
        problems: list[Problem] = []
        for s in specs:
            if s.name in specs_d:
                problems.append(Problem("bad_object", s.name, "declared twice; the first is used"))
                continue
            specs_d[s.name] = s
        if node_labels is None:
            node_labels = {
                m.value: {}
                for s in specs_d.values()
                for m in s.members
                if m.type in ("Node", "") and m.selector == "exactMatch" and m.value not in specs_d
            }
        universe = sorted(node_labels)
        nodes: dict[str, set[str]] = {}
        children: dict[str, set[str]] = {}
        for s in specs_d.values():
            got_nodes: set[str] = set()
            got_children: set[str] = set()
            for m in s.members:
                if not m.type:  # sketch format without a type: a HyperNode if one has that name
                    m = Member("HyperNode" if m.value in specs_d else "Node", m.selector, m.value)
                issue = member_issue(m)
                if issue is not None:  # matches nothing, whatever the nodes are
                    problems.append(Problem(issue[0], s.name, issue[1]))
                    continue
                pool: Sequence[str] = universe if m.type == "Node" else sorted(specs_d)
                if m.selector == "exactMatch":
                    hit = (
                        [m.value]
                        if m.value in (node_labels if m.type == "Node" else specs_d)
                        else []
                    )
                elif m.selector == "regexMatch":  # Go's MatchString: unanchored
                    rx = go_regex(m.value)
                    hit = [n for n in pool if rx.search(n)]
                else:
                    hit = [n for n in pool if label_selector_matches(m.value, node_labels[n])]
                if not hit:
                    problems.append(
                        Problem(
                            "unresolved",
                            s.name,
                            f"{m.type} member {m.selector} {m.render()!r} matches nothing",
                        )
                    )
                (got_nodes if m.type == "Node" else got_children).update(hit)
            got_children.discard(s.name)
            nodes[s.name] = got_nodes
            children[s.name] = got_children
        parent: dict[str, str] = {}
        for p in sorted(specs_d):
            for c in sorted(children[p]):
                if specs_d[c].tier >= specs_d[p].tier:
                    problems.append(
                        Problem(
                            "tier_order",
                            c,
                            f"tier {specs_d[c].tier} is not below its parent {p} (tier {specs_d[p].tier})",
                        )
                    )
                if c in parent:
                    problems.append(
                        Problem(
                            "multi_parent",
                            c,
                            f"member of both {parent[c]} and {p}; {parent[c]} is used",
                        )
                    )
                    continue
                parent[c] = p
        # cycles: follow parents; every HyperNode on a loop is reported and detached
        for start in sorted(specs_d):
            seen: list[str] = []
            cur: str | None = start
            while cur is not None and cur not in seen:
                seen.append(cur)
                cur = parent.get(cur)
            if cur is not None and cur == start:
                loop = seen
                problems.append(
                    Problem("cycle", start, "HyperNode cycle: " + " -> ".join([*loop, start]))
                )
        for p in [x.subject for x in problems if x.kind == "cycle"]:
            parent.pop(p, None)
        tree = cls(specs_d, nodes, children, parent, problems)
        tree._index()
        return tree

    def _index(self) -> None:
        self.tiers = sorted({s.tier for s in self.specs.values()})
        col = {t: i for i, t in enumerate(self.tiers)}
        self.hn_names = sorted(self.specs)
        hid = {h: i for i, h in enumerate(self.hn_names)}
        # a node belongs to its lowest-tier direct claimant; two claimants of one tier is a problem
        claim: dict[str, str] = {}
        for h in self.hn_names:
            for n in sorted(self.nodes[h]):
                other = claim.get(n)
                if other is None:
                    claim[n] = h
                elif self.specs[other].tier == self.specs[h].tier:
                    self.extra_claims.setdefault(n, []).append(h)
                    self.problems.append(
                        Problem(
                            "multi_claim",
                            n,
                            f"claimed by {other} and {h}, both tier {self.specs[h].tier}; {other} is used",
                        )
                    )
                elif self.specs[h].tier < self.specs[other].tier:
                    claim[n] = h
        self.node_names = sorted(claim)
        self.node_index = {n: i for i, n in enumerate(self.node_names)}
        anc = np.full((len(self.node_names), len(self.tiers)), -1, dtype=np.int32)
        depths: dict[int, list[str]] = {}
        for n, i in self.node_index.items():
            cur: str | None = claim[n]
            depth = 0
            while cur is not None:
                anc[i, col[self.specs[cur].tier]] = hid[cur]
                depth += 1
                cur = self.parent.get(cur)
            depths.setdefault(depth, []).append(n)
        if len(depths) > 1:
            summary = ", ".join(
                f"{len(v)} node(s) at depth {d} (e.g. {v[0]})" for d, v in sorted(depths.items())
            )
            self.problems.append(Problem("mixed_depth", "tree", summary))
        self.anc = anc
        self._anc_cols = [np.ascontiguousarray(anc[:, c]) for c in range(anc.shape[1])]

    # -- queries ----------------------------------------------------------------------------
    def ancestors(self, node: str) -> list[str]:
        """HyperNodes above a node, lowest tier first."""
        i = self.node_index.get(node)
        if i is None:
            return []
        return [self.hn_names[h] for h in self.anc[i] if h >= 0]

    def lca(self, a: str, b: str) -> tuple[str, int] | None:
        """Lowest common HyperNode of two nodes and its tier; None when they share none."""
        ia, ib = self.node_index.get(a), self.node_index.get(b)
        if ia is None or ib is None:
            return None
        hid, tier = self.lca_many(np.array([ia]), np.array([ib]))
        return (self.hn_names[hid[0]], int(tier[0])) if hid[0] >= 0 else None

    def lca_many(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vectorised LCA over arrays of node indices: (HyperNode id or -1, tier or 0) per pair.
        Ancestors agree from the LCA upwards, so walking the tier columns from the top down, the
        last column where both ancestors agree is the LCA. A negative index (unknown node) gives
        -1 / 0."""
        a, b = np.asarray(a), np.asarray(b)
        hid = np.full(len(a), -1, dtype=np.int32)
        tier = np.zeros(len(a), dtype=np.int32)
        if not len(self.tiers) or not len(self.node_names):
            return hid, tier
        known = None
        if len(a) and (a.min() < 0 or b.min() < 0):
            known = (a >= 0) & (b >= 0)
            a, b = np.where(known, a, 0), np.where(known, b, 0)
        cols = self._anc_cols
        for c in range(len(self.tiers) - 1, -1, -1):
            x, y = cols[c][a], cols[c][b]  # one contiguous gather per tier column
            m = (x == y) & (x >= 0)
            hid = np.where(m, x, hid)
            tier = np.where(m, np.int32(self.tiers[c]), tier)
        if known is not None:
            hid = np.where(known, hid, -1)
            tier = np.where(known, tier, 0)
        return hid, tier

    def indices(self, names: Iterable[str]) -> np.ndarray:
        """Node names -> row indices for `lca_many` (-1 for a node in no HyperNode)."""
        get = self.node_index.get
        return np.fromiter((get(n, -1) for n in names), dtype=np.int64)

    def lca_names(self, a: Iterable[str], b: Iterable[str]) -> tuple[list[str | None], np.ndarray]:
        """LCA HyperNode name (None when none) and tier for pairs of node names."""
        hid, tier = self.lca_many(self.indices(a), self.indices(b))
        names = self.hn_names
        return [names[h] if h >= 0 else None for h in hid.tolist()], tier

    def node_groups(self, tier: int) -> dict[str, set[str]]:
        """HyperNode of `tier` -> all nodes under it (transitively)."""
        if tier not in self.tiers:
            return {}
        c = self.tiers.index(tier)
        out: dict[str, set[str]] = {}
        for n, i in self.node_index.items():
            h = self.anc[i, c]
            if h >= 0:
                out.setdefault(self.hn_names[h], set()).add(n)
        return out


def naive_lca(
    tree: HyperNodeTree, leaf_of: Mapping[str, str], a: str, b: str
) -> tuple[str, int] | None:
    """Baseline for bench/topology.py: walk both ancestor chains of `tree` with dicts (its
    `parent` and `specs`), pair by pair."""
    specs, parent = tree.specs, tree.parent
    seen = set()
    h: str | None = leaf_of.get(a)
    while h is not None:
        seen.add(h)
        h = parent.get(h)
    h = leaf_of.get(b)
    while h is not None:
        if h in seen:
            return h, specs[h].tier
        h = parent.get(h)
    return None


def load_manifests(objs: Iterable[Mapping[str, Any]]) -> tuple[list[HyperNodeSpec], list[Problem]]:
    """HyperNode objects (other kinds ignored) -> specs; malformed ones become problems."""
    specs, problems = [], []
    for o in objs:
        if o.get("kind") != "HyperNode":
            continue
        try:
            specs.append(parse_hypernode(o))
        except MalformedHyperNode as e:
            name = (o.get("metadata") or {}).get("name") or o.get("name") or "?"
            problems.append(Problem("bad_object", str(name), str(e)))
    return specs, problems


def to_manifest(spec: HyperNodeSpec) -> dict[str, Any]:
    """A spec back to an applyable HyperNode object (members by exactMatch)."""
    members = []
    for m in spec.members:
        if m.selector == "labelMatch":
            sel: dict[str, Any] = {"labelMatch": {k: v for k, v in m.value.items() if v}}
        elif m.selector == "regexMatch":
            sel = {"regexMatch": {"pattern": m.value}}
        else:
            sel = {"exactMatch": {"name": m.value}}
        members.append({"type": m.type or "Node", "selector": sel})
    spec_d: dict[str, Any] = {"tier": spec.tier}
    if spec.tier_name:
        spec_d["tierName"] = spec.tier_name
    spec_d["members"] = members
    return {
        "apiVersion": API_VERSION,
        "kind": "HyperNode",
        "metadata": {"name": spec.name},
        "spec": spec_d,
    }


__all__ = [
    "INVALID_REGEX",
    "HyperNodeSpec",
    "HyperNodeTree",
    "MalformedHyperNode",
    "Member",
    "Problem",
    "go_regex",
    "load_manifests",
    "member_problems",
    "parse_hypernode",
    "stored_selector",
    "to_manifest",
]
