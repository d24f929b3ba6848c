"""The `sources.nccl` config section: where NCCL Inspector writes its dumps, where reading
stopped, and the host's proc root for attribution. Imports pydantic only."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from telemetry.config import SourceConfig


class NcclConfig(SourceConfig):
    dump_dir: str | None = Field(
        default=None,
        description="NCCL_INSPECTOR_DUMP_DIR as mounted on this node: JSON files are followed, "
        "Prom textfiles (*.prom) read each interval; subdirectories included.",
    )
    format: Literal["auto", "json", "prom"] = Field(
        default="auto",
        description="auto: each file by its content; json / prom: only that format is read.",
    )
    from_start: bool = Field(
        default=True,
        description="Read files found at the first start from their beginning (without an "
        "offsets file); files that appear later are always read from the start.",
    )
    offsets_file: str | None = Field(
        default=None,
        description="Where followed files were read up to, for a restart "
        "(default: nccl-inspector-offsets.json in sink.spool_dir).",
    )
    proc_root: str = Field(
        default="/proc",
        description="The host's /proc (/host/proc in the DaemonSet): /proc/PID/cgroup gives the "
        "pod of each rank's process.",
    )
    node_name: str | None = Field(
        default=None,
        description="This node's name (default: $NODE_NAME, else the hostname). Rows whose "
        "hostname is this node are attributed by pid; others by pod name = hostname.",
    )


__all__ = ["NcclConfig"]
