"""The grammar on real lines of several NCCL, PyTorch, NVIDIA driver, mlx5 and kernel versions:
every kind of docs/logs.md's table, wording from two versions or more where it changed. Each line
names its public thread (tests/fixtures/logs/PROVENANCE.md for the fixture files)."""

from __future__ import annotations

import pytest

from exporters.logs import grammar
from exporters.logs.ibverbs import IBV_WC_STATUS, wc_status_name

NCCL_1814 = (
    "hostname-test:984:1357 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer "
    "172.36.143.59<44206> with status=12 opcode=129 len=65536 vendor err 129 (Recv) localGid "
    "::ffff:29.87.88.182 remoteGids::ffff:29.87.4.221"
)

CASES = [
    # --- ib_completion_error ----------------------------------------------------------------
    # NCCL 2.2x (https://github.com/NVIDIA/nccl/issues/1814)
    (
        NCCL_1814,
        "ib_completion_error",
        {
            "host": "hostname-test",
            "pid": 984,
            "cuda_dev": 4,
            "peer_ip": "172.36.143.59",
            "peer_port": 44206,
            "status": 12,
            "status_name": "IBV_WC_RETRY_EXC_ERR",
            "vendor_err": 129,
            "direction": "Recv",
            "local_gid": "::ffff:29.87.88.182",
            "remote_gid": "::ffff:29.87.4.221",
        },
    ),
    # net plugin IBP (https://github.com/NVIDIA/nccl/issues/1664)
    (
        "NET/IBP:Got completion from peer 7.6.13.83<36315> with status=12 opcode=32698 "
        "len=32696 vendor err 129 (Send)",
        "ib_completion_error",
        {
            "peer_ip": "7.6.13.83",
            "peer_port": 36315,
            "status": 12,
            "direction": "Send",
            "local_gid": None,
        },
    ),
    # NCCL 2.19 (a PyTorch job's log quoted in a public slide deck)
    (
        "NET/IB : Got completion from peer 10.42.0.2<47534> with error 5, opcode 48, len 32764, vendor err 244",
        "ib_completion_error",
        {
            "peer_ip": "10.42.0.2",
            "peer_port": 47534,
            "status": 5,
            "status_name": "IBV_WC_WR_FLUSH_ERR",
            "vendor_err": 244,
            "direction": None,
            "host": None,
        },
    ),
    # NCCL 2.1x without a peer (https://github.com/NVIDIA/nccl/issues/902)
    (
        "NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 0, vendor err 129",
        "ib_completion_error",
        {"peer_ip": None, "peer_port": None, "status": 12, "vendor_err": 129},
    ),
    # NCCL 2.0 `len0` (https://github.com/horovod/horovod/issues/147)
    (
        "transport/net_ib.cu:781 WARN NET/IB : Got completion with error 12, opcode 1, len0, vendor err 129",
        "ib_completion_error",
        {"status": 12, "status_name": "IBV_WC_RETRY_EXC_ERR", "vendor_err": 129},
    ),
    # NCCL 2.27.5, `hca` at the end (tests/fixtures/logs/nccl-2.27-ib-hca.log)
    (
        "[2026-03-03 12:11:38] tpgds-aihub0007:185303:186751 [1] transport/net_ib.cc:2453 NCCL WARN "
        "NET/IB: Got completion from peer 10.99.91.63<51161> with status=4 opcode=32614 len=32614 "
        "vendor err 81 (Send) localGid ::ffff:10.99.92.59 remoteGids::ffff:10.99.91.63 hca mlx5_1",
        "ib_completion_error",
        {
            "host": "tpgds-aihub0007",
            "pid": 185303,
            "cuda_dev": 1,
            "status": 4,
            "status_name": "IBV_WC_LOC_PROT_ERR",
            "direction": "Send",
            "remote_gid": "::ffff:10.99.91.63",
            "hca": "mlx5_1",
        },
    ),
    # NCCL 2.30: status and opcode by name and number, vendor_err=, no len, no direction
    # (https://github.com/NVIDIA/nccl/issues/2397)
    (
        "[2026-09-09 10:46:34] ubuntu4:250415:250528 [1] transport/net_ib/p2p.cc:648 NCCL WARN "
        "NET/IB: Got completion from peer 10.153.235.11<52743> with status=IBV_WC_RETRY_EXC_ERR(12) "
        "opcode=IBV_WC_RDMA_WRITE(1) vendor_err=129 localGid ::ffff:1.1.1.4 "
        "remoteGids::ffff:1.1.2.2 hca mlx5_0",
        "ib_completion_error",
        {
            "host": "ubuntu4",
            "pid": 250415,
            "cuda_dev": 1,
            "peer_ip": "10.153.235.11",
            "peer_port": 52743,
            "status": 12,
            "status_name": "IBV_WC_RETRY_EXC_ERR",
            "opcode": 1,
            "len": None,
            "vendor_err": 129,
            "direction": None,
            "local_gid": "::ffff:1.1.1.4",
            "remote_gid": "::ffff:1.1.2.2",
            "hca": "mlx5_0",
        },
    ),
    # NCCL 2.27's ib_plugin: reqSize and req_type (a public GitHub note on IOMMU passthrough for
    # RDMA, found through GitHub code search; its three wrapped lines joined)
    (
        "[2026-02-25 06:16:39] h-kim-0:1353:1409 [3] ib_plugin.c:2033 NCCL WARN NET/IB: Got completion "
        "from peer 10.128.8.30<55095> with status=IBV_WC_LOC_PROT_ERR(4) opcode=IBV_WC_SEND(0) "
        "reqSize=524288 vendor_err=81 req_type=Send localGid ::ffff:10.0.106.7 "
        "remoteGids::ffff:10.0.106.6 hca mlx5_11",
        "ib_completion_error",
        {
            "peer_ip": "10.128.8.30",
            "status": 4,
            "status_name": "IBV_WC_LOC_PROT_ERR",
            "req_size": 524288,
            "vendor_err": 81,
            "direction": "Send",
            "local_gid": "::ffff:10.0.106.7",
            "hca": "mlx5_11",
        },
    ),
    # --- nccl_net_selected ------------------------------------------------------------------
    (
        "hostname1:25668:27396 [0] NCCL INFO Using network IB",  # nccl#1537
        "nccl_net_selected",
        {"net": "IB", "host": "hostname1", "pid": 25668, "cuda_dev": 0},
    ),
    (
        "c39f5cf046aa:4533:4667 [0] NCCL INFO Using network Socket",  # nccl#1381
        "nccl_net_selected",
        {"net": "Socket"},
    ),
    # --- nccl_ib_devices --------------------------------------------------------------------
    (  # NCCL 2.5 (https://github.com/Mellanox/nv_peer_memory/issues/56)
        "master_node:24570:24907 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:192.168.11.1<0>",
        "nccl_ib_devices",
        {"nics": ["mlx5_0"], "ports": [1], "link_layers": ["IB"], "oob": "ib0:192.168.11.1<0>"},
    ),
    (  # NCCL 2.2x RoCE with [RO] (nccl#1537)
        "hostname1:25668:27396 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; "
        "OOB primaryip:10.10.10.10<0>",
        "nccl_ib_devices",
        {"nics": ["mlx5_0", "mlx5_1"], "link_layers": ["RoCE", "RoCE"]},
    ),
    # --- nccl_channel_net -------------------------------------------------------------------
    (  # NCCL 2.1x: "Channel 01 :" with bus ids (https://github.com/NVIDIA/nccl/issues/707)
        "10-90-43-152:120890:121560 [0] NCCL INFO Channel 01 : 2[c7000] -> 0[87000] [receive] via NET/IB/5/GDRDMA",
        "nccl_channel_net",
        {
            "channel": 1,
            "src_rank": 2,
            "dst_rank": 0,
            "net_dev": 5,
            "gdr": True,
            "pxn_proxy": None,
            "direction": "receive",
        },
    ),
    (  # no GDR (https://github.com/NVIDIA/nccl/issues/899)
        "21346d5cefce:5325:5338 [0] NCCL INFO Channel 00 : 0[1a000] -> 1[1a000] [receive] via NET/IB/0",
        "nccl_channel_net",
        {"channel": 0, "net_dev": 0, "gdr": False, "pxn_proxy": None},
    ),
    (  # NCCL 2.12+ "Channel 00/0" with PXN through rank 8 (a public NCCL_DEBUG=INFO log on GitHub)
        "tpgds-aihub0008:181412:181412 [1] NCCL INFO Channel 00/0 : 9[1] -> 0[0] [send] via NET/IB/0(8)/GDRDMA",
        "nccl_channel_net",
        {
            "channel": 0,
            "src_rank": 9,
            "dst_rank": 0,
            "net_dev": 0,
            "gdr": True,
            "pxn_proxy": 8,
            "host": "tpgds-aihub0008",
            "cuda_dev": 1,
        },
    ),
    (  # NCCL 2.4.8 named rings, ranks bare (a public note on nv_peer_mem, found through GitHub
        # code search)
        "NCCL INFO Ring 00 : 3 -> 10 [send] via NET/IB/0/GDRDMA",
        "nccl_channel_net",
        {"channel": 0, "src_rank": 3, "dst_rank": 10, "net_dev": 0, "gdr": True, "pxn_proxy": None},
    ),
    (  # an IB net plugin (https://github.com/sgl-project/sglang/issues/3836)
        "deepseek-yanfa:195:3198 [7] NCCL INFO Channel 07/0 : 15[7] -> 7[7] [receive] via NET/IBext_v8/7/GDRDMA",
        "nccl_channel_net",
        {"channel": 7, "src_rank": 15, "dst_rank": 7, "net": "IBext_v8", "net_dev": 7, "gdr": True},
    ),
    # --- nccl_gdr_disabled ------------------------------------------------------------------
    (
        "hostname1:25668:27396 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'",
        "nccl_gdr_disabled",
        {"nic": "mlx5_0", "hca": 0, "reason": None},
    ),
    (  # with the reason (https://github.com/NVIDIA/nccl/issues/899)
        "21346d5cefce:5325:5337 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 1 'mlx5_1' (no module)",
        "nccl_gdr_disabled",
        {"nic": "mlx5_1", "hca": 1, "reason": "no module"},
    ),
    # --- nccl_init_complete -----------------------------------------------------------------
    (  # NCCL 2.2x (nccl#1814)
        "hostname-test:984:1257 [4] NCCL INFO comm 0x557fe785f7a0 rank 36 nranks 64 cudaDev 4 nvmlDev 4 "
        "busId 9b000 commId 0x5ae77eb5ea4ec1ee - Init COMPLETE",
        "nccl_init_complete",
        {"rank": 36, "nranks": 64, "comm_id": "0x5ae77eb5ea4ec1ee"},
    ),
    (  # NCCL 2.21 "ncclCommInitRank comm ..." (https://github.com/NVIDIA/nccl/issues/1412)
        "swat1-04:2017630:2017675 [6] NCCL INFO ncclCommInitRank comm 0x8ec0ac0 rank 6 nranks 16 cudaDev 6 "
        "nvmlDev 6 busId c8000 commId 0x49bbd7790311d5eb - Init COMPLETE",
        "nccl_init_complete",
        {"rank": 6, "nranks": 16, "comm_id": "0x49bbd7790311d5eb", "cuda_dev": 6},
    ),
    # --- nccl_version -----------------------------------------------------------------------
    ("NCCL version 2.5.6+cuda10.0", "nccl_version", {"nccl_version": "2.5.6"}),  # nv_peer_memory#56
    (  # https://github.com/NVIDIA/nccl/issues/1866
        "cl4-gpu03-vm:1134070:1134070 [0] NCCL INFO NCCL version 2.27.6+cuda13.0",
        "nccl_version",
        {"nccl_version": "2.27.6", "host": "cl4-gpu03-vm"},
    ),
    (  # NOT a captured line: a build whose version suffix is not "+cudaX.Y"
        "node-1:178:178 [0] NCCL INFO NCCL version 2.18.5+cuda12.2-custom",
        "nccl_version",
        {"nccl_version": "2.18.5"},
    ),
    # --- torch_watchdog_timeout -------------------------------------------------------------
    (  # PyTorch 1.13 (https://github.com/OFA-Sys/OFA/issues/271)
        "[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 milliseconds "
        "before timing out.",
        "torch_watchdog_timeout",
        {
            "rank": 1,
            "pg": None,
            "seq_num": 469508,
            "op_type": "ALLREDUCE",
            "timeout_ms": 1800000,
            "ran_ms": 1802212,
        },
    ),
    (  # PyTorch 2.5/2.6 (https://github.com/XPixelGroup/BasicSR/issues/737)
        "[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, "
        "Timeout(ms)=600000) ran for 600020 milliseconds before timing out.",
        "torch_watchdog_timeout",
        {"rank": 1, "seq_num": 808, "op_type": "ALLREDUCE", "timeout_ms": 600000, "ran_ms": 600020},
    ),
    (  # _REDUCE_SCATTER_BASE (https://github.com/hiyouga/LlamaFactory/issues/6269)
        "[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, NumelIn=544997376, "
        "NumelOut=68124672, Timeout(ms)=600000) ran for 600061 milliseconds before timing out.",
        "torch_watchdog_timeout",
        {"rank": 0, "seq_num": 7753, "op_type": "_REDUCE_SCATTER_BASE", "ran_ms": 600061},
    ),
    (  # 2.4+: the PG's id and name (https://github.com/XPixelGroup/BasicSR/issues/737)
        "[rank1]:[E626 06:24:44.906457629 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) "
        "Rank 1] Exception (either an error or timeout) detected by watchdog at work: 808, last "
        "enqueued NCCL work: 811, last completed NCCL work: 807.",
        "torch_watchdog_exception",
        {"rank": 1, "pg": 0, "pg_name": "default_pg", "seq_num": 808, "last_completed": 807},
    ),
    (  # https://github.com/modelscope/ms-swift/issues/7992
        "18:11:06.680 [rank4]:[E205 18:11:06.375750231 ProcessGroupNCCL.cpp:1870] [PG ID 12 PG GUID "
        "99(EXPERT_MODEL_PARALLEL_GROUP) Rank 4] ProcessGroupNCCL's watchdog got stuck for 480 seconds "
        "without making progress in monitoring enqueued collectives.",
        "torch_watchdog_stuck",
        {"rank": 4, "pg": 12, "pg_name": "EXPERT_MODEL_PARALLEL_GROUP", "stuck_s": 480},
    ),
    (  # NOT a captured line: PyTorch 1.8's WorkNCCL text (no SeqNum, TensorShape; its source)
        "[E ProcessGroupNCCL.cpp:566] [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(OpType=BROADCAST, TensorShape=[2048, 1024], Timeout(ms)=1800000) ran for 1804406 "
        "milliseconds before timing out.",
        "torch_watchdog_timeout",
        {"rank": 0, "seq_num": None, "op_type": "BROADCAST", "timeout_ms": 1800000},
    ),
    (  # NOT a captured line: PyTorch 1.9-1.11's WorkNCCL text (SeqNum and TensorShape; its source)
        "[E ProcessGroupNCCL.cpp:587] [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=42, OpType=ALLREDUCE, TensorShape=[1], Timeout(ms)=1800000) ran for "
        "1800865 milliseconds before timing out.",
        "torch_watchdog_timeout",
        {"rank": 3, "seq_num": 42, "op_type": "ALLREDUCE", "ran_ms": 1800865},
    ),
    (  # 2.2/2.3 "Timeout at NCCL work" (https://github.com/vllm-project/vllm/issues/6042)
        "(RayWorkerWrapper pid=4009) [rank1]:[E ProcessGroupNCCL.cpp:1537] [PG 1 Rank 1] Timeout at "
        "NCCL work: 158046, last enqueued NCCL work: 158046, last completed NCCL work: 158045.",
        "torch_watchdog_exception",
        {"rank": 1, "pg": 1, "seq_num": 158046, "last_completed": 158045},
    ),
    (  # the PG's tag before the exception's own (https://github.com/sgl-project/sglang/issues/1693)
        "  what():  [PG 3 Rank 5] Process group watchdog thread terminated with exception: [Rank 5] "
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9141, OpType=_ALLGATHER_BASE, "
        "NumelIn=19008, NumelOut=152064, Timeout(ms)=600000) ran for 600020 milliseconds before "
        "timing out.",
        "torch_watchdog_timeout",
        {"rank": 5, "pg": 3, "seq_num": 9141, "op_type": "_ALLGATHER_BASE"},
    ),
    # --- torch_nccl_error -------------------------------------------------------------------
    (  # PyTorch 1.x (https://github.com/pytorch/pytorch/pull/30157)
        "RuntimeError: NCCL error in: /var/lib/jenkins/workspace/torch/lib/c10d/ProcessGroupNCCL.cpp:404, "
        "unhandled system error, NCCL version 2.5.6",
        "torch_nccl_error",
        {"nccl_error": "unhandled system error", "nccl_version": "2.5.6"},
    ),
    (  # PyTorch 2.x (https://github.com/vllm-project/vllm/issues/10523)
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:1333, unhandled system error (run with NCCL_DEBUG=INFO for details), "
        "NCCL version 2.18.1",
        "torch_nccl_error",
        {"nccl_error": "unhandled system error", "nccl_version": "2.18.1"},
    ),
    (  # 2.x: more on the same line (https://github.com/NVIDIA/nccl/issues/1381)
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:1691, unhandled system error (run with NCCL_DEBUG=INFO for details), "
        "NCCL version 2.19.3 ncclSystemError: System call (e.g. socket, malloc) or external library call failed",
        "torch_nccl_error",
        {"nccl_error": "unhandled system error", "nccl_version": "2.19.3"},
    ),
    (  # PyTorch 2.5+: NCCL_DEBUG=WARN in the hint (a public vLLM/FSDP run's log, found through
        # GitHub code search; NCCL 2.28.9)
        "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
        "NCCLUtils.cpp:93, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.28.9",
        "torch_nccl_error",
        {"nccl_error": "invalid usage", "nccl_version": "2.28.9"},
    ),
    (  # the watchdog's exception
        "[E ProcessGroupNCCL.cpp:852] [Rank 16] NCCL watchdog thread terminated with exception: NCCL "
        "error: remote process exited or there was a network error, NCCL version 2.19.3",
        "torch_nccl_error",
        {"rank": 16, "nccl_error": "remote process exited or there was a network error"},
    ),
    # --- xid ----------------------------------------------------------------------------------
    (  # no pid/name (https://github.com/NVIDIA/NVSentinel/issues/155)
        "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus",
        "xid",
        {
            "pci_bus": "0000:44:00",
            "xid": 79,
            "pid": None,
            "process": None,
            "mnemonic": "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS",
            "action": "RESTART_BM",
        },
    ),
    (  # pid, no name (https://github.com/stas00/ml-engineering, debug/hardware-troubleshooting.md)
        "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.",
        "xid",
        {"pci_bus": "0000:10:1c", "xid": 63, "pid": 1896, "process": None},
    ),
    (  # r525 '<unknown>' (public slide deck, tests/fixtures/logs/dmesg-xid-fallen.txt)
        "NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        "xid",
        {
            "pci_bus": "0000:5d:00",
            "xid": 79,
            "pid": None,
            "process": None,
            "message": "GPU has fallen off the bus.",
        },
    ),
    (  # Xid 154 (several public reports, e.g. a GitHub note of an RTX box on driver 580)
        "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)",
        "xid",
        {
            "xid": 154,
            "recovery_action": "Node Reboot Required",
            "action": "RESTART_BM",
            "fatal": True,
        },
    ),
    (  # the format AWS documents for an NVLink Xid 74 (pid=<unknown> unquoted)
        "NVRM: Xid (PCI:0000:b9:00): 74, pid=<unknown>, name=<unknown>, NVLink: fatal error detected on link 6(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)",
        "xid",
        {"pci_bus": "0000:b9:00", "xid": 74, "pid": None, "process": None},
    ),
    (  # NOT a captured line: the driver's " caused by previous Xid %d" suffix on an Xid 45
        "NVRM: Xid (PCI:0000:9b:00): 45, pid=2280636, name=python3, Ch 00000010 caused by previous Xid 149",
        "xid",
        {"xid": 45, "pid": 2280636, "process": "python3", "caused_by_xid": 149},
    ),
    (  # dmesg --ctime, 535/550 (https://github.com/leptonai/gpud/pull/46)
        "[Fri Aug 30 11:43:14 2024] NVRM: Xid (PCI:0000:cb:00): 109, pid=1797828, name=pt_main_thread, "
        "Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005",
        "xid",
        {"pci_bus": "0000:cb:00", "xid": 109, "pid": 1797828, "process": "pt_main_thread"},
    ),
    (  # journal's "kernel:" prefix, 590 (https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1150)
        "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by "
        "previous Xid 149",
        "xid",
        {"pci_bus": "0000:dc:00", "xid": 45, "process": "python3", "caused_by_xid": 149},
    ),
    (  # MIG: a GPU instance and compute instance (NVIDIA's A100 memory error management guide)
        "NVRM: Xid (PCI:0000:01:00 GPU-I:05 GPU-CI:01): 94, pid=7194, name=python3, Contained: CE User Channel (0x9). RST: No, D-RST: No",
        "xid",
        {
            "pci_bus": "0000:01:00",
            "xid": 94,
            "pid": 7194,
            "gpu_instance": 5,
            "compute_instance": 1,
            "mnemonic": "ROBUST_CHANNEL_CONTAINED_ERROR",
            "action": "RESTART_APP",
        },
    ),
    (  # MIG, the GPU instance only (open-gpu-kernel-modules kernel_rc.c's second form)
        "NVRM: Xid (PCI:0000:3b:00 GPU-I:13): 31, pid=3000, name=python, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS",
        "xid",
        {"pci_bus": "0000:3b:00", "xid": 31, "gpu_instance": 13, "compute_instance": None},
    ),
    (  # an Xid NVIDIA's catalog does not list: kept, named, its action unknown
        "NVRM: Xid (PCI:0000:3b:00): 999, pid=1, name=x, something new",
        "xid",
        {"xid": 999, "mnemonic": None, "action": None, "fatal": None},
    ),
    # --- gpu_fallen_off_bus (one line; the three-record form: test below) ------------------
    (
        "NVRM: GPU 0000:5d:00.0: GPU has fallen off the bus.",
        "gpu_fallen_off_bus",
        {"pci_bus": "0000:5d:00", "xid": None},
    ),
    # --- nic_link_state ---------------------------------------------------------------------
    (  # mlx5_ib port events (https://github.com/leptonai/gpud/pull/1209)
        "mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE",
        "nic_link_state",
        {
            "state": "up",
            "device": "0000:ab:00.0",
            "netdev": "mlx5_5",
            "port": 1,
            "port_state": "ACTIVE",
        },
    ),
    (
        "mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link INIT",
        "nic_link_state",
        {"state": "init", "port_state": "INIT"},
    ),
    (  # igc (https://github.com/coolsnowwolf/lede/issues/11302)
        "igc 0000:05:00.0 eth5: NIC Link is Down",
        "nic_link_state",
        {"state": "down", "driver": "igc", "device": "0000:05:00.0", "netdev": "eth5"},
    ),
    (  # NOT a captured line: mlx5e's netdev_info(priv->netdev, "Link down") as the kernel prints it
        "mlx5_core 0000:3b:00.0 ens1f0np0: Link down",
        "nic_link_state",
        {"state": "down", "driver": "mlx5_core", "netdev": "ens1f0np0"},
    ),
    (  # mlx5e, captured (lore.kernel.org Message-ID Z1CVTJ5jzIyNiB1R@x1, kernel 6.13-rc1)
        "[18865.848172] mlx5_core 0000:01:00.0 enp1s0f0np0: Link down",
        "nic_link_state",
        {"state": "down", "driver": "mlx5_core", "device": "0000:01:00.0", "netdev": "enp1s0f0np0"},
    ),
    (  # the same report's ixgbe
        "[18865.729882] ixgbe 0000:05:00.0 enp5s0: NIC Link is Up 10 Gbps, Flow Control: RX/TX",
        "nic_link_state",
        {"state": "up", "driver": "ixgbe", "netdev": "enp5s0"},
    ),
    (  # igb names itself twice (an Ubuntu forum thread's dmesg, found through GitHub code search)
        "[   14.573649] igb 0000:03:00.0 eno1: igb: eno1 NIC Link is Up 1000 Mbps Full Duplex, Flow "
        "Control: RX",
        "nic_link_state",
        {"state": "up", "driver": "igb", "device": "0000:03:00.0", "netdev": "eno1"},
    ),
    (  # r8169's lower case (a dmesg-parsing test's fixture on GitHub, found through code search)
        "[  190.178748] r8169 0000:06:00.0 eth0: link down",
        "nic_link_state",
        {"state": "down", "driver": "r8169", "device": "0000:06:00.0"},
    ),
    (  # dmesg -T and ISO journal prefixes around mlx5e's line (kernel patch and public notes)
        "2026-08-07T09:24:35Z node4 kernel: mlx5_core 0000:01:00.0 enp1s0f0np0: Link down",
        "nic_link_state",
        {"state": "down", "netdev": "enp1s0f0np0"},
    ),
    # --- nic_module_event -------------------------------------------------------------------
    (  # https://github.com/geerlingguy/arm-nas/issues/16
        "mlx5_core 0004:01:00.0: Port module event: module 0, Cable plugged",
        "nic_module_event",
        {"module": 0, "event": "Cable plugged", "device": "0004:01:00.0"},
    ),
    # --- pcie_aer -------------------------------------------------------------------------------
    (  # 4.19+ (https://github.com/GSConnect/gnome-shell-extension-gsconnect/issues/1052)
        "pcieport 0000:00:1c.5: AER: Corrected error received: 0000:00:1c.5",
        "pcie_aer",
        {"severity": "Corrected", "port": "0000:00:1c.5", "source_id": "0000:00:1c.5"},
    ),
    (  # older: id=, no AER: before PCIe Bus Error (https://github.com/endlessm/linux/pull/226)
        "pcieport 0000:00:1c.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, id=00e0(Receiver ID)",
        "pcie_aer",
        {
            "severity": "Corrected",
            "port": "0000:00:1c.0",
            "type": "Physical Layer",
            "agent": "Receiver ID",
            "source_id": "00e0",
        },
    ),
    (  # newer, with AER: (https://github.com/pop-os/pop/issues/751)
        "nvme 0000:03:00.0: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)",
        "pcie_aer",
        {"severity": "Corrected", "port": "0000:03:00.0", "driver": "nvme"},
    ),
    (  # 6.x, the spec's terms (linux-pci "[PATCH v5] PCI/portdev: Disable AER for Titan Ridge")
        "pcieport 0000:00:1c.4: AER: Correctable error message received from 0000:07:00.0",
        "pcie_aer",
        {"severity": "Correctable", "port": "0000:00:1c.4", "source_id": "0000:07:00.0"},
    ),
    (
        "pcieport 0000:07:00.0: PCIe Bus Error: severity=Correctable, type=Data Link Layer, (Receiver ID)",
        "pcie_aer",
        {"severity": "Correctable", "port": "0000:07:00.0", "type": "Data Link Layer"},
    ),
    (  # 6.x Multiple ... (a linux-pci thread quoting dmesg, found through GitHub code search)
        "[  882.456994] pcieport 0000:00:1c.1: AER: Multiple Correctable error message received from "
        "0000:00:1c.1",
        "pcie_aer",
        {"severity": "Correctable", "multiple": True, "source_id": "0000:00:1c.1"},
    ),
    (  # 6.x with no details (a linux-pci patch's changelog, found through GitHub code search)
        "pci 0000:00:01.0: AER: Correctable error message received from 0000:02:00.0 (no details found)",
        "pcie_aer",
        {"severity": "Correctable", "port": "0000:00:01.0", "source_id": "0000:02:00.0"},
    ),
    (  # uncorrected (a kernel mailing-list quote found through GitHub code search)
        "pcieport 0000:00:1d.0: AER: Multiple Uncorrected (Non-Fatal) error received: 0000:00:1d.0",
        "pcie_aer",
        {"severity": "Uncorrected (Non-Fatal)", "multiple": True},
    ),
]


@pytest.mark.parametrize(
    ("line", "kind", "expected"), CASES, ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)]
)
def test_real_lines(line: str, kind: str, expected: dict[str, object]) -> None:
    ev = grammar.Session().match(line, 7)
    assert ev is not None, line
    assert ev.kind == kind
    assert ev.line == 7
    assert {k: ev.fields[k] for k in expected} == expected


NOT_EVENTS = [
    "hostname-test:984:1357 [4] NCCL INFO transport/net.cc:1298 -> 6",
    "c39f5cf046aa:4533:4667 [0] NCCL INFO Using non-device net plugin version 0",
    "c39f5cf046aa:4533:4667 [0] NCCL INFO NET/Socket : Using [0]eth0:172.17.0.3<0>",
    "deepseek-yanfa:195:3198 [7] NCCL INFO Channel 00/0 : 7[7] -> 6[6] via P2P/IPC",
    "node-1:178:828 [0] NCCL INFO comm 0x55555da97ba0 rank 16 nranks 32 cudaDev 0 busId 1b000 - Abort COMPLETE",
    "hostname1:25668:27396 [0] NCCL INFO comm 0x55cc8aa86c70 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 1c000 commId 0x65e0bd6ee7449db4 - Init START",
    "ata1: SATA link down (SStatus 0 SControl 300)",  # https://github.com/ublue-os/bazzite/issues/5094
    "bond0: link status down for interface enp1s0f0, disabling it in 200 ms",  # coreos/bugs#2508
    "pcieport 0000:00:1c.1:   device [8086:8c12] error status/mask=00001000/00002000",
    "pcieport 0000:00:1c.5: AER:   device [8086:9d15] error status/mask=00000001/00002000",
    "NVRM: GPU Board Serial Number: 1653923026510",
    "NVRM: Xid error: xyz, invalid data",
    "pcieport 0000:00:1c.1: AER: found no error details for 0000:00:1c.1",
    "NCCL INFO Channel 00 : 0[0] -> 1[1] via NVL/NET/0",
    "NCCL INFO Ring 00 :    3   7   6   5   4   0   1   2",  # a ring's order, no transport
    "pcieport 0000:00:04.1: pciehp: Slot(0-1): Link Up",  # PCIe hot-plug, not a NIC
    "NVRM:     Reported by libos partition:2#4 kernel v3.1 [0] @ ts:1770232285",
]


@pytest.mark.parametrize("line", NOT_EVENTS)
def test_lines_that_are_no_event(line: str) -> None:
    assert grammar.Session().match(line, 1) is None


def test_fallen_off_the_bus_without_an_xid_spans_three_records() -> None:
    # NVIDIA 570 open module (https://github.com/NVIDIA/NVSentinel/issues/155)
    s = grammar.Session()
    assert s.match("NVRM: The NVIDIA GPU 0000:b3:00.0", 10) is None
    assert s.match("NVRM: (PCI ID: 10de:26b5) installed in this system has", 11) is None
    ev = s.match("NVRM: fallen off the bus and is not responding to commands.", 12)
    assert ev is not None and ev.kind == "gpu_fallen_off_bus"
    assert ev.fields == {"pci_bus": "0000:b3:00", "xid": None}
    assert ev.line == 10  # where the record starts
    # the tail alone, with no GPU named before it, is not an event
    assert (
        grammar.Session().match("NVRM: fallen off the bus and is not responding to commands.", 1)
        is None
    )


@pytest.mark.parametrize(
    "records",
    [
        # older drivers: the PCI ID on the first record, the sentence broken elsewhere (a public
        # note on a GeForce card passed through to a VM, found through GitHub code search)
        [
            "NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:1e07) installed in this",
            "NVRM: system has fallen off the bus and is not responding to commands.",
        ],
        # a confidential-computing guest's console (found through GitHub code search)
        [
            "NVRM: The NVIDIA GPU 0000:01:00.0",
            "NVRM: (PCI ID: 10de:2bb5) installed in this system has",
            "NVRM: fallen off the bus and is not responding to commands.",
        ],
        # the whole sentence on one line, as a journal may hold it
        [
            "NVRM: The NVIDIA GPU 0000:01:00.0 installed in this system has fallen off the bus and "
            "is not responding to commands."
        ],
    ],
)
def test_fallen_off_the_bus_without_an_xid_other_breaks(records: list[str]) -> None:
    s = grammar.Session()
    got = [ev for i, r in enumerate(records, 20) if (ev := s.match(r, i)) is not None]
    assert [(e.kind, e.fields["pci_bus"], e.line) for e in got] == [
        ("gpu_fallen_off_bus", "0000:01:00", 20)
    ]


def test_a_gpu_named_without_the_bus_sentence_is_no_event() -> None:
    # "The NVIDIA GPU ... is not supported" and then, much later, someone else's tail
    s = grammar.Session()
    assert s.match("NVRM: The NVIDIA GPU 0000:02:00.0 (PCI ID: 10de:1b80)", 1) is None
    assert s.match("NVRM: installed in this system is not supported by the", 2) is None
    assert s.match("NVRM: fallen off the bus and is not responding to commands.", 9) is None


def test_every_kind_of_the_table_has_a_real_line() -> None:
    table = {
        "ib_completion_error",
        "nccl_net_selected",
        "nccl_ib_devices",
        "nccl_channel_net",
        "nccl_gdr_disabled",
        "nccl_init_complete",
        "nccl_version",
        "torch_watchdog_timeout",
        "torch_nccl_error",
        "xid",
        "gpu_fallen_off_bus",
        "nic_link_state",
        "nic_module_event",
        "pcie_aer",
    }
    assert table <= {kind for _, kind, _ in CASES}
    assert table <= set(grammar.KINDS)


@pytest.mark.parametrize(
    ("line", "kind", "expected"), CASES, ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)]
)
def test_every_real_line_passes_the_block_screen_of_its_side(
    line: str, kind: str, expected: dict[str, object]
) -> None:
    # the block screen may be coarser than the rules, never miss one of their lines: NCCL's
    # "Got completion" and "GPU Direct RDMA Disabled" lines pass it by their "NET/<transport>"
    kernel = {"xid", "gpu_fallen_off_bus", "nic_link_state", "nic_module_event", "pcie_aer"}
    side = grammar.SCREEN_KERNEL if kind in kernel else grammar.SCREEN_APP
    assert any(lit in line.encode() for lit in side), line


def test_screen_rejects_chatter_and_passes_every_case() -> None:
    assert not grammar.screen("hostname-test:983:1261 [3] NCCL INFO Connected NVLS tree")
    for line, _, _ in CASES:
        assert grammar.screen(line), line


@pytest.mark.parametrize(
    ("status", "name"),
    [
        (0, "IBV_WC_SUCCESS"),
        (5, "IBV_WC_WR_FLUSH_ERR"),
        (12, "IBV_WC_RETRY_EXC_ERR"),
        (13, "IBV_WC_RNR_RETRY_EXC_ERR"),
        (21, "IBV_WC_GENERAL_ERR"),
        (23, "IBV_WC_TM_RNDV_INCOMPLETE"),
        (24, None),
        (-1, None),
    ],
)
def test_ibv_wc_status_names(status: int, name: str | None) -> None:
    assert wc_status_name(status) == name
    assert len(IBV_WC_STATUS) == 24
