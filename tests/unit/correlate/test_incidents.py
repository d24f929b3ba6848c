"""Grouping findings into incidents (telemetry/correlate/incidents.group): pure, no store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from telemetry.correlate.causes import effect_kinds
from telemetry.correlate.impact import Impact
from telemetry.correlate.incidents import (
    Group,
    Incident,
    IncidentTracker,
    Member,
    NameMemo,
    group,
    incident_id,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
GAP = timedelta(seconds=60)
CONSEQUENCES = set(effect_kinds())
_n = 0


def m(
    kind: str,
    subject_type: str,
    subject: str,
    start: int,
    end: int,
    sev: str = "warning",
    **ev: Any,
) -> Member:
    global _n
    _n += 1
    return Member(
        f"f{_n:03d}",
        kind,
        sev,
        subject_type,
        subject,
        f"{kind} {subject}",
        ev,
        T0 + timedelta(seconds=start),
        T0 + timedelta(seconds=end),
    )


def kinds(g: Any) -> list[str]:
    return [x.kind for x in g.members]


def test_one_idc_pair_of_cross_idc_reads_is_one_incident() -> None:
    reads = [
        m(
            "hdfs_cross_idc_read",
            "host",
            f"10.250.0.{i}",
            10 * i,
            10 * i + 50,
            from_idc="b",
            to_idc="a",
        )
        for i in range(25)
    ]
    other = m("hdfs_cross_idc_read", "host", "10.250.9.9", 20, 60, from_idc="c", to_idc="a")
    gs = group([*reads, other], consequences=CONSEQUENCES, gap=GAP)
    assert sorted(len(g.members) for g in gs) == [1, 25]
    big = next(g for g in gs if len(g.members) == 25)
    assert big.root.subject == "10.250.0.0"  # the earliest
    assert set(big.roles.values()) == {"root", "cause"}


def test_episodes_apart_in_time_are_two_incidents() -> None:
    a = m("gpu_xid", "gpu", "n1/gpu0", 0, 30, "critical")
    b = m("gpu_xid", "gpu", "n1/gpu0", 30 + 61, 120, "critical")  # more than the gap later
    c = m("gpu_xid", "gpu", "n1/gpu0", 30 + 59, 100, "critical")
    assert len(group([a, b], consequences=CONSEQUENCES, gap=GAP)) == 2
    assert len(group([a, c], consequences=CONSEQUENCES, gap=GAP)) == 1


def test_a_link_seen_from_both_ends_is_one_incident() -> None:
    peers = {"leaf1/Ethernet128": "spine0/Ethernet64", "spine0/Ethernet64": "leaf1/Ethernet128"}
    ms = [
        m("link_flap", "port", "leaf1:Ethernet128", 0, 100),
        m("link_flap", "port", "spine0:Ethernet64", 0, 100),
        m("link_errors", "port", "leaf1:Ethernet128", 0, 110),
        m("link_errors", "port", "spine0:Ethernet64", 0, 110),
    ]
    gs = group(ms, consequences=CONSEQUENCES, gap=GAP, peers=peers)
    assert len(gs) == 1 and len(gs[0].members) == 4
    # without LLDP the two ends are different subjects
    assert len(group(ms, consequences=CONSEQUENCES, gap=GAP)) == 2


def test_pfc_storm_takes_its_consequences_and_is_the_root() -> None:
    storm = m(
        "pfc_storm",
        "nic",
        "n8/mlx5_6",
        10,
        130,
        "critical",
        leaf_port="leaf6:Ethernet64",
        propagation=[{"port": "leaf6:Ethernet56"}],
    )
    ecn = m(
        "ecn_hotspot",
        "port",
        "leaf6:Ethernet64",
        0,  # seen before the storm is: still its consequence, not the root
        120,
        cnp_receivers=[{"nic": "n8/mlx5_6", "cnp_sent_per_s": 8000}],
    )
    slow = m("network_bound", "job", "team-a/llm", 30, 90, hot_port="leaf6:Ethernet56")
    gs = group([ecn, slow, storm], consequences=CONSEQUENCES, gap=GAP)
    assert len(gs) == 1
    g = gs[0]
    assert g.root is storm
    assert g.roles == {
        storm.finding_id: "root",
        ecn.finding_id: "consequence",
        slow.finding_id: "consequence",
    }


def test_a_consequence_naming_two_causes_joins_the_one_it_overlaps_longest() -> None:
    stall = m("nic_pcie_stall", "nic", "n3/mlx5_2", 0, 120)
    storm = m("pfc_storm", "nic", "n8/mlx5_6", 120, 240, "critical")
    ecn = m(
        "ecn_hotspot",
        "port",
        "leaf2:Ethernet24",
        0,
        120,
        cnp_receivers=[{"nic": "n8/mlx5_6"}, {"nic": "n3/mlx5_2"}],
    )
    gs = group([stall, storm, ecn], consequences=CONSEQUENCES, gap=GAP)
    assert len(gs) == 2
    assert next(g for g in gs if g.root is stall).roles[ecn.finding_id] == "consequence"


def _roots(gs: list[Group]) -> dict[str, str]:
    return {fid: g.root.finding_id for g in gs for fid in g.roles}


def test_a_memo_reads_a_finding_again_once_its_evidence_or_the_peers_change() -> None:
    """Grouping with a NameMemo kept across calls (as IncidentTracker does) gives what grouping
    without one gives: a finding seen again with other evidence (same id, a later time) moves
    to the cause it names now, and new LLDP peers are read (not the memo's old links)."""
    stall = m("nic_pcie_stall", "nic", "n3/mlx5_2", 0, 300)
    storm = m("pfc_storm", "nic", "n8/mlx5_6", 0, 300, "critical")
    ecn = m("ecn_hotspot", "port", "leaf2:Ethernet24", 0, 120, cnp_receivers=[{"nic": "n3/mlx5_2"}])
    memo = NameMemo()  # it holds for the same peers (and consequences) only
    kw: dict[str, Any] = {"consequences": CONSEQUENCES, "gap": GAP, "peers": {}}
    first = group([stall, storm, ecn], memo=memo, **kw)
    assert _roots(first)[ecn.finding_id] == stall.finding_id
    seen = Member(**{**vars(ecn), "evidence": {"cnp_receivers": [{"nic": "n8/mlx5_6"}]}})
    seen.last_seen += timedelta(seconds=60)
    again = group([stall, storm, seen], memo=memo, **kw)
    assert _roots(again)[ecn.finding_id] == storm.finding_id
    assert _roots(again) == _roots(group([stall, storm, seen], **kw))
    # one end of a link, then its peer: one incident once the peers say they are one link
    a = m("link_flap", "port", "leaf1:Ethernet8", 0, 120, "critical")
    b = m("link_flap", "port", "spine1:Ethernet3", 0, 120, "critical")
    assert len(group([a, b], memo=memo, **kw)) == 2
    peers = {"leaf1/Ethernet8": "spine1/Ethernet3", "spine1/Ethernet3": "leaf1/Ethernet8"}
    assert len(group([a, b], memo=memo, **{**kw, "peers": peers})) == 1


def test_a_consequence_without_a_cause_is_its_own_incident() -> None:
    ecn = m("ecn_hotspot", "port", "leaf2:Ethernet24", 0, 120, queues=[3])
    other = m("gpu_throttle", "gpu", "n3/gpu1", 0, 120)
    gs = group([ecn, other], consequences=CONSEQUENCES, gap=GAP)
    assert sorted(g.root.kind for g in gs) == ["ecn_hotspot", "gpu_throttle"]


def test_same_subject_different_kinds_root_is_the_longest_then_most_severe() -> None:
    lost = m("gpu_lost", "gpu", "n4/gpu0", 0, 80, "critical")
    xid = m("gpu_xid", "gpu", "n4/gpu0", 0, 20, "critical", first="2026-01-01 00:00:00")
    gs = group([xid, lost], consequences=CONSEQUENCES, gap=GAP)
    assert len(gs) == 1 and gs[0].root is lost
    hard = m("placement_violation", "job", "team-c/rl-c", 0, 600, "critical")
    spans = m("job_spans_su", "job", "team-c/rl-c", 0, 600)
    gs = group([spans, hard], consequences=CONSEQUENCES, gap=GAP)
    assert kinds(gs[0]) == ["placement_violation", "job_spans_su"]


def test_one_placement_policy_failure_over_many_files_is_one_incident() -> None:
    layout = ['{"idc-a": 3, "idc-b": 1}']
    files = [
        m(
            "hdfs_replica_violation",
            "file",
            f"/ckpt/step-{i}/shard.pt",
            10 * i,
            10 * i + 50,
            layouts=layout,
        )
        for i in range(21)
    ]
    odd = m("hdfs_replica_violation", "file", "/x", 0, 50, layouts=['{"idc-a": 4}'])
    gs = group([*files, odd], consequences=CONSEQUENCES, gap=GAP)
    assert sorted(len(g.members) for g in gs) == [1, 21]


def test_one_placement_policy_failure_from_several_writer_idcs_is_one_incident() -> None:
    """The same policy misfiring for writers in three IDCs: 3+1 from each IDC's side is one
    failure (one incident), a 4+0 layout another."""
    files = [
        m(
            "hdfs_replica_violation",
            "file",
            f"/ckpt/{w}/shard.pt",
            0,
            60,
            layouts=[f'{{"{w}": 3, "{o}": 1}}'],
        )
        for w, o in (("idc-a", "idc-b"), ("idc-b", "idc-c"), ("idc-c", "idc-a"))
    ]
    odd = m("hdfs_replica_violation", "file", "/x", 0, 50, layouts=['{"idc-a": 4}'])
    gs = group([*files, odd], consequences=CONSEQUENCES, gap=GAP)
    assert sorted(len(g.members) for g in gs) == [1, 3]
    (big,) = [g for g in gs if len(g.members) == 3]
    inc = Incident("i", "c", big, "open", Impact())
    assert inc.summary.endswith("in 3 places: idc-a, idc-b, idc-c)"), inc.summary


def _group(root: Member, *others: Member) -> Group:
    """A group as `group` makes them: root first, then causes and consequences."""
    roles = {root.finding_id: "root"}
    for o in others:
        roles[o.finding_id] = "consequence" if o.kind in CONSEQUENCES else "cause"
    return Group([root, *others], roles)


@pytest.mark.parametrize("order", ["new cause's group first", "old root's group first"])
def test_ids_stay_with_the_group_of_their_root_in_any_order(order: str) -> None:
    """Incident A: an ECMP collision (its root, A's id is its hash) and an ECN hotspot that
    started before it. Regrouped, the hotspot goes with a PFC storm: A stays with the
    collision, the storm's group gets a new id, no two groups share an id and nothing is
    marked merged, whichever group comes first (the old rule gave A to the first group holding
    any of A's findings and the collision then got its hash again: A's id, twice)."""
    ecn = m("ecn_hotspot", "port", "leaf6:Ethernet64", 0, 60)
    ecmp = m("ecmp_imbalance", "port", "leaf6:Ethernet64", 20, 40)
    storm = m("pfc_storm", "nic", "n8/mlx5_6", 50, 60, "critical", leaf_port="leaf6:Ethernet64")
    tracker = IncidentTracker(None, "c", GAP)  # type: ignore[arg-type]  # _assign: no store
    a = incident_id("c", ecmp)
    tracker.open = {a: Incident(a, "c", _group(ecmp, ecn), "open", Impact())}
    new, old = _group(storm, ecn), _group(ecmp)
    groups = [new, old] if order.startswith("new") else [old, new]
    out = {i.group.root.kind: i for i in tracker._assign(groups)}
    assert sorted(out) == ["ecmp_imbalance", "pfc_storm"]
    assert out["ecmp_imbalance"].incident_id == a
    assert out["pfc_storm"].incident_id not in ("", a)
    assert not any(i.merged_into for i in out.values())


def test_a_new_groups_id_is_never_one_in_use() -> None:
    """An incident keeps the id its first root gave it; when that finding later roots a group
    of its own while the incident lives on elsewhere, the group gets another id."""
    ecn = m("ecn_hotspot", "port", "leaf7:Ethernet8", 0, 60)
    ecmp = m("ecmp_imbalance", "port", "leaf7:Ethernet8", 0, 10)
    storm = m("pfc_storm", "nic", "n9/mlx5_0", 0, 60, "critical", leaf_port="leaf7:Ethernet8")
    tracker = IncidentTracker(None, "c", GAP)  # type: ignore[arg-type]
    a = incident_id("c", ecmp)  # created with the collision as root; the storm is its root now
    tracker.open = {a: Incident(a, "c", _group(storm, ecmp, ecn), "open", Impact())}
    out = tracker._assign([_group(storm, ecn), _group(ecmp)])
    ids = [i.incident_id for i in out]
    assert ids[0] == a and len(set(ids)) == 2 and not any(i.merged_into for i in out)


def test_a_collection_gap_takes_the_effects_seen_on_its_silent_device() -> None:
    """A switch collector silent while an effect (a consequence kind) is reported on one of its
    ports: one incident, the gap its root. An effect on another switch, or a cause on the silent
    switch, stays its own."""
    gap = m("collection_gap", "switch", "leaf1", 0, 200, device="leaf1")
    effect = m("ecn_hotspot", "port", "leaf1:Ethernet8", 60, 120)
    other = m("ecn_hotspot", "port", "leaf2:Ethernet8", 60, 120)
    flap = m("link_flap", "port", "leaf1:Ethernet16", 30, 200, "critical")
    gs = group([gap, effect, other, flap], consequences=CONSEQUENCES, gap=GAP)
    by_root = {g.root.subject: kinds(g) for g in gs}
    assert by_root["leaf1"] == ["collection_gap", "ecn_hotspot"]
    assert by_root["leaf2:Ethernet8"] == ["ecn_hotspot"]
    assert by_root["leaf1:Ethernet16"] == ["link_flap"]


def test_a_log_born_symptom_joins_the_cause_it_usually_follows_not_the_longest_overlap() -> None:
    """An NCCL network error names the ECMP uplinks of its path; a job-wide low_flow_entropy that
    names the same uplinks overlaps it longer than the link flap does, yet the error joins the
    flap (causes.yaml prefer_usual). An ecn_hotspot in the same spot (not in prefer_usual) still
    joins by the longest overlap."""
    up = "leaf0a:Ethernet128"
    entropy = m("low_flow_entropy", "job", "team/job", 0, 600, uplinks=[up, "leaf0a:Ethernet130"])
    flap = m("link_flap", "port", up, 100, 160)
    err = m("nccl_network_error", "rank_pair", "team/job/rank0<->rank8", 105, 225,
            path=["leaf0a:Ethernet0", up])  # fmt: skip
    gs = group([entropy, flap, err], consequences=CONSEQUENCES, gap=GAP)
    home = next(g for g in gs if err.finding_id in g.roles)
    assert home.root is flap and home.roles[err.finding_id] == "consequence"
    ecn = m("ecn_hotspot", "port", "leaf0a:Ethernet0", 105, 225, uplinks=[up])
    gs = group([entropy, flap, ecn], consequences=CONSEQUENCES, gap=GAP)
    assert next(g for g in gs if ecn.finding_id in g.roles).root is entropy
