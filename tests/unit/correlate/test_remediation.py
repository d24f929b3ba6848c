"""What to do about each finding kind (`do` in telemetry/correlate/kinds.yaml): every kind a
detector reports has one, filled with the finding's own values, falling back to a template that
needs nothing but the subject; docs/runbooks.md is the file rendered, with a section per kind."""

from __future__ import annotations

import re
from pathlib import Path

from telemetry.correlate import remediation as rem
from telemetry.correlate.kinds import kinds as declared
from telemetry.correlate.registry import finding_kinds

ROOT = Path(__file__).parents[3]


def test_every_reported_kind_has_a_remediation_and_nothing_else_does() -> None:
    kinds = finding_kinds()
    assert set(declared()) == set(kinds)
    for k in kinds:
        entry = declared()[k]
        assert entry.means and entry.do, k
        # the last template needs only the subject: every finding gets one
        assert set(re.findall(r"\{(\w+)", entry.do[-1])) == {"subject"}, k
        assert rem.remediation(k, "node", "n1", {}).strip(), k
        page, _, _ = entry.doc.partition("#")
        assert (ROOT / page).is_file(), entry.doc


def test_templates_are_filled_with_the_findings_own_values() -> None:
    r = rem.remediation(
        "low_flow_entropy",
        "job",
        "team-b/eval-b",
        {"job": "team-b/eval-b", "qps_needed": 9, "qps_per_connection": 1,
         "busiest_leaf": "leaf-r7", "collision_probability": 0.90625,
         "target_collision_probability": 0.1},
    )  # fmt: skip
    assert r.startswith("Set NCCL_IB_QPS_PER_CONNECTION=9 on team-b/eval-b's pods (now 1)")
    assert "from 91% to under 10%" in r
    # no QP count helps (qps_needed None): the next template, not a "None" in the text
    r = rem.remediation(
        "low_flow_entropy",
        "job",
        "a/b",
        {"job": "a/b", "qps_needed": None, "collision_probability": 1.0,
         "target_collision_probability": 0.1, "busiest_leaf": "leaf-1"},
    )  # fmt: skip
    assert r.startswith("No QP count NCCL allows brings a/b's collision chance (100%)")
    # the setting that forced an algorithm: named when there is one, else NCCL's own pick
    ev = {"job": "t/ar", "try_setting": "NCCL_ALGO=NVLSTree", "best_algorithm": "NVLS_TREE",
          "best_protocol": "SIMPLE", "best_reached_gbs": 40.56, "algorithm": "RING",
          "protocol": "SIMPLE", "reached_gbs": 22.86}  # fmt: skip
    forced = rem.remediation("collective_algorithm_underperforms", "communicator", "t/ar/0x1",
                             {**ev, "setting": "NCCL_ALGO=Ring"})  # fmt: skip
    assert forced.startswith("Remove NCCL_ALGO=Ring from t/ar's pods (or set NCCL_ALGO=NVLSTree)")
    assert "NVLS_TREE/SIMPLE reached 40.6 GB/s" in forced
    picked = rem.remediation("collective_algorithm_underperforms", "communicator", "t/ar/0x1",
                             {**ev, "setting": ""})  # fmt: skip
    assert picked.startswith("Set NCCL_ALGO=NVLSTree on t/ar's pods (NCCL picked RING/SIMPLE")
    # subject parts: a GPU's node and index
    lost = rem.remediation("gpu_lost", "gpu", "gpu-3/gpu5", {})
    assert "kubectl cordon gpu-3" in lost and "RMA GPU 5" in lost and "reboot it" in lost
    assert rem.runbook("gpu_lost") == "docs/runbooks.md#gpu_lost"
    assert rem.remediation("no_such_kind", "node", "n", {}) == ""


def test_runbooks_page_is_rendered_from_the_declarations() -> None:
    text = (ROOT / "docs" / "runbooks.md").read_text()
    assert text == rem.markdown(), (
        "run: python -m telemetry.correlate.remediation > docs/runbooks.md"
    )
    for k in finding_kinds():
        assert f"\n## {k}\n" in text
    # a guarded template shows its condition first
    assert "\n- *action RESTART_APP:* {xid_label} on GPU {gpu} of {node}: " in text
    assert "\n- *action IGNORE; repeated True:* " in text


def _xid_evidence(code: int, **extra: object) -> dict[str, object]:
    from telemetry import xid

    info = xid.lookup(code)
    bucket = xid.buckets().get(info.action or "")
    return {
        "xids": [code],
        "events": 1,
        "action": info.action,
        "action_from": "catalog",
        "xid_label": info.label,
        "investigatory": info.investigatory,
        "action_means": bucket.means if bucket else None,
        **extra,
    }


def test_no_restart_app_or_ignore_xid_advises_a_drain_or_a_cordon() -> None:
    from telemetry import xid

    quiet = [c for c, i in xid.catalog().items() if i.action in ("RESTART_APP", "IGNORE")]
    assert {13, 31, 43, 63, 92, 94} <= set(quiet)
    for code in quiet:
        for extra in ({}, {"repeated": True, "events": 5}, {"repeated": False}):
            text = rem.remediation("gpu_xid", "gpu", "n1/gpu3", _xid_evidence(code, **extra))
            assert xid.lookup(code).action in text, (code, text)  # the catalog's word, named
            assert not re.search(r"\b(drain|cordon)", text, re.IGNORECASE), (code, text)


def test_each_xid_action_gets_its_own_advice() -> None:
    def advice(code: int, **extra: object) -> str:
        return rem.remediation("gpu_xid", "gpu", "n1/gpu3", _xid_evidence(code, **extra))

    assert "checkpoint" in advice(94) and "stay in service" in advice(94)
    assert "nvidia-smi -r -i 3" in advice(95) and "kubectl drain n1" in advice(95)  # RESET_GPU
    assert "reboot it" in advice(79) and "kubectl cordon n1" in advice(79)  # RESTART_BM
    xid48 = advice(48, workflow_step="DRAIN_AND_RESET")
    assert "WORKFLOW_XID_48, here DRAIN_AND_RESET" in xid48 and "SRAM" in xid48
    assert "nvidia-smi nvlink -e -i 3" in advice(74)  # WORKFLOW_NVLINK_ERR
    assert "XID 144-150 Decode" in advice(149)  # WORKFLOW_NVLINK5_ERR
    assert "nvidia-fabricmanager" in advice(45)  # WORKFLOW_XID_45
    assert "logged 5 times" in advice(92, repeated=True, events=5)
    assert "no action is known" in advice(999)
    assert advice(159).startswith("Xid 159 ROBUST_CHANNEL_CHI_NON_DATA_ERROR on GPU 3 of n1: ")
    assert "CHECK_UVM: If UVM or vGPU is in use" in advice(159)  # a bucket's own words


def test_every_gpu_xid_template_follows_its_action_bucket() -> None:
    """Every guarded gpu_xid template names a bucket of the catalog's vocabulary (or null: action
    unknown), and every bucket renders advice that names it: RESTART_APP and IGNORE (repeated or
    not) never a drain or a cordon, no bucket the catalog calls non-fatal a cordon or a
    `kubectl drain`, and the ones that take the GPU out of service a step that does."""
    from telemetry import xid

    buckets = xid.buckets()
    guarded = [t for t in declared()["gpu_xid"].do if isinstance(t, dict)]
    named = {a for t in guarded for a in (t["when"].get("action"),) if "action" in t["when"]}
    assert named - set(buckets) == {None}, named - set(buckets)  # no misspelled bucket
    # one Xid of the catalog per bucket where it has one (the label shows its mnemonic), 999 else
    code_of = {i.action: c for c, i in sorted(xid.catalog().items(), reverse=True)}
    out_of_service = re.compile(r"nvidia-smi -r|reboot|Restart the VM", re.IGNORECASE)
    for action in [*buckets, None]:
        code = code_of.get(action, 999)
        for extra in ({}, {"repeated": True, "events": 9}, {"repeated": False}):
            ev = {
                **_xid_evidence(code, **extra),
                "action": action,
                "action_means": buckets[action].means if action in buckets else None,
                "action_from": "Xid 154: Drain P2P" if action == "DRAIN_P2P" else "catalog",
                "workflow_step": "RESET_GPU",
            }
            text = rem.remediation("gpu_xid", "gpu", "n1/gpu3", ev)
            assert text.startswith(f"{xid.lookup(code).label} on GPU 3 of n1"), (action, text)
            if action is None:
                assert "no action is known" in text, text
                continue
            assert action in text, (action, text)
            fatal = buckets[action].fatal
            if action in ("RESTART_APP", "IGNORE"):
                assert not re.search(r"\b(drain|cordon)", text, re.IGNORECASE), (action, text)
            if fatal is False:
                assert not re.search(r"cordon|kubectl drain", text, re.IGNORECASE), (action, text)
            if fatal is True:
                assert out_of_service.search(text), (action, text)
