"""The `serve` config section: where the ClickHouse HTTP endpoint listens, its size limit and users.

With no users configured the endpoint admits `default` with an empty password (as a fresh
ClickHouse server does), which is why it binds to loopback unless told otherwise.
"""

from __future__ import annotations

import hmac
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from telemetry.errors import ConfigError
from telemetry.text import parse_size

DEFAULT_LISTEN = "127.0.0.1:8123"


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
        "only but settings may change (Grafana sets max_execution_time).",
    )

    @field_validator("readonly", mode="before")
    @classmethod
    def _readonly(cls, v: Any) -> Any:
        return int(v) if isinstance(v, bool) else v

    def check(self, password: str) -> bool:
        return hmac.compare_digest((self.password or "").encode(), password.encode())


class ServeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query_listen: str = Field(
        default=DEFAULT_LISTEN, description="HOST:PORT of the ClickHouse endpoint."
    )
    max_request_bytes: Annotated[int, BeforeValidator(parse_size)] = Field(
        default=256 << 20, ge=1024, description="Largest request body (after decompression)."
    )
    threads: int = Field(default=8, ge=1, le=256, description="Engine calls running at once.")
    users: list[ServeUser] = Field(default_factory=list)

    @field_validator("users")
    @classmethod
    def _unique(cls, v: list[ServeUser]) -> list[ServeUser]:
        names = [u.name for u in v]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"user {sorted(dup)[0]!r} is listed twice")
        return v

    def authenticate(self, name: str, password: str) -> ServeUser | None:
        if not self.users:
            return ServeUser(name="default") if name == "default" and not password else None
        user = next((u for u in self.users if u.name == name), None)
        return user if user is not None and user.check(password) else None


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ConfigError(f"--query-listen {text!r}: expected HOST:PORT (e.g. {DEFAULT_LISTEN})")
    return host.strip("[]") or "127.0.0.1", int(port)
