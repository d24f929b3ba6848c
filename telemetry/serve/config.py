"""The `serve` config section: where the ClickHouse HTTP endpoint listens, who may use it, what
each user may ask (limits, `allow`), and what it admits from browsers and the network.

With no users configured the endpoint admits `default` with an empty password (as a fresh
ClickHouse server does), which is why it binds to loopback unless told otherwise; a user without a
real password (none, empty, an empty password_file) is a config error on any other address.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import re
from typing import Annotated, Any

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from telemetry.errors import ConfigError
from telemetry.serve.policy import FEATURES, Limits, allowable, nearest_allowable, setting_rule
from telemetry.text import parse_size

DEFAULT_LISTEN = "127.0.0.1:8123"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _memory() -> int:
    """This machine's memory, for the default per-query memory limits (8 GiB where unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


class UserLimits(BaseModel):
    """A user's limits; each left out takes the default of the user's readonly level
    (`serve.limits` for readonly 0, `serve.readonly_limits` for 1 and 2). 0: no limit."""

    model_config = ConfigDict(extra="forbid")

    max_execution_time: float | None = Field(default=None, ge=0, description="Seconds per query.")
    max_memory_usage: Annotated[
        int | None, BeforeValidator(lambda v: v if v is None else parse_size(v))
    ] = Field(default=None, ge=0, description="Bytes of memory per query.")
    max_result_rows: int | None = Field(default=None, ge=0, description="Rows of a result.")
    max_result_bytes: Annotated[
        int | None, BeforeValidator(lambda v: v if v is None else parse_size(v))
    ] = Field(
        default=None, ge=0, description="Bytes of a result (uncompressed, as the engine counts)."
    )
    max_concurrent_queries: int | None = Field(
        default=None, ge=1, description="This user's queries running at once (over: code 202)."
    )


def _admin_limits() -> UserLimits:
    return UserLimits(
        max_execution_time=3600,
        max_memory_usage=max(1 << 30, _memory() // 2),
        max_result_rows=0,
        max_result_bytes=4 << 30,
        max_concurrent_queries=8,
    )


def _readonly_limits() -> UserLimits:
    return UserLimits(
        max_execution_time=300,
        max_memory_usage=max(512 << 20, min(4 << 30, _memory() // 4)),
        max_result_rows=10_000_000,
        max_result_bytes=1 << 30,
        # a dashboard's panels arrive at once (the largest of railscope's has 14 queries): half
        # run, the rest queue (serve.queue_max_wait) and run as those end
        max_concurrent_queries=8,
    )


class ServeUser(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    password: str | None = Field(
        default=None,
        description="The password (or password_file: a file holding it, read by load_config "
        "like every `<key>_file`; whitespace at its ends is dropped).",
    )
    readonly: int = Field(
        default=0,
        ge=0,
        le=2,
        description="true/1: reads only, writes, DDL and setting changes refused (164); 2: reads "
        "only, and the query's limits and formats may change (Grafana sets max_execution_time).",
    )
    allow: list[str] = Field(
        default_factory=list,
        description="What serve refuses by default and this user may do anyway: table functions, "
        "engines or functions that reach the host or network (file, url, s3, ...), features "
        f"({', '.join(sorted(FEATURES))}) or settings (docs/security.md).",
    )
    limits: UserLimits = Field(default_factory=UserLimits)

    @field_validator("readonly", mode="before")
    @classmethod
    def _readonly(cls, v: Any) -> Any:
        return int(v) if isinstance(v, bool) else v

    @field_validator("allow")
    @classmethod
    def _allow(cls, v: list[str]) -> list[str]:
        bad = [x for x in v if not _NAME.match(x)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a name (a table function, feature or setting)")
        for x in v:
            if setting_rule(x).const:
                raise ValueError(
                    f"{x!r} is a setting no user may change (const in serve's setting rules, "
                    "docs/security.md)"
                )
            if not allowable(x):
                near = nearest_allowable(x)
                hint = f" (did you mean {near!r}?)" if near else ""
                raise ValueError(
                    f"{x!r} is nothing serve refuses by default{hint}: expected a feature "
                    f"({', '.join(sorted(FEATURES))}), a host or network function, table "
                    "function or engine (file, url, s3, ...) or a denied setting "
                    "(docs/security.md)"
                )
        return [x.lower() for x in v]

    def check(self, password: str) -> bool:
        # digests: the same cost whatever the lengths (a password is at most a header long)
        mine = hashlib.sha256((self.password or "").encode("utf-8", "surrogatepass")).digest()
        theirs = hashlib.sha256(password.encode("utf-8", "surrogatepass")).digest()
        return hmac.compare_digest(mine, theirs)

    @property
    def has_password(self) -> bool:
        return bool(self.password and self.password.strip())


class ServeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query_listen: str = Field(
        default=DEFAULT_LISTEN, description="HOST:PORT of the ClickHouse endpoint."
    )
    max_request_bytes: Annotated[int, BeforeValidator(parse_size)] = Field(
        default=256 << 20, ge=1024, description="Largest request body (after decompression)."
    )
    max_buffered_bytes: Annotated[int, BeforeValidator(parse_size)] = Field(
        default=512 << 20,
        ge=1024,
        description="Request bodies held in memory at once, all requests together; a body that "
        "does not fit waits up to 10 s, then is refused (code 241).",
    )
    threads: int = Field(default=8, ge=2, le=256, description="Engine calls running at once.")
    max_connections: int = Field(
        default=1024,
        ge=8,
        description="Open connections, all peers together; capped below the process's file "
        "descriptor limit with room kept for the sinks and spool. At the cap the longest-idle "
        "connection is closed for a new one.",
    )
    max_connections_per_network: int = Field(
        default=256,
        ge=2,
        validation_alias=AliasChoices("max_connections_per_network", "max_connections_per_peer"),
        description="Open connections from one source network: an IPv4 /24, an IPv6 /64, all of "
        "loopback (as above, per network; `max_connections_per_peer` is its old name). Raise it "
        "where many clients share a subnet (the ingest gateway's agents: ingest."
        "max_connections_per_network).",
    )
    queue_max_wait: float = Field(
        default=30.0,
        ge=0,
        le=600,
        description="Seconds a query over its user's max_concurrent_queries waits for one of "
        "that user's own to end before it is refused (code 202), as ClickHouse's "
        "queue_max_wait_ms; a dashboard's panels all at once queue instead of failing.",
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="Origins (scheme://host[:port]) whose browser requests are served; none by "
        "default: a request with any other Origin header is refused (403).",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host header names served besides the listen address, localhost and "
        "127.0.0.1 (DNS rebinding: a Host naming anything else is refused).",
    )
    limits: UserLimits = Field(
        default_factory=_admin_limits, description="Defaults for users with readonly 0."
    )
    readonly_limits: UserLimits = Field(
        default_factory=_readonly_limits, description="Defaults for readonly 1 and 2 users."
    )
    users: list[ServeUser] = Field(default_factory=list)

    @field_validator("users")
    @classmethod
    def _unique(cls, v: list[ServeUser]) -> list[ServeUser]:
        names = [u.name for u in v]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"user {sorted(dup)[0]!r} is listed twice")
        return v

    @model_validator(mode="after")
    def _passwords(self) -> ServeConfig:
        try:
            host, _ = parse_listen(self.query_listen)
        except ConfigError as e:
            raise ValueError(str(e).replace("--query-listen", "query_listen", 1)) from None
        problem = open_listen_problem(self, host)
        if problem:
            raise ValueError(problem)
        return self

    def authenticate(self, name: str, password: str) -> ServeUser | None:
        if not self.users:
            return ServeUser(name="default") if name == "default" and not password else None
        user = next((u for u in self.users if u.name == name), None)
        return user if user is not None and user.check(password) else None

    def user_limits(self, user: ServeUser) -> Limits:
        base = self.readonly_limits if user.readonly else self.limits
        own = user.limits

        def pick(k: str) -> Any:
            v = getattr(own, k)
            return getattr(base, k) if v is None else v

        return Limits(
            max_execution_time=float(pick("max_execution_time") or 0),
            max_memory_usage=int(pick("max_memory_usage") or 0),
            max_result_rows=int(pick("max_result_rows") or 0),
            max_result_bytes=int(pick("max_result_bytes") or 0),
            max_concurrent_queries=int(pick("max_concurrent_queries") or 1),
        )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def open_listen_problem(cfg: ServeConfig, host: str) -> str:
    """Why `cfg` must not listen on `host` ("" where it may): anything but loopback needs users,
    each with a real password."""
    if is_loopback(host):
        return ""
    where = f"serve.query_listen {host}"
    if not cfg.users:
        return (
            f"{where} without serve.users would let anyone who reaches it read and write the "
            "store: configure serve.users (docs/serve.md) or listen on 127.0.0.1"
        )
    weak = [u.name for u in cfg.users if not u.has_password]
    if weak:
        return (
            f"{where}: user {weak[0]!r} has no password (none, empty, whitespace only, or an empty password_file): "
            "anyone who reaches the port would log in as it; give it one or listen on 127.0.0.1"
        )
    return ""


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ConfigError(f"--query-listen {text!r}: expected HOST:PORT (e.g. {DEFAULT_LISTEN})")
    return host.strip("[]") or "127.0.0.1", int(port)
