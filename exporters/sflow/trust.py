"""Who may write sFlow: checked on each datagram at the socket (the single-process listener and
every `--workers` receiver), before any decoding. It never decodes more than the datagram header's
agent address, and its per-source and per-agent state is bounded."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("exporters.sflow.source")

# the `reason` label values of a refused datagram
REASONS = ("untrusted_source", "agent_not_source", "too_many_agents")


class Trust:
    """Who may write sFlow, checked at the socket before any decoding: the UDP source must be a
    configured agent (or in `allowed_sources`), the agent address inside the datagram must be that
    source (unless `require_agent_is_source: false`), and at most `max_agents` agents are kept —
    bit-flipped or forged agent addresses cannot grow per-agent state without bound."""

    def __init__(self, cfg: Any) -> None:
        """`cfg`: the sflow section (agents, allowed_sources, require_agent_is_source,
        max_agents)."""
        import ipaddress

        self.exact = {str(ipaddress.ip_address(a)) for a in cfg.agents if _is_ip(a)}
        self.nets = [ipaddress.ip_network(n, strict=False) for n in cfg.allowed_sources]
        self.open = not self.exact and not self.nets
        self.require_agent_is_source = cfg.require_agent_is_source
        self.max_agents = cfg.max_agents
        self.agents: set[str] = set()
        self.allowed: dict[str, bool] = {}  # source address -> verdict (bounded below)
        if self.open:
            log.warning(
                "sflow: neither sources.sflow.agents nor allowed_sources is set: "
                "accepting datagrams from any address, with any agent address"
            )

    def _allowed(self, source: str) -> bool:
        import ipaddress

        ok = self.allowed.get(source)
        if ok is None:
            try:
                ip = ipaddress.ip_address(source)
            except ValueError:
                return False
            if ip.version == 6 and ip.ipv4_mapped is not None:
                ip = ip.ipv4_mapped
            ok = self.open or str(ip) in self.exact or any(ip in n for n in self.nets)
            if len(self.allowed) < 65536:
                self.allowed[source] = ok
        return ok

    def refuse(self, data: bytes, source: str) -> str | None:
        """None to accept, else the reason to drop."""
        if not self._allowed(source):
            return "untrusted_source"
        agent = _agent_address(data)
        if agent is None:
            return None  # not sFlow v5 enough to say: the decoder counts it as malformed
        # an open collector (nothing configured) takes any agent address, still bounded below
        if self.require_agent_is_source and not self.open and agent != _plain(source):
            return "agent_not_source"
        if agent not in self.agents:
            if len(self.agents) >= self.max_agents:
                return "too_many_agents"
            self.agents.add(agent)
        return None


def _is_ip(text: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _plain(source: str) -> str:
    """An IPv4-mapped IPv6 source (a dual-stack socket) as its IPv4 address."""
    return source.removeprefix("::ffff:") if source.startswith("::ffff:") else source


def _agent_address(data: bytes) -> str | None:
    """The agent address of an sFlow v5 datagram header (version, address type, address)."""
    import ipaddress

    if len(data) < 12 or int.from_bytes(data[0:4], "big") != 5:
        return None
    kind = int.from_bytes(data[4:8], "big")
    if kind == 1:
        return str(ipaddress.IPv4Address(data[8:12]))
    if kind == 2 and len(data) >= 24:
        return str(ipaddress.IPv6Address(data[8:24]))
    return None


__all__ = ["REASONS", "Trust"]
