"""The `sources.logs` config section: which logs to follow (pod CRI logs, the kernel log), where
reading stopped, and the bounds (per-pod rate, line length, excerpt). Imports pydantic only."""

from __future__ import annotations

from pydantic import Field

from telemetry.config import SourceConfig


class LogsConfig(SourceConfig):
    pods_dir: str = Field(
        default="/var/log/pods",
        description="The kubelet's pod log directory: <namespace>_<pod>_<uid>/<container>/N.log "
        "(CRI format) are followed; '' follows no pod logs.",
    )
    kmsg: str = Field(
        default="/dev/kmsg",
        description="The kernel log device; '' reads no kernel log.",
    )
    proc_root: str = Field(
        default="/proc",
        description="The host's /proc: stat's btime turns kernel timestamps into wall time.",
    )
    state_file: str | None = Field(
        default=None,
        description="Checkpoint of read offsets per file (by device and inode) and of the kernel "
        "log's sequence, for restarts (default: logs-checkpoints.json in sink.spool_dir).",
    )
    node_name: str | None = Field(
        default=None,
        description="This node's name (default: $NODE_NAME, else the hostname; with --from: '').",
    )
    from_start: bool = Field(
        default=False,
        description="At the first start (no checkpoint), read existing pod logs from their "
        "beginning instead of their end.",
    )
    rate_lines_per_second: float = Field(
        default=5000.0,
        gt=0,
        description="Lines per second each pod may have read (token bucket refill): lines past "
        "it are dropped and counted (rate_limited), so one pod cannot starve the others.",
    )
    rate_burst_lines: int = Field(
        default=50000,
        ge=1,
        description="Token bucket size per pod: the most lines one pod may have read at once.",
    )
    max_read_bytes_per_cycle: int = Field(
        default=16 * 1024 * 1024,
        ge=1024 * 1024,
        description="Bytes of pod logs read in one cycle, all files together (memory stays "
        "bounded); what is left is read in the next cycles, each starting at another file.",
    )
    max_line_bytes: int = Field(
        default=65536,
        ge=1024,
        le=16 * 1024 * 1024,
        description="A longer line is skipped and counted (line_too_long).",
    )
    excerpt_chars: int = Field(
        default=512,
        ge=64,
        le=4096,
        description="Characters of a matched line kept as its excerpt (after redaction).",
    )


__all__ = ["LogsConfig"]
