"""The `sources.switch` config section: which SONiC switches (and ASICs) to poll and how.
Imports pydantic only (config validation must not load the Redis client)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from telemetry.config import SourceConfig


class AsicConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(..., description="ASIC namespace (asic0).")
    address: str = Field(..., description="host:port or unix socket path of this ASIC's redis.")
    counters_db: int | None = Field(default=None, description="COUNTERS_DB id override.")
    appl_db: int | None = Field(default=None, description="APPL_DB id override.")


class GnmiTlsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ca: str | None = Field(default=None, description="PEM file of the CA that signed the switch.")
    cert: str | None = Field(default=None, description="client certificate (PEM) for mTLS")
    key: str | None = Field(default=None, description="client key (PEM) for mTLS")
    server_name: str | None = Field(
        default=None, description="name to verify the switch's certificate against"
    )
    skip_verify: bool = Field(
        default=False,
        description="encrypt but do not verify the switch's certificate (only when set)",
    )


class GnmiConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    address: str = Field(..., description="host:port of the switch's gNMI server (9339, 8080)")
    dialect: Literal["sonic", "openconfig"] = Field(
        default="sonic",
        description="sonic: SONiC telemetry (COUNTERS_DB/APPL_DB paths); openconfig: "
        "openconfig-interfaces/-qos/-lldp (Cumulus/NVUE, Arista EOS, ...)",
    )
    mode: Literal["stream", "poll", "get"] = Field(
        default="stream",
        description="stream (SAMPLE/ON_CHANGE); falls back to poll, then get, when refused",
    )
    openconfig_pfc: bool = Field(
        default=False,
        description="openconfig dialect: also subscribe to per-priority PFC counters at "
        "qos/interfaces/interface/pfc/pfc-priorities (openconfig-qos-ext, Enterprise SONiC's "
        "management framework); off: a switch without that model may refuse the Subscribe",
    )
    origin: str | None = Field(
        default=None,
        description="openconfig dialect: the gNMI origin of every request's prefix (absent: "
        "none, which most targets take as openconfig). SONiC's telemetry service refuses a "
        "Subscribe with neither origin nor target (UNIMPLEMENTED 'Empty target data not "
        "supported', after which railscope falls back to Get); give it origin: openconfig",
    )
    sonic_paths: Literal["whole", "fields"] = Field(
        default="whole",
        description="sonic dialect: whole subscribes COUNTERS/Ethernet* (every counter of every "
        "port, one update); fields subscribes COUNTERS/Ethernet*/<counter> for each port counter "
        "sonic_counters.csv reads (SONiC's virtual path for one counter of all ports): 42 % "
        "fewer bytes, but SONiC sends each path as a message of its own (~50 per switch and "
        "interval), which cost the collector 2-2.8x the CPU at 96 switches (docs/switch-gnmi.md, "
        "Cost). fields falls back to whole for a switch that refuses the field paths (NOT_FOUND "
        "or INVALID_ARGUMENT before any of them answered)",
    )
    tls: GnmiTlsConfig | None = Field(default=None, description="absent: plaintext")
    username: str | None = None
    password: str | None = None
    password_file: str | None = Field(default=None, description="file holding the password")

    @model_validator(mode="after")
    def _origin_is_openconfig_only(self) -> GnmiConfig:
        if self.origin is not None and self.dialect != "openconfig":
            raise ValueError(
                "origin applies to the openconfig dialect only: the sonic dialect's requests "
                "name their database as the target"
            )
        return self


class SnmpConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    address: str = Field(..., description="host[:port] of the switch's SNMP agent (161)")
    version: Literal["2c", "3"] = "2c"
    community: str = Field(default="public", description="v2c community")
    sonic_pfc: bool = Field(
        default=False,
        description="also walk CISCO-PFC-EXT-MIB cpfcIfPriorityTable for PFC frames per "
        "priority, read as SONiC's snmp agent fills it (requests = received, indications = "
        "sent); off for other agents, whose meaning was not verified",
    )
    user: str | None = Field(default=None, description="v3 user (authPriv)")
    auth_key: str | None = None
    priv_key: str | None = None
    auth_protocol: Literal["sha", "sha256", "md5"] = "sha"
    priv_protocol: Literal["aes", "aes256", "des"] = "aes"
    retries: int = Field(default=1, ge=0, le=5)
    max_repetitions: int = Field(default=25, ge=1, le=200, description="GETBULK rows per column")


class SwitchConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    address: str | None = Field(
        default=None, description="host:port or unix socket path of the redis."
    )
    gnmi: GnmiConfig | None = Field(default=None, description="read this switch over gNMI")
    snmp: SnmpConfig | None = Field(default=None, description="read this switch over SNMP")
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


__all__ = [
    "AsicConfig",
    "GnmiConfig",
    "GnmiTlsConfig",
    "SnmpConfig",
    "SwitchConfig",
    "SwitchSourceConfig",
]
