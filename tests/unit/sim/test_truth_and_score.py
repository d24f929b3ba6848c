"""Determinism, ground truth on disk, and the scorer's arithmetic."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from telemetry.correlate.causes import effect_kinds
from telemetry.errors import ConfigError
from telemetry.sim import build
from telemetry.sim.model import GroundTruth
from telemetry.sim.scenario import load_scenario
from telemetry.sim.score import Finding, load_finding_map, render, score


def _digest(scenario: str, **over: object) -> tuple[str, dict[str, int]]:
    sim = build(load_scenario(scenario).with_overrides(start="2026-11-01T00:00:00Z", **over))  # type: ignore[arg-type]
    h = hashlib.sha256()
    rows: dict[str, int] = {}
    for batches in sim.batches():  # with the scenario's collection timing: deterministic too
        for b in batches:
            import pyarrow as pa
            import pyarrow.ipc as ipc

            sink = pa.BufferOutputStream()
            with ipc.new_stream(sink, b.table.schema) as w:
                w.write_table(b.table)
            h.update(b.kind.name.encode())
            h.update(sink.getvalue().to_pybytes())
            rows[b.kind.name] = rows.get(b.kind.name, 0) + b.num_rows
    return h.hexdigest(), rows


def test_same_seed_same_records_other_seed_other_records():
    a, rows = _digest("small", minutes=3)
    b, _ = _digest("small", minutes=3)
    c, _ = _digest("small", minutes=3, seed=2)
    assert a == b
    assert a != c
    assert rows["gpu_sample"] == 32 * 8 * 18


def test_start_defaults_to_ending_at_the_current_minute():
    sim = build(load_scenario("small").with_overrides(minutes=2), now_s=1_800_000_030.0)
    assert sim.end_ms == 1_800_000_000_000
    assert sim.start_ms == sim.end_ms - 120_000


def test_ground_truth_round_trips(tmp_path: Path):
    sim = build(load_scenario("small").with_overrides(start="2026-11-01T00:00:00Z"))
    truth = sim.ground_truth()
    p = truth.write(tmp_path / "gt.json")
    back = GroundTruth.read(p)
    assert back.to_json() == truth.to_json()
    kinds = {f.kind for f in back.faults}
    assert "pfc_storm" in kinds and "job_spans_su" in kinds
    storm = next(f for f in back.faults if f.kind == "pfc_storm")
    assert storm.subject_type == "nic" and storm.subject in storm.subjects
    assert (
        storm.start_ms == truth.start_ms + 6 * 60_000 and storm.end_ms == storm.start_ms + 120_000
    )
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ConfigError, match="not a railscope ground-truth file"):
        GroundTruth.read(tmp_path / "bad.json")
    with pytest.raises(ConfigError, match="no such file"):
        GroundTruth.read(tmp_path / "none.json")


def test_finding_map_names_only_fault_kinds():
    mapping, consequences = load_finding_map()
    assert mapping["ecmp_imbalance"] == "ecmp_collision"
    assert not set(mapping) & consequences
    # the unscored kinds are the engine's effects (kinds.yaml) without a fault kind of their own
    assert consequences == {k for k in effect_kinds() if k not in mapping}
    assert "network_bound" in consequences


def test_the_scorer_refuses_derived_truth_the_engine_calls_a_cause(tmp_path):
    """A finding kind mapped onto derived truth (a slowdown a fault caused) must be one of the
    engine's effects, or the scorer and the engine's incidents would disagree."""
    bad = tmp_path / "map.yaml"
    bad.write_text("finding_kinds:\n  ecmp_imbalance: collective_slowdown\n")
    with pytest.raises(ValueError, match=r"kinds\.yaml\) does not declare them effects"):
        load_finding_map(bad)


def test_the_scorer_refuses_a_key_that_is_no_declared_kind(tmp_path):
    """A dead alias (a kind no detector reports) scores nothing and hides a renamed kind."""
    bad = tmp_path / "map.yaml"
    bad.write_text("finding_kinds:\n  ecmp_imbalance: ecmp_collision\n  pause_storm: pfc_storm\n")
    with pytest.raises(ValueError, match=r"undeclared finding kind\(s\) pause_storm"):
        load_finding_map(bad)


def test_score_counts_precision_recall_localization():
    truth = build(
        load_scenario("small").with_overrides(start="2026-11-01T00:00:00Z")
    ).ground_truth()
    storm = next(f for f in truth.faults if f.kind == "pfc_storm")
    flap = next(f for f in truth.faults if f.kind == "link_flap")
    port = storm.detail["stormed_port"].replace(":", "/")  # engines may write switch/port
    findings = [
        Finding("pfc_storm", port, storm.start_ms, storm.end_ms),  # right time, right place
        Finding(
            "pfc_storm", "gpu-x/mlx5_0", truth.start_ms, truth.start_ms + 60_000
        ),  # wrong time: false
        Finding(
            "link_errors", "spine-nowhere/Ethernet0", flap.start_ms, flap.end_ms
        ),  # right time, wrong place
        Finding("network_bound", "team-a/llm-a", storm.start_ms, storm.end_ms),  # a consequence
        Finding("made_up_kind", "x", storm.start_ms, storm.end_ms),
        Finding(
            "job_spans_su", "team-c/rl-c", truth.start_ms, truth.end_ms
        ),  # implied by the violation
    ]
    s = score(truth, findings)
    k = {x.kind: x for x in s.kinds}
    assert (k["pfc_storm"].findings, k["pfc_storm"].true_findings) == (2, 1)
    assert (
        k["pfc_storm"].precision == 0.5
        and k["pfc_storm"].recall == 1.0
        and k["pfc_storm"].localization == 1.0
    )
    assert k["link_flap"].recall == 1.0 and k["link_flap"].localization == 0.0
    assert k["gpu_xid"].recall == 0.0 and k["gpu_xid"].precision is None
    assert k["job_spans_su"].findings == 0  # the implied finding is neither true nor false
    assert s.unmapped == {"made_up_kind": 1} and s.consequences == {"network_bound": 1}
    text = render(s, truth)
    assert "pfc_storm" in text and "50%" in text and "made_up_kind (1)" in text


def test_score_without_findings_says_so():
    truth = build(
        load_scenario("small").with_overrides(start="2026-11-01T00:00:00Z")
    ).ground_truth()
    text = render(score(truth, []), truth)
    assert "no findings" in text and "nothing to score" in text
    assert "%" not in text


def test_a_fault_too_close_to_its_threshold_is_not_scored_either_way(tmp_path: Path):
    """A natural ECMP collision that ran about at the detector's thresholds (scored=False): a
    finding on it is neither true nor false, missing it is no miss, an incident on it is no
    incident; a clear one next to it is scored as before; a round trip keeps the flag."""
    from telemetry.sim.model import Fault
    from telemetry.sim.score import score_incidents

    t0 = 1_800_000_000_000

    def natural(i: int, subject: str, scored: bool) -> Fault:
        return Fault(
            f"ecmp_collision-w{i}", "ecmp_collision", t0, t0 + 300_000, "port", subject,
            [subject], origin="workload", scored=scored,
        )  # fmt: skip

    truth = GroundTruth(
        "t", 1, t0, t0 + 600_000, 10,
        [natural(0, "leaf1:Ethernet8", False), natural(1, "leaf2:Ethernet8", True)],
    )  # fmt: skip
    on_marginal = Finding("ecmp_imbalance", "leaf1:Ethernet8", t0 + 60_000, t0 + 120_000)
    on_clear = Finding("ecmp_imbalance", "leaf2:Ethernet8", t0 + 60_000, t0 + 120_000)
    elsewhere = Finding("ecmp_imbalance", "leaf9:Ethernet8", t0 + 400_000, t0 + 500_000)
    (k,) = score(truth, [on_marginal, on_clear, elsewhere]).kinds
    assert (k.faults, k.detected, k.findings, k.true_findings) == (1, 1, 2, 1)
    (k,) = score(truth, [on_marginal]).kinds
    assert (k.faults, k.detected, k.findings, k.precision) == (1, 0, 0, None)
    inc = score_incidents(truth, [on_marginal, on_clear])
    assert (inc.faults, inc.incidents, inc.true_incidents, inc.false) == (1, 1, 1, [])
    assert "1 too close to a threshold to score" in render(score(truth, [on_clear]), truth)
    back = GroundTruth.read(truth.write(tmp_path / "gt.json"))
    assert [f.scored for f in back.faults] == [False, True]


def test_xid_events_are_scored_by_the_action_and_ignore_class_ones_must_not_page():
    """A gpu_xid fault's ground truth names NVIDIA's catalog action for its Xid: a finding must
    recommend that action, and an IGNORE-class Xid (63) is no fault to page for: an incident
    about it alone is a false one, none is no miss."""
    from telemetry.sim.model import Fault
    from telemetry.sim.score import score_incidents

    t0 = 1_800_000_000_000

    def xid(i: int, subject: str, code: int, action: str) -> Fault:
        return Fault(
            f"gpu_xid-{i}", "gpu_xid", t0 + i * 60_000, t0 + i * 60_000 + 30_000, "gpu", subject,
            [subject], detail={"xid": code, "action": action},
        )  # fmt: skip

    truth = GroundTruth(
        "t", 1, t0, t0 + 600_000, 10,
        [xid(1, "n1/gpu0", 94, "RESTART_APP"), xid(2, "n2/gpu1", 63, "IGNORE"),
         xid(3, "n3/gpu2", 79, "RESTART_BM")],
    )  # fmt: skip

    def f(subject: str, i: int, action: str) -> Finding:
        return Finding("gpu_xid", subject, t0 + i * 60_000, t0 + i * 60_000 + 30_000, action)

    right = [
        f("n1/gpu0", 1, "RESTART_APP"),
        f("n2/gpu1", 2, "IGNORE"),
        f("n3/gpu2", 3, "RESTART_BM"),
    ]
    s = score(truth, right)
    assert (s.actions_judged, s.actions_right, s.actions_wrong) == (3, 3, [])
    s = score(truth, [f("n1/gpu0", 1, "RESET_GPU"), *right[1:]])
    assert s.actions_right == 2
    assert s.actions_wrong == ["gpu_xid n1/gpu0: RESTART_APP, railscope said ['RESET_GPU']"]
    assert "actions: 2/3 events found with the action" in render(s, truth)
    # incidents: the two that page are expected; the IGNORE one is neither expected nor allowed
    inc = score_incidents(truth, [right[0], right[2]])
    assert (inc.faults, inc.quiet_faults, inc.incidents, inc.true_incidents) == (2, 1, 2, 2)
    assert inc.recall == 1.0 and inc.quiet_paged == 0
    inc = score_incidents(truth, right)
    assert (inc.incidents, inc.true_incidents, inc.quiet_paged) == (3, 2, 1)
    assert inc.false == ["gpu_xid n2/gpu1 (an IGNORE-class event: must not page)"]


def test_a_gpu_lost_is_scored_by_the_action_of_xid_79():
    """A GPU fallen off the bus is judged like its Xid 79: the gpu_lost finding must recommend
    the catalog's RESTART_BM, whether or not the Xid line came."""
    from telemetry.sim.model import Fault

    t0 = 1_800_000_000_000
    lost = Fault(
        "gpu_lost-1", "gpu_lost", t0, t0 + 300_000, "gpu", "n1/gpu0", ["n1/gpu0"],
        detail={"xid": 79, "action": "RESTART_BM"},
    )  # fmt: skip
    truth = GroundTruth("t", 1, t0, t0 + 600_000, 10, [lost])
    s = score(truth, [Finding("gpu_lost", "n1/gpu0", t0, t0 + 300_000, "RESTART_BM")])
    assert (s.actions_judged, s.actions_right, s.actions_wrong) == (1, 1, [])
    s = score(truth, [Finding("gpu_lost", "n1/gpu0", t0, t0 + 300_000, "")])
    assert s.actions_wrong == ["gpu_lost n1/gpu0: RESTART_BM, railscope said ['']"]
