"""Parse and validate store DSNs: `chdb://PATH` (embedded engine) or `http(s)://user:pass@host:port/db`.

TLS options of an https DSN ride in its query string: `?ca_cert=FILE` (trust this CA instead of
the system's), `client_cert=FILE` and `client_key=FILE` (a client certificate), `verify=false`
(do not check the server's certificate: tests only). `store.ca_cert` etc. in the config add them.

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
    ca_cert: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    verify: bool = True

    @property
    def embedded(self) -> bool:
        return self.scheme == "chdb"

    def redacted(self) -> str:
        if self.embedded:
            return f"chdb://{self.path}"
        return f"{self.scheme}://{self.username}@{self.host}:{self.port}/{self.database}"


# `scheme://user:PASSWORD@` anywhere in a line (DSNs, Redis URLs): the password is masked
URL_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s'\"]*:)([^@\s'\"]*)(@)")


def redact_dsn(text: str) -> str:
    """`text` with the password of every `scheme://user:pass@` in it replaced by `***`."""
    return URL_PASSWORD.sub(r"\1***\3", text)


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


TLS_OPTIONS = ("ca_cert", "client_cert", "client_key", "verify")


def with_tls(text: str, options: dict[str, str | bool | None]) -> str:
    """The DSN `text` with TLS `options` (TLS_OPTIONS; None = leave out) in its query string."""
    u = urlsplit(text.strip())
    query = parse_qs(u.query)
    for k, v in options.items():
        if v is not None:
            query[k] = [str(v).lower() if isinstance(v, bool) else str(v)]
    q = "&".join(f"{k}={quote(v[-1], safe='/')}" for k, v in query.items())
    return urlunsplit((u.scheme, u.netloc, u.path, q, ""))


def _tls(text: str, scheme: str, query: dict[str, list[str]]) -> dict[str, str | bool | None]:
    """The TLS options of a DSN's query, checked: https only, files readable, a key with a cert."""
    opts = {k: query[k][-1] for k in TLS_OPTIONS if k in query}
    if not opts:
        return {}
    where = f"store DSN {redact_dsn(text)!r}"
    if scheme != "https":
        raise ConfigError(f"{where}: {', '.join(opts)}: only with an https:// DSN")
    out: dict[str, str | bool | None] = {}
    for k in ("ca_cert", "client_cert", "client_key"):
        if k in opts:
            f = Path(opts[k]).expanduser()
            try:
                f.read_bytes()
            except OSError as e:
                raise ConfigError(f"{where}: {k} {str(f)!r}: {e.strerror or e}") from None
            out[k] = str(f.resolve())
    if ("client_key" in out) != ("client_cert" in out):
        raise ConfigError(f"{where}: client_cert and client_key go together")
    if "verify" in opts:
        v = opts["verify"].lower()
        if v not in ("true", "false", "1", "0"):
            raise ConfigError(f"{where}: verify must be true or false, not {opts['verify']!r}")
        out["verify"] = v in ("true", "1")
    return out


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
            "chdb",
            path=str(Path(unquote(path_part)).expanduser().resolve()),
            database=check_database(db),
        )
    if scheme in ("http", "https"):
        u = urlsplit(text)
        if not u.hostname:
            raise ConfigError(f"store DSN {redact_dsn(text)!r}: no host")
        try:
            port = u.port or (8443 if scheme == "https" else 8123)
        except ValueError:
            raise ConfigError(f"store DSN {redact_dsn(text)!r}: port is not a number") from None
        params = parse_qs(u.query)
        db = u.path.strip("/") or params.get("database", [DEFAULT_DATABASE])[0]
        return Dsn(
            scheme,
            host=u.hostname,
            port=port,
            username=unquote(u.username or "default"),
            password=unquote(u.password or ""),
            database=check_database(db),
            **_tls(text, scheme, params),  # type: ignore[arg-type]
        )
    raise ConfigError(
        f"store DSN {redact_dsn(text)!r}: unknown scheme {scheme!r} (use chdb, http or https)"
    )


def check_database(name: str) -> str:
    """`name` if it is a database name railscope accepts (letters, digits, _), else one line."""
    if not name.replace("_", "").isalnum():
        raise ConfigError(f"store database {name!r}: use letters, digits and _ only")
    return name
