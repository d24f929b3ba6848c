"""The wording of the log lines the simulated jobs and nodes print, per NCCL, PyTorch and driver
version, and the files they land in: CRI container logs (`<RFC3339Nano> <stream> <P|F> <msg>`,
long lines cut into partial `P` pieces) and the kernel log as `journalctl -k -o short-iso` text.

Each builder returns the line's text and the fields railscope's grammar reads from it
(docs/logs.md, the `log_event` contract): the fast path stores those fields, the device path
writes the text, so both come from one place. It never decides what happens: telemetry/sim/logs.py
does.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from telemetry.xid import lookup

# Versions a simulated job's image may carry (chosen per job by a stable hash, logs.py) and each
# node's driver. Wording that changed between them is written per version below.
NCCL_VERSIONS = ("2.18.3", "2.21.5")
TORCH_VERSIONS = ("2.1.2", "2.4.0")
DRIVER_VERSIONS = ("470.182.03", "535.129.03")
# ibv_wc_status names of the statuses NCCL reports (infiniband/verbs.h)
WC_STATUS = {5: "IBV_WC_WR_FLUSH_ERR", 12: "IBV_WC_RETRY_EXC_ERR"}
CRI_MAX = 160  # the simulated runtime cuts longer lines into partial (P) pieces at this length

Fields = dict[str, Any]


def _newer(version: str, than: str) -> bool:
    return tuple(int(x) for x in version.split(".")) >= tuple(int(x) for x in than.split("."))


def nccl(host: str, pid: int, cuda_dev: int, level: str, msg: str) -> str:
    """NCCL's prefix: `<host>:<pid>:<tid> [<cudaDev>] NCCL <LEVEL> <msg>`."""
    return f"{host}:{pid}:{pid + 7} [{cuda_dev}] NCCL {level} {msg}"


def nccl_version(version: str) -> tuple[str, Fields]:
    cuda = "12.2" if not _newer(version, "2.19.0") else "12.4"
    return f"NCCL version {version}+cuda{cuda}", {"nccl_version": version}


def ib_devices(nics: list[str], oob_ip: str) -> tuple[str, Fields]:
    using = " ".join(f"[{i}]{n}:1/RoCE" for i, n in enumerate(nics))
    return f"NET/IB : Using {using} [RO]; OOB eth0:{oob_ip}<0>", {"nics": list(nics)}


def net_selected(net: str) -> tuple[str, Fields]:
    return f"Using network {net}", {"net": net}


def channel(
    ch: int, src: int, src_dev: int, dst: int, dst_dev: int, net: str, dev: int, gdr: bool
) -> tuple[str, Fields]:
    via = f"NET/{net}/{dev}" + ("/GDRDMA" if gdr else "")
    text = f"Channel {ch:02d}/0 : {src}[{src_dev}] -> {dst}[{dst_dev}] [send] via {via}"
    return text, {
        "channel": ch,
        "src_rank": src,
        "dst_rank": dst,
        "net_dev": dev,
        "gdr": gdr,
        "pxn_proxy": None,
    }


def gdr_disabled(dev: int, nic: str) -> tuple[str, Fields]:
    return f"NET/IB : GPU Direct RDMA Disabled for HCA {dev} '{nic}'", {"nic": nic}


def init_complete(
    version: str, comm: int, rank: int, nranks: int, cuda_dev: int, bus: int, comm_id: str
) -> tuple[str, Fields]:
    nvml = f" nvmlDev {cuda_dev}" if _newer(version, "2.19.0") else ""
    text = (
        f"comm 0x{comm:x} rank {rank} nranks {nranks} cudaDev {cuda_dev}{nvml} busId {bus:x}000 "
        f"commId {comm_id} - Init COMPLETE"
    )
    return text, {"rank": rank, "nranks": nranks, "comm_id": comm_id}


def ib_completion_error(
    version: str,
    host: str,
    pid: int,
    cuda_dev: int,
    peer_ip: str,
    peer_port: int,
    status: int,
    vendor_err: int,
    direction: str,
    local_ip: str,
) -> tuple[str, Fields]:
    """`Got completion from peer ... with error N` (NCCL 2.18) or `with status=N ... (Recv)
    localGid ... remoteGids...` (2.19 on, which also name the direction and both GIDs)."""
    fields: Fields = {
        "host": host,
        "pid": pid,
        "cuda_dev": cuda_dev,
        "peer_ip": peer_ip,
        "peer_port": peer_port,
        "status": status,
        "status_name": WC_STATUS[status],
        "vendor_err": vendor_err,
        "direction": None,
        "local_gid": None,
        "remote_gid": None,
    }
    head = f"NET/IB : Got completion from peer {peer_ip}<{peer_port}> with "
    if not _newer(version, "2.19.0"):
        return head + f"error {status}, opcode 0, len 0, vendor err {vendor_err}", fields
    lg, rg = f"::ffff:{local_ip}", f"::ffff:{peer_ip}"
    fields.update(direction=direction, local_gid=lg, remote_gid=rg)
    text = (
        head + f"status={status} opcode=0 len=0 vendor err {vendor_err} ({direction}) "
        f"localGid {lg} remoteGids{rg}"
    )
    return text, fields


def torch_nccl_error(nccl_version: str, torch_version: str, rank: int) -> tuple[str, Fields]:
    err = "unhandled system error"
    where = (
        "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970"
        if not _newer(torch_version, "2.3.0")
        else "/opt/pytorch/pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:317"
    )
    prefix = f"[rank{rank}]: " if _newer(torch_version, "2.3.0") else ""
    text = (
        f"{prefix}torch.distributed.DistBackendError: NCCL error in: {where}, {err} "
        f"(run with NCCL_DEBUG=INFO for details), NCCL version {nccl_version}"
    )
    return text, {"nccl_error": err}


def watchdog_timeout(
    torch_version: str,
    ts_ms: int,
    pid: int,
    rank: int,
    seq: int,
    numel: int,
    timeout_ms: int,
    ran_ms: int,
) -> tuple[str, Fields]:
    """PyTorch's watchdog: `[Rank N] Watchdog caught ...` (2.1) or, from 2.3 on, the glog
    prefix and `[PG ID 0 PG GUID 0(default_pg) Rank N]`."""
    work = (
        f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
        f"NumelIn={numel}, NumelOut={numel}, Timeout(ms)={timeout_ms}) ran for {ran_ms} "
        "milliseconds before timing out."
    )
    fields: Fields = {
        "rank": rank,
        "pg": None,
        "seq_num": seq,
        "op_type": "ALLREDUCE",
        "timeout_ms": timeout_ms,
        "ran_ms": ran_ms,
    }
    if not _newer(torch_version, "2.3.0"):
        return f"[E ProcessGroupNCCL.cpp:475] [Rank {rank}] {work}", fields
    t = datetime.fromtimestamp(ts_ms / 1000, UTC)
    glog = f"[rank{rank}]:[E{t:%m%d %H:%M:%S}.{t.microsecond:06d} {pid} "
    fields["pg"] = 0
    return (
        glog + "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:607] "
        f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}] {work}",
        fields,
    )


def xid(driver: str, bus: int, code: int, msg: str) -> tuple[str, Fields]:
    """`NVRM: Xid (PCI:0000:18:00): 79, pid=<unknown>, GPU has fallen off the bus.` (470) or,
    from 525 on, `pid='<unknown>', name=<unknown>, ...`."""
    pci = f"0000:{bus:02x}:00"
    who = "pid=<unknown>" if not _newer(driver, "525.0.0") else "pid='<unknown>', name=<unknown>"
    info = lookup(code)  # what the source adds from NVIDIA's catalog (telemetry/xid.py)
    return f"NVRM: Xid (PCI:{pci}): {code}, {who}, {msg}", {
        "pci_bus": pci,
        "xid": code,
        "pid": None,
        "process": None,
        "mnemonic": info.mnemonic,
        "action": info.action,
        "fatal": info.fatal,
    }


def fallen_off_bus(bus: int) -> tuple[str, Fields]:
    return f"NVRM: GPU 0000:{bus:02x}:00.0: GPU has fallen off the bus.", {
        "pci_bus": f"0000:{bus:02x}:00"
    }


# --- files ---------------------------------------------------------------------------------------
def rfc3339nano(ts_ms: int, ns: int = 0) -> str:
    t = datetime.fromtimestamp(ts_ms // 1000, UTC)
    return f"{t:%Y-%m-%dT%H:%M:%S}.{(ts_ms % 1000) * 1_000_000 + ns:09d}Z"


def cri_lines(ts_ms: int, seq: int, stream: str, text: str) -> list[str]:
    """One message as the container runtime writes it: pieces of CRI_MAX characters tagged P,
    the last one F (the log source joins them)."""
    stamp = rfc3339nano(ts_ms, seq % 1_000_000)
    pieces = [text[i : i + CRI_MAX] for i in range(0, len(text), CRI_MAX)] or [""]
    return [
        f"{stamp} {stream} {'F' if i == len(pieces) - 1 else 'P'} {p}" for i, p in enumerate(pieces)
    ]


def journal_line(ts_ms: int, node: str, text: str) -> str:
    """`journalctl -k -o short-iso`: wall time, host, `kernel:`, the message."""
    t = datetime.fromtimestamp(ts_ms / 1000, UTC)
    return f"{t:%Y-%m-%dT%H:%M:%S}+0000 {node} kernel: {text}"


def append(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fh.write("".join(f"{x}\n" for x in lines))
