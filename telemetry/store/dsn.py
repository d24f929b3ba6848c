"""Parse and validate store DSNs: `chdb://PATH` (embedded engine) or `http(s)://user:pass@host:port/db`.

Never connects; `telemetry.store.connect` does that. Keeps every check a user can trip on here so
the message is one line naming what is wrong.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit, urlunsplit

from telemetry.errors import ConfigError

DEFAULT_DSN = "chdb://./railscope-data"
DEFAULT_DATABASE = "railscope"


@dataclass(frozen=True)
class Dsn:
    scheme: str  # chdb | http | https
    path: str | None = None  # chdb: absolute directory
    host: str | None = None
    port: int | None = None
    username: str = "default"
    password: str = ""
    database: str = DEFAULT_DATABASE

    @property
    def embedded(self) -> bool:
        return self.scheme == "chdb"

    def redacted(self) -> str:
        if self.embedded:
            return f"chdb://{self.path}"
        return f"{self.scheme}://{self.username}@{self.host}:{self.port}/{self.database}"


# `scheme://user:PASSWORD@` anywhere in a line (DSNs, Redis URLs): the password is masked
_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s'\"]*:)([^@\s'\"]*)(@)")


def redact_dsn(text: str) -> str:
    """`text` with the password of every `scheme://user:pass@` in it replaced by `***`."""
    return _URL_PASSWORD.sub(r"\1***\3", text)


def with_password(text: str, password: str) -> str:
    """The http(s) DSN `text` with `password` in it (from `store.password_file`)."""
    u = urlsplit(text.strip())
    if u.scheme.lower() not in ("http", "https") or not u.hostname:
        raise ConfigError(
            f"store.password_file needs an http(s)://user@host:port/db DSN, not {redact_dsn(text)!r}"
        )
    user = quote(unquote(u.username or "default"), safe="")
    host = u.netloc.rpartition("@")[2]
    return urlunsplit((u.scheme, f"{user}:{quote(password, safe='')}@{host}", u.path, u.query, ""))


def default_dsn() -> str:
    return os.environ.get("RAILSCOPE_DSN") or DEFAULT_DSN


def parse_dsn(text: str | None) -> Dsn:
    text = (text or default_dsn()).strip()
    if "://" not in text:
        raise ConfigError(
            f"store DSN {redact_dsn(text)!r}: expected chdb://PATH or http(s)://user:pass@host:port/db"
        )
    scheme, rest = text.split("://", 1)
    scheme = scheme.lower()
    if scheme == "chdb":
        path_part, _, query = rest.partition("?")
        if not path_part:
            raise ConfigError(
                "store DSN chdb://: a directory path is required (chdb://./railscope-data)"
            )
        db = parse_qs(query).get("database", [DEFAULT_DATABASE])[0]
        return Dsn(
            "chdb", path=str(Path(unquote(path_part)).expanduser().resolve()), database=_db(db)
        )
    if scheme in ("http", "https"):
        u = urlsplit(text)
        if not u.hostname:
            raise ConfigError(f"store DSN {redact_dsn(text)!r}: no host")
        try:
            port = u.port or (8443 if scheme == "https" else 8123)
        except ValueError:
            raise ConfigError(f"store DSN {redact_dsn(text)!r}: port is not a number") from None
        db = u.path.strip("/") or parse_qs(u.query).get("database", [DEFAULT_DATABASE])[0]
        return Dsn(
            scheme,
            host=u.hostname,
            port=port,
            username=unquote(u.username or "default"),
            password=unquote(u.password or ""),
            database=_db(db),
        )
    raise ConfigError(
        f"store DSN {redact_dsn(text)!r}: unknown scheme {scheme!r} (use chdb, http or https)"
    )


def _db(name: str) -> str:
    if not name.replace("_", "").isalnum():
        raise ConfigError(f"store database {name!r}: use letters, digits and _ only")
    return name
