"""NVIDIA's Xid catalog as data: the anchors the catalog page states, unknown codes, Xid 154's
recovery action and 'caused by previous Xid N'."""

from __future__ import annotations

import pytest

from telemetry import xid


@pytest.mark.parametrize(
    ("code", "mnemonic", "action", "fatal"),
    [
        (
            13,
            "ROBUST_CHANNEL_GR_EXCEPTION / ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY",
            "RESTART_APP",
            False,
        ),
        (31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "RESTART_APP", False),
        (45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "WORKFLOW_XID_45", False),
        (48, "ROBUST_CHANNEL_GPU_ECC_DBE", "WORKFLOW_XID_48", True),
        (63, "INFOROM_DRAM_RETIREMENT_EVENT", "IGNORE", False),
        (64, "INFOROM_DRAM_RETIREMENT_FAILURE", "RESET_GPU", True),
        (74, "NVLINK_ERROR", "WORKFLOW_NVLINK_ERR", True),
        (79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "RESTART_BM", True),
        (92, "EXCESSIVE_SBE_INTERRUPTS", "IGNORE", False),
        (94, "ROBUST_CHANNEL_CONTAINED_ERROR", "RESTART_APP", False),
        (95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "RESET_GPU", True),
        (119, "GSP_RPC_TIMEOUT", "RESET_GPU", True),
        (120, "GSP_ERROR", "RESET_GPU", True),
        (144, "NVLINK_SAW_ERROR", "WORKFLOW_NVLINK5_ERR", None),
        (150, "NVLINK_MSE_ERROR", "WORKFLOW_NVLINK5_ERR", None),
        (154, "GPU_RECOVERY_ACTION_CHANGED", "XID_154", False),
        (1, "ROBUST_CHANNEL_FIFO_ERROR_FIFO_METHOD", "CONTACT_SUPPORT", None),
    ],
)
def test_catalog_anchors(code: int, mnemonic: str, action: str, fatal: bool | None) -> None:
    info = xid.describe(code)
    assert info is not None
    assert (info.xid, info.mnemonic, info.action, info.fatal) == (code, mnemonic, action, fatal)


def test_every_code_of_current_drivers_is_listed_and_every_action_is_a_bucket() -> None:
    codes = sorted(xid.catalog())
    assert codes == list(range(1, 173))
    known = set(xid.buckets())
    for info in xid.catalog().values():
        assert info.mnemonic, info.xid
        assert info.action is None or info.action in known, (info.xid, info.action)
    # the workflows of 144-150 and the H100 applicability read from the same rows
    assert {c for c, i in xid.catalog().items() if i.action == "WORKFLOW_NVLINK5_ERR"} == set(
        range(144, 151)
    )
    assert xid.lookup(79).applies == ("A100", "H100", "B100", "GB200")
    assert xid.lookup(74).applies == ("A100", "H100")


def test_a_code_the_catalog_has_no_action_for_keeps_its_name() -> None:
    info = xid.describe(167)
    assert info is not None and info.mnemonic == "PCIE_FATAL_TIMEOUT"
    assert info.action is None and info.fatal is None


def test_an_unknown_xid_is_kept_and_named_with_its_action_unknown() -> None:
    assert xid.describe(999) is None
    info = xid.lookup(999)
    assert (info.xid, info.known, info.action, info.fatal, info.mnemonic) == (
        999,
        False,
        None,
        None,
        None,
    )
    assert info.label == "Xid 999 (not in NVIDIA's Xid catalog)"
    assert xid.lookup(79).label == "Xid 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS"
    assert xid.effective_action(999) is None


@pytest.mark.parametrize(
    ("line", "code", "text", "action"),
    [
        (
            "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) "
            "to 0x2 (Node Reboot Required)",
            2,
            "Node Reboot Required",
            "RESTART_BM",
        ),
        (
            "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to "
            "0x1 (PF FLR)",
            1,
            "PF FLR",
            "RESET_GPU",
        ),
        (
            "Xid 154 GPU recovery action changed from 0x1 to 0x4 (Drain and Reset)",
            4,
            "Drain and Reset",
            "DRAIN_AND_RESET",
        ),
        (
            "... recovery action changed from 0x2 (Node Reboot Required) to 0x0 (None)",
            0,
            "None",
            "IGNORE",
        ),
        (
            "... recovery action changed from 0x0 (None) to 0x9 (Something New)",
            9,
            "Something New",
            None,
        ),
    ],
)
def test_xid_154_reports_the_recovery_action(
    line: str, code: int, text: str, action: str | None
) -> None:
    rec = xid.recovery_action(line)
    assert rec == xid.Recovery(code, text, action)
    assert xid.effective_action(154, recovery=rec) == action


def test_xid_154_without_its_text_defers_to_the_xid_it_accompanies() -> None:
    assert xid.recovery_action("NVRM: Xid (PCI:0000:3b:00): 154, pid=1") is None
    assert xid.effective_action(154) == "XID_154"
    assert xid.strongest([xid.effective_action(154), xid.effective_action(94)]) == "RESTART_APP"


def test_caused_by_previous_xid_follows_the_previous_xids_action() -> None:
    line = (
        "NVRM: Xid (PCI:0000:1b:00): 45, pid=2231, name=python, Ch 00000008, "
        "caused by previous Xid 149"
    )
    assert xid.caused_by(line) == 149
    assert xid.caused_by("NVRM: Xid (PCI:0000:1b:00): 45, pid=2231, Ch 00000008") is None
    assert xid.effective_action(45, cause=xid.caused_by(line)) == "WORKFLOW_NVLINK5_ERR"
    assert xid.effective_action(45, cause=79) == "RESTART_BM"
    assert xid.effective_action(45) == "WORKFLOW_XID_45"
    assert xid.effective_action(94) == "RESTART_APP"


def test_the_strongest_action_of_several_wins_and_unknown_is_looked_at() -> None:
    assert xid.strongest(["IGNORE", "RESTART_APP", "RESET_GPU"]) == "RESET_GPU"
    assert xid.strongest(["WORKFLOW_XID_48", "IGNORE"]) == "WORKFLOW_XID_48"
    assert xid.strongest(["RESET_GPU", "RESTART_BM"]) == "RESTART_BM"
    assert xid.strongest(["IGNORE", None]) is None
    assert xid.strongest(["RESET_GPU", None]) == "RESET_GPU"
    assert xid.strongest(["IGNORE"]) == "IGNORE"
    assert xid.strongest([]) is None
    assert xid.buckets()["DRAIN_AND_RESET"].fatal is True
