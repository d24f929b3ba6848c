"""Requests from web browsers: a page on any site can make a browser send a GET, a form or a
`text/plain` POST to 127.0.0.1:8123, and a page on a rebound DNS name reaches it as its own
origin. What the headers say decides, before any credential is looked at.

A request is a browser's when it carries `Origin` or a `Sec-Fetch-*` header (ClickHouse clients,
curl and Grafana's send neither). Such a request is served only from an origin in
`serve.allowed_origins` (none by default), or without an Origin and as the user's own navigation
(`Sec-Fetch-Site: none` / `same-origin`) and then never with a form or text/plain body. The Host
header must name the endpoint: an IP address, localhost, this machine, or `serve.allowed_hosts`.
Never reads the body or the credentials.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping

from telemetry.errors import EngineError

# bodies a page can make a browser send without asking the server first (CORS "simple" requests)
SIMPLE_BODIES = frozenset(
    {"application/x-www-form-urlencoded", "multipart/form-data", "text/plain"}
)


class Browsers:
    def __init__(self, allowed_origins: list[str], allowed_hosts: list[str], listen: str) -> None:
        self.origins = {o.rstrip("/").lower() for o in allowed_origins}
        names = {"localhost", socket.gethostname().lower(), socket.getfqdn().lower()}
        if listen and listen not in ("0.0.0.0", "::"):
            names.add(listen.lower())
        self.hosts = names | {h.lower() for h in allowed_hosts}

    def host_ok(self, host: str | None) -> bool:
        if not host:
            return True  # HTTP/1.0: no name to rebind
        name = host.strip().lower()
        if name.startswith("["):
            name = name[1:].split("]", 1)[0]
        elif name.count(":") == 1:
            name = name.rsplit(":", 1)[0]
        try:
            ipaddress.ip_address(name)
            return True  # an address is no DNS name: nothing to rebind
        except ValueError:
            pass
        return name.rstrip(".") in self.hosts

    def check(self, headers: Mapping[str, str], content_type: str) -> str:
        """Refuse (EngineError 497) what a page may not make a browser do; returns the allowed
        Origin to echo in CORS headers ("" when none)."""
        if not self.host_ok(headers.get("Host")):
            raise _refused(
                f"Host {headers.get('Host', '')!r} does not name this endpoint (a rebound DNS "
                "name?): add it to serve.allowed_hosts"
            )
        origin = headers.get("Origin")
        fetch = {k.lower(): v for k, v in headers.items() if k.lower().startswith("sec-fetch-")}
        if origin is None and not fetch:
            return ""  # not a browser
        if origin is not None:
            if origin.rstrip("/").lower() in self.origins:
                return origin
            raise _refused(
                f"requests from web pages are refused: Origin {origin!r} is not in "
                "serve.allowed_origins"
            )
        site = fetch.get("sec-fetch-site", "").lower()
        if site not in ("none", "same-origin"):
            raise _refused(f"requests from web pages are refused (Sec-Fetch-Site: {site or '?'})")
        if content_type in SIMPLE_BODIES:
            raise _refused(f"a browser's {content_type} body is refused")
        return ""


def _refused(why: str) -> EngineError:
    return EngineError(497, f"railscope serve: {why}", "ACCESS_DENIED")


def cors_headers(origin: str) -> dict[str, str]:
    """What an answer to an allowed origin carries (CORS), so its page may read it."""
    return {
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Allow-Credentials": "true",
        "Access-Control-Allow-Headers": "Authorization, Content-Type, X-ClickHouse-User, "
        "X-ClickHouse-Key, X-ClickHouse-Format, X-ClickHouse-Database",
        "Access-Control-Expose-Headers": "X-ClickHouse-Summary, X-ClickHouse-Format, "
        "X-ClickHouse-Query-Id, X-ClickHouse-Exception-Code, X-ClickHouse-Timezone",
        "Vary": "Origin",
    }
