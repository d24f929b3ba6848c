"""libibverbs' `enum ibv_wc_status` (rdma-core, libibverbs/verbs.h): the status an NCCL "Got
completion ... with status=N" line prints, by number. Leaf data."""

from __future__ import annotations

IBV_WC_STATUS: tuple[str, ...] = (
    "IBV_WC_SUCCESS",  # 0
    "IBV_WC_LOC_LEN_ERR",
    "IBV_WC_LOC_QP_OP_ERR",
    "IBV_WC_LOC_EEC_OP_ERR",
    "IBV_WC_LOC_PROT_ERR",
    "IBV_WC_WR_FLUSH_ERR",  # 5: flushed after the QP went to error (the burst after a 12)
    "IBV_WC_MW_BIND_ERR",
    "IBV_WC_BAD_RESP_ERR",
    "IBV_WC_LOC_ACCESS_ERR",
    "IBV_WC_REM_INV_REQ_ERR",
    "IBV_WC_REM_ACCESS_ERR",  # 10
    "IBV_WC_REM_OP_ERR",
    "IBV_WC_RETRY_EXC_ERR",  # 12: transport retries exhausted (no ACK from the peer)
    "IBV_WC_RNR_RETRY_EXC_ERR",
    "IBV_WC_LOC_RDD_VIOL_ERR",
    "IBV_WC_REM_INV_RD_REQ_ERR",  # 15
    "IBV_WC_REM_ABORT_ERR",
    "IBV_WC_INV_EECN_ERR",
    "IBV_WC_INV_EEC_STATE_ERR",
    "IBV_WC_FATAL_ERR",
    "IBV_WC_RESP_TIMEOUT_ERR",  # 20
    "IBV_WC_GENERAL_ERR",
    "IBV_WC_TM_ERR",
    "IBV_WC_TM_RNDV_INCOMPLETE",  # 23
)


def wc_status_name(status: int) -> str | None:
    """The enum name of an ibv_wc_status number; None for a number the enum does not have."""
    return IBV_WC_STATUS[status] if 0 <= status < len(IBV_WC_STATUS) else None


__all__ = ["IBV_WC_STATUS", "wc_status_name"]
