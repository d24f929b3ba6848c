"""The `sources.switch` config section: which SONiC switches (and ASICs) to poll and how.
Imports pydantic only (config validation must not load the Redis client)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from telemetry.config import SourceConfig


class AsicConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(..., description="ASIC namespace (asic0).")
    address: str = Field(..., description="host:port or unix socket path of this ASIC's redis.")
    counters_db: int | None = Field(default=None, description="COUNTERS_DB id override.")
    appl_db: int | None = Field(default=None, description="APPL_DB id override.")


class SwitchConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    address: str | None = Field(
        default=None, description="host:port or unix socket path of the redis."
    )
    role: str = Field(default="", description="leaf | spine | superspine | dci")
    counters_db: int | None = None
    appl_db: int | None = None
    password: str | None = None
    asics: list[AsicConfig] = Field(default_factory=list, description="multi-ASIC: one per ASIC")


class SwitchSourceConfig(SourceConfig):
    switches: list[SwitchConfig] = Field(default_factory=list)
    database_config: str | None = Field(
        default=None, description="SONiC database_config.json for db ids"
    )
    timeout_seconds: float = Field(default=2.0, gt=0, description="per-switch Redis timeout")
    workers: int = Field(default=32, ge=1, le=512, description="switches polled at once")
    ecmp_groups: dict[str, dict[str, list[str]]] = Field(
        default_factory=dict, description="switch -> group -> member ports"
    )
    uplink_neighbor: str | None = Field(
        default=None,
        description="regex on LLDP neighbour names: matching ports form group 'uplinks'",
    )
    lldp: bool = Field(default=True, description="read LLDP_ENTRY_TABLE from APPL_DB")
    dump_name: str | None = Field(
        default=None, description="switch name of a single `from:` dump file (default: its stem)"
    )


__all__ = ["AsicConfig", "SwitchConfig", "SwitchSourceConfig"]
