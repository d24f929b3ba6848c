"""The `sources.sflow` config section: where to listen, agent and port names, ECMP groups.
Imports pydantic only."""

from __future__ import annotations

from pydantic import Field, field_validator

from telemetry.config import SourceConfig


class SflowConfig(SourceConfig):
    bind: str = Field(default="0.0.0.0:6343", description="UDP address to listen on.")
    agents: dict[str, str] = Field(default_factory=dict, description="agent IP -> switch name")
    ifnames: dict[str, dict[int, str]] = Field(
        default_factory=dict, description="switch (or agent IP) -> ifIndex -> port name"
    )
    allowed_sources: list[str] = Field(
        default_factory=list,
        description="UDP source addresses or CIDRs accepted besides the `agents` keys; with both "
        "empty every source is accepted (a warning says so)",
    )
    require_agent_is_source: bool = Field(
        default=True,
        description="drop a datagram whose sFlow agent address is not its UDP source address "
        "(false: agents behind NAT or sending from another interface)",
    )
    max_agents: int = Field(
        default=4096, gt=0, description="distinct agents kept; datagrams of more are dropped"
    )
    max_buffer_rows: int = Field(default=1_000_000, gt=0, description="rows kept between collects")
    rcvbuf_bytes: int = Field(default=8 << 20, gt=0, description="UDP socket receive buffer")
    workers: int = Field(
        default=1,
        ge=1,
        le=64,
        description="receiver processes sharing the UDP port (SO_REUSEPORT); see docs/sflow.md",
    )
    pcap_port: int = Field(
        default=6343,
        ge=0,
        le=65535,
        description="--from pcap: UDP dest port of sFlow (0 = any)",
    )

    @field_validator("allowed_sources")
    @classmethod
    def _networks(cls, v: list[str]) -> list[str]:
        import ipaddress

        for net in v:
            try:
                ipaddress.ip_network(net, strict=False)
            except ValueError:
                raise ValueError(f"{net!r} is not an address or CIDR") from None
        return v


__all__ = ["SflowConfig"]
