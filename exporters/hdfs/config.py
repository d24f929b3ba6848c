"""The `sources.hdfs` config section: NameNodes/DataNodes to scrape, logs to follow, topology,
placement policy, fsck schedule and DCI budget. Imports pydantic and the pure parsers it
validates with (time zones, DCI rates) only."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from exporters.hdfs import clienttrace, dci
from exporters.hdfs.topology import DEFAULT_UNKNOWN_RACKS
from telemetry.config import SourceConfig


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TlsConfig(_M):
    ca_file: str | None = Field(
        default=None, description="CA bundle that signed the NameNode/DataNode HTTPS certs."
    )
    cert_file: str | None = Field(default=None, description="Client certificate (mutual TLS).")
    key_file: str | None = Field(default=None, description="Key of the client certificate.")
    verify: bool = Field(
        default=True, description="Verify server certificates (never turn off in production)."
    )


class KerberosConfig(_M):
    enabled: bool = Field(
        default=False, description="SPNEGO on /jmx (hadoop.http.authentication.type=kerberos)."
    )
    principal: str | None = Field(
        default=None, description="Client principal; default: the ticket cache's."
    )


class LogConfig(_M):
    path: str = Field(
        description="DataNode log file with clienttrace lines (followed across rotation)."
    )
    datanode: str = Field(
        default="",
        description="host:port of the DataNode writing it (needed for replication lines).",
    )
    from_start: bool = Field(
        default=False, description="Read the existing content on the first cycle."
    )


class PolicyConfig(_M):
    mode: Literal["per_idc", "rack"] = Field(
        default="rack", description="per_idc: N per IDC; rack: HDFS default."
    )
    replicas: int = Field(default=3, ge=1, le=32, description="Replicas every block must have.")
    per_idc: int = Field(default=2, ge=1, le=32, description="Replicas per IDC (per_idc mode).")
    idcs: list[str] = Field(
        default_factory=list, description="IDCs that must hold replicas (default: all known)."
    )
    distinct_racks: bool = Field(
        default=False, description="per_idc: the replicas inside one IDC on distinct racks."
    )


class DciConfig(_M):
    interval_seconds: float = Field(
        default=60.0, ge=1.0, le=86400.0, description="Budget interval."
    )
    capacity: dict[str, Any] = Field(
        default_factory=dict, description="'idc1-idc2: 100Gbit' (each way) or 'a->b'."
    )

    @field_validator("capacity")
    @classmethod
    def _cap(cls, v: dict[str, Any]) -> dict[str, Any]:
        dci.capacities(v)  # ValueError names the bad key/rate
        return v


class HdfsConfig(SourceConfig):
    namenodes: list[str] = Field(
        default_factory=list, description="NameNode HTTP base URLs (http://nn:9870)."
    )
    datanodes: list[str] = Field(
        default_factory=list, description="DataNode base URLs (default: from LiveNodes)."
    )
    discover_datanodes: bool = Field(
        default=True, description="Scrape every DataNode in NameNodeInfo.LiveNodes."
    )
    datanode_scheme: Literal["http", "https"] = "http"
    timeout_seconds: float = Field(
        default=5.0, gt=0, le=300, description="Per-endpoint /jmx timeout."
    )
    concurrency: int = Field(default=32, ge=1, le=1024, description="Scrapes in flight at once.")
    tls: TlsConfig = Field(default_factory=TlsConfig)
    kerberos: KerberosConfig = Field(default_factory=KerberosConfig)
    clienttrace: list[LogConfig] = Field(
        default_factory=list, description="DataNode logs to follow."
    )
    offsets_file: str | None = Field(
        default=None,
        description="Where followed logs were read up to, for a restart "
        "(default: hdfs-clienttrace-offsets.json in sink.spool_dir).",
    )
    log_timezone: str = Field(
        default="UTC", description="Time zone of the log4j timestamps (UTC, +08:00, Asia/Shanghai)."
    )
    topology_file: str | None = Field(
        default=None, description="Table 'HOST /IDC/RACK' (net.topology.table.file.name)."
    )
    topology_script: str | None = Field(
        default=None, description="net.topology.script.file.name: run with hosts."
    )
    unknown_racks: list[str] = Field(default_factory=lambda: list(DEFAULT_UNKNOWN_RACKS))
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    prefix_depth: int = Field(
        default=2, ge=0, le=16, description="Placement totals per path prefix up to this depth."
    )
    fsck_command: list[str] = Field(
        default_factory=list, description="e.g. [hdfs, fsck, /, -files, -blocks, -racks]"
    )
    fsck_every_seconds: float = Field(
        default=3600.0, ge=60.0, description="How often the live source runs fsck."
    )
    dci: DciConfig = Field(default_factory=DciConfig)
    datanode: str = Field(
        default="",
        description="`from:` a log: the DataNode (host:port) that wrote it (for replication lines).",
    )
    hdfs_path: str | None = Field(
        default=None, description="`from:` a WebHDFS block-location document: the file's path."
    )

    @field_validator("log_timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        try:
            clienttrace.local_tz(v)
        except Exception:
            raise ValueError(f"unknown time zone {v!r}") from None
        return v


__all__ = [
    "DciConfig",
    "HdfsConfig",
    "KerberosConfig",
    "LogConfig",
    "PolicyConfig",
    "TlsConfig",
]
