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


def test_cli_from_prints_one_flat_json_object_per_event() -> None:
    r = rs("logs", "--from", str(FIX), "--output", "jsonl")
    assert r.returncode == 0, r.stderr
    out = [json.loads(x) for x in r.stdout.splitlines()]
    by_file: dict[str, list[tuple[int, str]]] = {}
    for o in out:
        by_file.setdefault(Path(o["file"]).name, []).append((o["line"], o["kind"]))
    assert by_file["dmesg-xid-fallen.txt"] == [(3, "xid"), (4, "gpu_fallen_off_bus")]
    assert by_file["dmesg-fallen-no-xid.txt"] == [(1, "gpu_fallen_off_bus")]
    assert by_file["nccl-socket-fallback.log"] == [(6, "nccl_net_selected")]
    assert by_file["journalctl-k-mlx5.txt"] == [(1, "nic_link_state"), (4, "nic_link_state")]
    # PROVENANCE.md quotes lines too: a file is read by its content, whatever its name
    assert sum(len(v) for k, v in by_file.items() if k != "PROVENANCE.md") == 25
    ib = next(o for o in out if o["kind"] == "ib_completion_error" and o["status"] == 12)
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
    assert "fields" not in ib  # flattened
    xid = next(o for o in out if o["kind"] == "xid")
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
        "ib_completion_error": 3,
        "nccl_gdr_disabled": 2,
        "nccl_ib_devices": 1,
        "nccl_init_complete": 1,
        "nccl_net_selected": 2,
        "nic_link_state": 2,
        "nic_module_event": 1,
        "pcie_aer": 3,
        "torch_nccl_error": 2,
        "torch_watchdog_exception": 2,
        "torch_watchdog_stuck": 1,
        "torch_watchdog_timeout": 2,
        "xid": 1,
    }, q.stderr
    r = rs("logs", "--from", str(tmp_path / "nope"), "--output", "jsonl")
    assert r.returncode == 2
    assert r.stderr.strip() == f"railscope: error: {tmp_path / 'nope'}: no such file or directory"
