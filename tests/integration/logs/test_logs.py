"""The log source end to end: live pod logs into the embedded store across a restart (the
checkpoint, no line lost, none stored twice), and the CLI on real captures (--from ... --output
jsonl, --from ... --dsn), with a clear one-line error for a path that is not there."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from exporters.common.tail import Checkpoints
from exporters.logs.config import LogsConfig
from exporters.logs.source import LogsSource
from tests.cli import ROOT, rs

FIX = Path(__file__).parents[2] / "fixtures" / "logs"
IB12 = (
    "hostname-test:984:1357 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer "
    "172.36.143.59<44206> with status=12 opcode=129 len=65536 vendor err 129 (Recv) localGid "
    "::ffff:29.87.88.182 remoteGids::ffff:29.87.4.221"
)
SOCKET = "c39f5cf046aa:4533:4667 [0] NCCL INFO Using network Socket"
CHATTER = "hostname-test:983:1261 [3] NCCL INFO Connected NVLS tree"


def cri(msg: str, i: int) -> str:
    # recent times: the table's TTL would drop a capture's old ones
    t = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5) + timedelta(seconds=i)
    return f"{t.strftime('%Y-%m-%dT%H:%M:%S')}.123456789Z stdout F {msg}\n"


def store_all(store: Any, src: LogsSource) -> int:
    n = 0
    for b in src.collect():
        store.insert(b.kind, b.table)
        n += b.num_rows
    return n


def test_live_pods_into_the_store_across_a_restart(tmp_path: Path, store: Any) -> None:
    log = tmp_path / "pods" / "team-a_trainer-3_0f1e2d3c" / "pytorch" / "0.log"
    log.parent.mkdir(parents=True)
    log.write_text(cri(CHATTER, 0) + cri(IB12, 1) + cri(CHATTER, 2))

    def make() -> LogsSource:
        cfg = LogsConfig(
            pods_dir=str(tmp_path / "pods"), kmsg="", from_start=True, node_name="gpu-7"
        )
        return LogsSource(cfg, checkpoints=Checkpoints(tmp_path / "state.json"), cluster="c1")

    assert store_all(store, make()) == 1
    with log.open("a") as fh:
        fh.write(cri(SOCKET, 3) + cri(CHATTER, 4))
    log.rename(log.with_name("0.log.20260301-000000"))  # rotated while we were down
    log.write_text(cri(IB12, 5))
    assert store_all(store, make()) == 2  # the restart: only what is new
    got = store.query_rows(
        f"SELECT node, namespace, pod, pod_uid, container, source, kind, line, "
        f"JSONExtractString(fields, 'peer_ip') FROM {store.table('log_event')} ORDER BY ts"
    )
    assert got == [
        (
            "gpu-7",
            "team-a",
            "trainer-3",
            "0f1e2d3c",
            "pytorch",
            "cri",
            "ib_completion_error",
            2,
            "172.36.143.59",
        ),
        ("gpu-7", "team-a", "trainer-3", "0f1e2d3c", "pytorch", "cri", "nccl_net_selected", 4, ""),
        (
            "gpu-7",
            "team-a",
            "trainer-3",
            "0f1e2d3c",
            "pytorch",
            "cri",
            "ib_completion_error",
            1,
            "172.36.143.59",
        ),
    ]


# Every fixture's events as (line, kind): the line where the record starts, 1-based.
EXPECTED = {
    "dmesg-T-xid-550.txt": [(2, "xid"), (3, "xid"), (4, "xid")],
    "dmesg-aer-mlx5.txt": [
        (2, "nic_module_event"),
        (4, "pcie_aer"),
        (5, "pcie_aer"),
        (8, "pcie_aer"),
    ],
    "dmesg-fallen-no-xid.txt": [(1, "gpu_fallen_off_bus")],
    "dmesg-mlx5-link-down.txt": [
        (1, "nic_link_state"),
        (2, "nic_link_state"),
        (3, "nic_link_state"),
    ],
    "dmesg-xid-575-gsp.txt": [(2, "xid")],
    "dmesg-xid-fallen.txt": [(3, "xid"), (4, "gpu_fallen_off_bus")],
    "journal-kernel-xid-590.txt": [(1, "xid"), (2, "xid"), (3, "xid")],
    "journalctl-k-mlx5.txt": [(1, "nic_link_state"), (4, "nic_link_state")],
    "kernel-aer-6x.txt": [(1, "pcie_aer"), (2, "pcie_aer")],
    "nccl-2.1x-ib-error.log": [(3, "torch_nccl_error"), (6, "ib_completion_error")],
    "nccl-2.27-ib-hca.log": [
        (1, "nccl_init_complete"),
        (2, "nccl_channel_net"),
        (3, "nccl_channel_net"),
        (5, "ib_completion_error"),
    ],
    "nccl-2.2x-ib-status.log": [
        (4, "nccl_init_complete"),
        (5, "ib_completion_error"),
        (10, "ib_completion_error"),
    ],
    "nccl-2.30-ib-completion.log": [
        (1, "nccl_version"),
        (2, "nccl_ib_devices"),
        (4, "nccl_net_selected"),
        (6, "nccl_init_complete"),
        (7, "nccl_channel_net"),
        (11, "nccl_warn"),
        (13, "ib_completion_error"),
        (15, "ib_completion_error"),
    ],
    "nccl-channels-versions.log": [
        (1, "nccl_version"),
        (2, "nccl_ib_devices"),
        (3, "nccl_channel_net"),
        (4, "nccl_gdr_disabled"),
        (5, "nccl_channel_net"),
        (6, "nccl_channel_net"),
        (8, "nccl_init_complete"),
        (9, "nccl_version"),
    ],
    "nccl-roce-gdr-disabled.log": [
        (1, "nccl_ib_devices"),
        (3, "nccl_net_selected"),
        (5, "nccl_gdr_disabled"),
        (6, "nccl_gdr_disabled"),
    ],
    "nccl-socket-fallback.log": [(6, "nccl_net_selected")],
    "torch-2.3-watchdog.log": [
        (1, "torch_watchdog_timeout"),
        (2, "torch_watchdog_exception"),
        (4, "torch_watchdog_timeout"),
        (5, "torch_watchdog_timeout"),
    ],
    "torch-watchdog.log": [
        (1, "torch_watchdog_timeout"),
        (2, "torch_watchdog_timeout"),
        (3, "torch_watchdog_exception"),
        (4, "torch_watchdog_exception"),
        (5, "torch_watchdog_stuck"),
        (6, "torch_nccl_error"),
    ],
}

# Issue 45's table: each kind's fields by name, with the types their values may have (None
# where a line need not print it: an NCCL line without its host:pid:tid prefix, `<unknown>`).
INT, STR, OPT_INT, OPT_STR = (int,), (str,), (int, type(None)), (str, type(None))
TABLE: dict[str, dict[str, tuple[type, ...]]] = {
    "ib_completion_error": {
        "host": OPT_STR,
        "pid": OPT_INT,
        "cuda_dev": OPT_INT,
        "peer_ip": OPT_STR,
        "peer_port": OPT_INT,
        "status": INT,
        "status_name": STR,
        "vendor_err": INT,
        "direction": OPT_STR,
        "local_gid": OPT_STR,
        "remote_gid": OPT_STR,
    },
    "nccl_net_selected": {"net": STR},
    "nccl_ib_devices": {"nics": (list,)},
    "nccl_channel_net": {
        "channel": INT,
        "src_rank": INT,
        "dst_rank": INT,
        "net_dev": INT,
        "gdr": (bool,),
        "pxn_proxy": OPT_INT,
    },
    "nccl_gdr_disabled": {"nic": STR},
    "nccl_init_complete": {"rank": INT, "nranks": INT, "comm_id": OPT_STR},
    "nccl_version": {"nccl_version": STR},
    "torch_watchdog_timeout": {
        "rank": INT,
        "pg": OPT_INT,
        "seq_num": INT,
        "op_type": STR,
        "timeout_ms": INT,
        "ran_ms": INT,
    },
    "torch_nccl_error": {"nccl_error": STR},
    "xid": {"pci_bus": STR, "xid": INT, "pid": OPT_INT, "process": OPT_STR},
    "gpu_fallen_off_bus": {"pci_bus": STR},
    "nic_link_state": {"state": STR},
    "nic_module_event": {"module": INT, "event": STR},
    "pcie_aer": {"severity": STR, "port": STR},
}


def test_cli_from_prints_one_flat_json_object_per_event() -> None:
    r = rs("logs", "--from", str(FIX), "--output", "jsonl")
    assert r.returncode == 0, r.stderr
    out = [json.loads(x) for x in r.stdout.splitlines()]
    by_file: dict[str, list[tuple[int, str]]] = {}
    for o in out:
        by_file.setdefault(Path(o["file"]).name, []).append((o["line"], o["kind"]))
    # PROVENANCE.md quotes lines too: a file is read by its content, whatever its name
    by_file.pop("PROVENANCE.md")
    assert by_file == EXPECTED
    # every kind of the table comes from real fixture lines, with its fields by name
    assert set(TABLE) <= {o["kind"] for o in out}
    for o in out:
        for name, types in TABLE.get(o["kind"], {}).items():
            assert name in o, (o["kind"], name, o["excerpt"])
            assert isinstance(o[name], types), (o["kind"], name, o[name], o["excerpt"])
        assert "fields" not in o  # flattened
    nics = [n for o in out if o["kind"] == "nccl_ib_devices" for n in o["nics"]]
    assert nics and all(isinstance(n, str) and n.startswith("mlx5_") for n in nics)
    ib = next(
        o
        for o in out
        if o["kind"] == "ib_completion_error" and o["file"].endswith("nccl-2.2x-ib-status.log")
    )
    assert {
        k: ib[k]
        for k in (
            "peer_ip",
            "peer_port",
            "status_name",
            "vendor_err",
            "direction",
            "host",
            "pid",
            "cuda_dev",
        )
    } == {
        "peer_ip": "172.36.143.59",
        "peer_port": 44206,
        "status_name": "IBV_WC_RETRY_EXC_ERR",
        "vendor_err": 129,
        "direction": "Recv",
        "host": "hostname-test",
        "pid": 984,
        "cuda_dev": 4,
    }
    xid = next(o for o in out if o["kind"] == "xid" and o["file"].endswith("dmesg-xid-fallen.txt"))
    assert (xid["pci_bus"], xid["xid"], xid["pid"], xid["process"], xid["mnemonic"]) == (
        "0000:5d:00",
        79,
        None,
        None,
        "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS",
    )


def test_cli_from_into_the_store_and_a_missing_path(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    shutil.copytree(FIX, cap)  # copied now: their mtimes (the texts' time) are recent
    (cap / "PROVENANCE.md").unlink()
    # journalctl's lines carry their own date (Feb 14): older than log_events' TTL, so the
    # replay is refused in one line naming the table and the flag that keeps it (issue 50) ...
    r = rs("logs", "--from", str(cap), "--dsn", f"chdb://{tmp_path / 'db'}")
    assert r.returncode == 2, r.stderr
    errors = [x for x in r.stderr.splitlines() if x.startswith("railscope: error:")]
    assert len(errors) == 1 and "log_events keeps 30 days" in errors[0], r.stderr
    assert "--keep" in errors[0] and "Traceback" not in r.stderr, r.stderr
    # ... and with --keep every recognised line is stored, those two included
    r = rs("logs", "--from", str(cap), "--dsn", f"chdb://{tmp_path / 'db'}", "--keep")
    assert r.returncode == 0, r.stderr
    code = (
        "import sys; from telemetry.store import Store; s = Store(sys.argv[1]); "
        "print(s.query_rows('SELECT kind, count() FROM ' + s.table('log_event') + "
        "' GROUP BY kind ORDER BY kind'))"
    )
    q = subprocess.run(
        [sys.executable, "-c", code, f"chdb://{tmp_path / 'db'}"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
        check=False,
    )
    got = dict(ast.literal_eval(q.stdout.strip()))
    assert got == {
        "gpu_fallen_off_bus": 2,
        "ib_completion_error": 6,
        "nccl_channel_net": 6,
        "nccl_gdr_disabled": 3,
        "nccl_ib_devices": 3,
        "nccl_init_complete": 4,
        "nccl_net_selected": 3,
        "nccl_version": 3,
        "nccl_warn": 1,
        "nic_link_state": 5,
        "nic_module_event": 1,
        "pcie_aer": 5,
        "torch_nccl_error": 2,
        "torch_watchdog_exception": 3,
        "torch_watchdog_stuck": 1,
        "torch_watchdog_timeout": 5,
        "xid": 8,
    }, q.stderr
    r = rs("logs", "--from", str(tmp_path / "nope"), "--output", "jsonl")
    assert r.returncode == 2
    assert r.stderr.strip() == f"railscope: error: {tmp_path / 'nope'}: no such file or directory"
