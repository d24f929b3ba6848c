"""Configuration: one YAML file, then environment variables, then CLI flags (highest wins).

Everything is validated up front; an error names the key (`store.batch_rows: ...`). Each source's
section `sources.<name>` is validated by the model `telemetry.catalog` names for it (a subclass of
`SourceConfig`), so adding a source never edits this file and no exporter must be imported first.

Environment: RAILSCOPE_CONFIG (file), RAILSCOPE_DSN (store.dsn; or RAILSCOPE_DSN_FILE, a file holding
it), RAILSCOPE_CLUSTER (cluster), and
RAILSCOPE__<SECTION>__<KEY>=value for any key (value parsed as YAML), e.g. RAILSCOPE__SINK__BATCH_ROWS=5000.
"""

from __future__ import annotations

import os
import ssl
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from telemetry.catalog import SOURCES
from telemetry.errors import ConfigError
from telemetry.ingest.config import IngestConfig
from telemetry.records import KINDS
from telemetry.serve.config import ServeConfig
from telemetry.text import parse_size
from telemetry.tls import server_context


def _spool_size(v: Any) -> int:
    n = parse_size(v)
    if n < 1 << 20:
        raise ValueError("must be at least 1MiB")
    return n


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class SourceConfig(_Model):
    """What every `sources.<name>` section accepts besides the source's own keys."""

    model_config = ConfigDict(extra="forbid", validate_default=True, populate_by_name=True)
    enabled: bool = Field(default=False, description="Run this source in `railscope serve`.")
    from_path: str | None = Field(
        default=None,
        alias="from",
        description="A capture in the source's real format to replay (same as --from).",
    )
    interval_seconds: float | None = Field(
        default=None,
        ge=1.0,
        le=3600.0,
        description="Collection interval (default: the global one).",
    )


class StoreConfig(_Model):
    dsn: str = Field(
        default_factory=lambda: os.environ.get("RAILSCOPE_DSN") or "chdb://./railscope-data",
        description="chdb://PATH (embedded) or http(s)://user:pass@host:port/db",
    )
    database: str | None = Field(
        None, description="Database; default from the DSN, else 'railscope'."
    )
    cluster: str | None = Field(
        None, description="ClickHouse cluster name: Replicated + Distributed DDL."
    )
    ttl_days: dict[str, int | None] = Field(
        default_factory=dict,
        description="TTL per table in days (null = none); a rollup (e.g. job_port_intervals) "
        "keeps its source's unless named here itself.",
    )
    ca_cert: str | None = Field(
        None, description="https DSN: trust this CA file (PEM) instead of the system's."
    )
    client_cert: str | None = Field(None, description="https DSN: client certificate (PEM).")
    client_key: str | None = Field(None, description="https DSN: its private key (PEM).")
    verify: bool = Field(
        True, description="https DSN: check the server's certificate (false: tests only)."
    )

    @field_validator("database")
    @classmethod
    def _database(cls, v: str | None) -> str | None:
        from telemetry.store.dsn import check_database

        try:
            return None if v is None else check_database(v)
        except ConfigError as e:
            raise ValueError(str(e)) from None

    @model_validator(mode="after")
    def _tls(self) -> StoreConfig:
        """TLS options join the DSN's query (one place the store reads them), checked now:
        https only, files readable, a key with its certificate."""
        from telemetry.store.dsn import parse_dsn, with_tls

        tls: dict[str, str | bool | None] = {
            "ca_cert": self.ca_cert,
            "client_cert": self.client_cert,
            "client_key": self.client_key,
            "verify": None if self.verify else False,
        }
        if any(v is not None for v in tls.values()):
            self.dsn = with_tls(self.dsn, tls)
            try:
                parse_dsn(self.dsn)
            except ConfigError as e:
                raise ValueError(str(e)) from None
        return self

    @field_validator("dsn")
    @classmethod
    def _dsn(cls, v: str) -> str:
        from telemetry.store.dsn import parse_dsn

        try:
            parse_dsn(v)
        except ConfigError as e:
            raise ValueError(str(e)) from None
        return v

    @field_validator("ttl_days")
    @classmethod
    def _ttl(cls, v: dict[str, int | None]) -> dict[str, int | None]:
        # a kind's table, or a per-interval rollup (which otherwise keeps what its source keeps)
        from telemetry.store.rollups import TABLES

        tables = {k.table for k in KINDS.values()} | TABLES
        for t, days in v.items():
            if t not in tables:
                raise ValueError(f"unknown table {t!r} (tables: {', '.join(sorted(tables))})")
            if days is not None and days <= 0:
                raise ValueError(f"{t}: TTL must be a positive number of days or null")
        return v


class SinkConfig(_Model):
    batch_rows: int = Field(100_000, gt=0, description="Seal a batch at this many rows.")
    batch_seconds: float = Field(
        5.0,
        ge=0,
        description="...or when its oldest row is this old; 0: at every collection cycle (agents "
        "behind `railscope ingest`, which merges their batches).",
    )
    spool_dir: str = Field("./railscope-spool", description="Write-ahead spool directory.")
    spool_max_bytes: Annotated[int, BeforeValidator(_spool_size)] = Field(
        1 << 30, description="Spool size limit (e.g. 2GiB); oldest dropped past it."
    )
    retry_initial_seconds: float = Field(0.5, gt=0)
    retry_max_seconds: float = Field(30.0, gt=0)
    replay_batches_per_cycle: int = Field(
        16,
        gt=0,
        description="Spooled batches replayed per cycle: a backlog never stalls collection.",
    )
    shutdown_grace_seconds: float = Field(
        20.0,
        gt=0,
        le=300,
        description="On SIGTERM/SIGINT: time to flush to the store or the spool before exiting "
        "(keep it below the pod's terminationGracePeriodSeconds, 30 s by default).",
    )


class PrometheusConfig(_Model):
    enabled: bool = True
    listen: str = Field("0.0.0.0:9580", description="host:port for /metrics.")
    tls_cert_file: str | None = Field(
        None, description="Serve /metrics and /healthz over HTTPS with this certificate (PEM)."
    )
    tls_key_file: str | None = Field(None, description="...and this private key (PEM).")
    bearer_token: str | None = Field(
        None,
        description="Require `Authorization: Bearer <token>` on /metrics (not /healthz, which "
        "the kubelet probes); bearer_token_file: read it from a file.",
    )

    @model_validator(mode="after")
    def _tls_files(self) -> PrometheusConfig:
        self.ssl_context()  # unreadable or mismatched files: one line now, not at start
        return self

    def ssl_context(self) -> ssl.SSLContext | None:
        """The server TLS context for /metrics (None: plain HTTP)."""
        return server_context(self.tls_cert_file, self.tls_key_file)

    def server_options(self) -> dict[str, Any]:
        """What PrometheusSink.serve takes besides the address: TLS and the bearer token."""
        return {"tls": self.ssl_context(), "bearer_token": self.bearer_token}

    @field_validator("listen")
    @classmethod
    def _listen(cls, v: str) -> str:
        host, _, port = v.rpartition(":")
        if not host or not port.isdigit() or not 0 <= int(port) < 65536:
            raise ValueError(f"expected host:port, got {v!r}")
        return v


class OtlpConfig(_Model):
    enabled: bool = False
    endpoint: str | None = None
    interval_seconds: float = Field(10.0, gt=0)


class CorrelateConfig(_Model):
    thresholds: dict[str, Any] = Field(
        default_factory=dict,
        description="Overrides of telemetry/correlate/thresholds.yaml (same keys).",
    )

    @field_validator("thresholds")
    @classmethod
    def _known(cls, v: dict[str, Any]) -> dict[str, Any]:
        from telemetry.correlate.thresholds import check_thresholds

        try:
            check_thresholds(v)
        except ConfigError as e:
            raise ValueError(str(e)) from None
        return v


class AlertmanagerConfig(_Model):
    """`alertmanager:` where `correlate --follow` and `serve` post incidents (Alertmanager v2
    API; telemetry/correlate/alertmanager.py, docs/incidents.md)."""

    enabled: bool = False
    url: str | None = Field(None, description="http(s)://host:port of Alertmanager.")
    timeout_seconds: float = Field(5.0, gt=0)
    resend_seconds: float = Field(
        60.0, gt=0, description="Re-post open incidents this often (below its resolve_timeout)."
    )
    retry_initial_seconds: float = Field(1.0, gt=0)
    retry_max_seconds: float = Field(60.0, gt=0)
    min_severity: Literal["critical", "warning", "info"] = "warning"
    team: str = Field("railscope", description="`team` label when no tenant receiver applies.")
    receivers: dict[str, str] = Field(
        default_factory=dict,
        description="tenant -> `team` label: each tenant's incidents route to its own receiver.",
    )
    runbook_url: str = Field(
        "{runbook}",
        description="Template: {runbook} (the root kind's section of the runbooks page, "
        "docs/runbooks.md#KIND; prefix it with where the docs are served) {kind} {id}.",
    )
    report_url: str | None = Field(
        None, description="Template for the report link: {id} {kind} {subject} {cluster}."
    )

    @model_validator(mode="after")
    def _check(self) -> AlertmanagerConfig:
        from urllib.parse import urlsplit

        if self.enabled and not self.url:
            raise ValueError("url: required when enabled")
        if self.url:
            u = urlsplit(self.url)
            if u.scheme not in ("http", "https") or not u.hostname:
                raise ValueError(f"url: expected http(s)://host:port, got {self.url!r}")
        for key in ("runbook_url", "report_url"):
            tmpl = getattr(self, key)
            try:
                (tmpl or "").format(id="i", kind="k", subject="s", cluster="c", runbook="r")
            except (KeyError, IndexError, ValueError) as e:
                raise ValueError(f"{key}: bad template {tmpl!r} ({e})") from None
        return self


class Config(_Model):
    cluster: str = Field(
        default_factory=lambda: os.environ.get("RAILSCOPE_CLUSTER", "default"),
        description="Cluster name stamped on every record.",
    )
    interval_seconds: float = Field(
        10.0, ge=1.0, le=3600.0, description="Collection interval of live sources."
    )
    store: StoreConfig = Field(default_factory=StoreConfig)  # type: ignore[arg-type]
    sink: SinkConfig = Field(default_factory=SinkConfig)  # type: ignore[arg-type]
    prometheus: PrometheusConfig = Field(default_factory=PrometheusConfig)  # type: ignore[arg-type]
    otlp: OtlpConfig = Field(default_factory=OtlpConfig)  # type: ignore[arg-type]
    correlate: CorrelateConfig = Field(default_factory=CorrelateConfig)  # type: ignore[arg-type]
    alertmanager: AlertmanagerConfig = Field(default_factory=AlertmanagerConfig)  # type: ignore[arg-type]
    serve: ServeConfig = Field(
        default_factory=ServeConfig,
        description="`railscope serve`: query endpoint and its users (telemetry/serve/config.py).",
    )
    ingest: IngestConfig = Field(
        default_factory=IngestConfig,  # type: ignore[arg-type]
        description="`railscope ingest`: the insert gateway (telemetry/ingest/config.py).",
    )
    sources: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per-source sections."
    )

    def source(self, name: str) -> Any:
        """The validated section of one source (its config model), defaults if absent."""
        if name not in SOURCES:
            raise ConfigError(
                f"sources.{name}: unknown source (known: {', '.join(sorted(SOURCES))})"
            )
        model = SOURCES[name].config_model()
        try:
            return model.model_validate(self.sources.get(name) or {})
        except ValidationError as e:
            raise ConfigError(format_validation_error(e, prefix=f"sources.{name}")) from None


def format_validation_error(e: ValidationError, prefix: str = "", source: str = "config") -> str:
    """One line naming the keys that failed: `config: sources.hdfs.replicas: ...`."""
    parts = []
    for err in e.errors()[:3]:
        key = ".".join(str(p) for p in (prefix, *err["loc"]) if p != "")
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{key}: {msg}")
    more = f" (+{len(e.errors()) - 3} more)" if len(e.errors()) > 3 else ""
    return f"{source}: " + "; ".join(parts) + more


def _deep_set(d: dict[str, Any], path: list[str], value: Any) -> None:
    for p in path[:-1]:
        nxt = d.setdefault(p, {})
        if not isinstance(nxt, dict):
            raise ConfigError(f"environment: {'.'.join(path)}: {p} is not a section")
        d = nxt
    d[path[-1]] = value


def _env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if env.get("RAILSCOPE_DSN"):
        _deep_set(out, ["store", "dsn"], env["RAILSCOPE_DSN"])
    elif env.get("RAILSCOPE_DSN_FILE"):  # a DSN mounted from a Kubernetes Secret
        _deep_set(
            out, ["store", "dsn"], _read_secret(env["RAILSCOPE_DSN_FILE"], "RAILSCOPE_DSN_FILE")
        )
    if env.get("RAILSCOPE_CLUSTER"):
        out["cluster"] = env["RAILSCOPE_CLUSTER"]
    for k, v in env.items():
        if k.startswith("RAILSCOPE__"):
            path = [p.lower() for p in k[len("RAILSCOPE__") :].split("__") if p]
            if path:
                _deep_set(out, path, parse_yaml(v, f"environment {k}") if v else v)
    return out


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def read_yaml(p: Path, source: str) -> Any:
    """The YAML document in file `p`. Every error is one ConfigError line starting with `source`
    (`config FILE`, `scenario FILE`, ...), with the line number where YAML knows it."""
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise ConfigError(f"{source}: no such file") from None
    except OSError as e:
        raise ConfigError(f"{source}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{source}: not UTF-8 text (byte {e.start})") from None
    return parse_yaml(text, source)


# libyaml's safe loader when PyYAML was built with it: the same documents, ~10x faster than the
# pure-Python one (a 2 KB scenario: ~0.15 ms instead of ~1.5 ms)
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_yaml(text: str, source: str) -> Any:
    """The YAML document in `text`; every error is one ConfigError line starting with `source`."""
    try:
        doc = yaml.load(text, Loader=_SAFE_LOADER)
    except RecursionError:  # PyYAML's parser recurses once per level of nesting
        raise ConfigError(f"{source}: not valid YAML: nested too deeply") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f": line {mark.line + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]  # ReaderError has none
        raise ConfigError(f"{source}{where}: not valid YAML: {problem}") from None
    except (ValueError, OverflowError) as e:
        # a scalar the resolver types but its constructor cannot build: `0b_` (an int with no
        # digits), `2001-13-45` (a timestamp with month 13)
        detail = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ConfigError(
            f"{source}: not valid YAML: a value PyYAML cannot read ({detail})"
        ) from None
    check_depth(doc, source)
    return doc


MAX_DEPTH = 64  # no railscope document nests deeper; a YAML anchor that holds itself is infinite


def check_depth(doc: Any, source: str) -> None:
    """ConfigError when `doc` nests lists/mappings deeper than MAX_DEPTH (or holds itself,
    `a: &x [*x]`): every walk over it (secrets, merges, validation) recurses once per level."""
    stack = [(doc, 0)]  # depth first: a self-referring anchor reaches the limit in 64 steps
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth >= MAX_DEPTH:
                raise ConfigError(
                    f"{source}: nested deeper than {MAX_DEPTH} levels (or an anchor holds itself)"
                )
            for v in node.values() if isinstance(node, dict) else node:
                if isinstance(v, dict | list):
                    stack.append((v, depth + 1))


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """File (or $RAILSCOPE_CONFIG), then env, then `overrides` (from CLI flags)."""
    env = os.environ if env is None else env
    path = path or env.get("RAILSCOPE_CONFIG") or None
    if not path:
        return config_from_document(None, "config", env=env, overrides=overrides)
    source = f"config {Path(path)}"
    return config_from_document(read_yaml(Path(path), source), source, env=env, overrides=overrides)


def config_from_document(
    loaded: Any,
    source: str,
    *,
    env: Mapping[str, str],
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """The config from a parsed YAML document (None: no file), then env, then `overrides`. Every
    error is one ConfigError line starting with `source`."""
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{source}: the top level must be a mapping, not {type(loaded).__name__}")
    check_depth(loaded, source)
    data: dict[str, Any] = loaded
    data = _merge(data, _env_overrides(env))
    data = _merge(data, {k: v for k, v in (overrides or {}).items() if v is not None})
    _resolve_secret_files(data)
    store = data.get("store")
    if isinstance(store, dict) and store.get("password") is not None:
        from telemetry.store.dsn import default_dsn, with_password

        pw = str(store.pop("password"))
        store["dsn"] = with_password(str(store.get("dsn") or default_dsn()), pw)
    _remember_secrets(data)
    try:
        cfg = Config.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, source=source)) from None
    # validate the sections of known sources now, not when the source starts
    for name, raw in cfg.sources.items():
        if name not in SOURCES:
            raise ConfigError(
                f"{source}: sources.{name}: unknown source (known: {', '.join(sorted(SOURCES))})"
            )
        try:
            SOURCES[name].config_model().model_validate(raw or {})
        except ValidationError as e:
            raise ConfigError(
                format_validation_error(e, prefix=f"sources.{name}", source=source)
            ) from None
    return cfg


# --- secrets ---------------------------------------------------------------------------------
# Keys whose values are secrets, in any section: `config show` prints them as ***, every log line
# and error message has their values masked, and each can be given as `<key>_file:` instead — a
# file mounted from a Kubernetes Secret (whitespace at its ends is dropped). A DSN's password is a
# secret too (`store.dsn_file`, `store.password_file`, $RAILSCOPE_DSN_FILE).
SECRET_KEYS = frozenset(
    {
        "password",  # Redis (SONiC), serve users, gNMI, Alertmanager basic auth
        "token",
        "bearer_token",
        "community",  # SNMP v1/v2c
        "auth_key",  # SNMP v3
        "priv_key",
        "auth_password",
        "priv_password",
        "secret",
        "api_key",
    }
)
_MASK = "***"
_SECRET_VALUES: set[str] = set()  # every secret value loaded in this process, for the log filter


def _read_secret(path: Any, key: str) -> str:
    if not isinstance(path, str) or not path or "\0" in path:
        raise ConfigError(f"{key}: {_short(path)} is not a file path")
    try:
        return Path(path).expanduser().read_text().strip()
    except OSError as e:
        raise ConfigError(f"{key}: cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{key}: {path} is not UTF-8 text (byte {e.start})") from None


def _short(v: Any) -> str:
    import reprlib

    return reprlib.repr(v)


def _resolve_secret_files(data: dict[str, Any], where: str = "") -> None:
    """Replace every `<secret>_file: PATH` by `<secret>: <the file's content>`, in place."""
    for key in list(data):
        v = data[key]
        if isinstance(v, dict):
            _resolve_secret_files(v, f"{where}{key}.")
        elif isinstance(v, list):
            for i, item in enumerate(v):
                if isinstance(item, dict):
                    _resolve_secret_files(item, f"{where}{key}[{i}].")
        elif (
            isinstance(key, str)
            and key.endswith("_file")
            and key[:-5] in SECRET_KEYS | {"dsn"}
            and v is not None
        ):
            target = key[:-5]
            if data.get(target) is not None:
                raise ConfigError(f"{where}{key}: give {target} or {key}, not both")
            data[target] = _read_secret(v, f"{where}{key}")
            del data[key]


def _remember_secrets(obj: Any, key: str = "") -> None:
    from telemetry.store.dsn import URL_PASSWORD  # once per document, not once per value

    _remember(obj, key, URL_PASSWORD)


def _remember(obj: Any, key: str, url_password: Any) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            _remember(v, str(k), url_password)
        _remember_basic(obj)
    elif isinstance(obj, list):
        for item in obj:
            _remember(item, key, url_password)
    elif isinstance(obj, str) and obj:
        if key in SECRET_KEYS and len(obj) >= 3:  # a 1-2 character mask would shred every line
            _SECRET_VALUES.add(obj)
        for m in url_password.finditer(obj):
            if len(m[2]) >= 3:
                _SECRET_VALUES.add(m[2])
                from urllib.parse import unquote

                _SECRET_VALUES.add(unquote(m[2]))


def _remember_basic(d: dict[Any, Any]) -> None:
    """A user's name and password as an HTTP Basic credential (base64 of `name:password`, as an
    Authorization header carries it), so that no log line shows it in that encoding either."""
    import base64

    name = next((d[k] for k in ("name", "username", "user") if isinstance(d.get(k), str)), None)
    pw = d.get("password")
    if name is None or not isinstance(pw, str) or not pw:
        return
    # surrogatepass: a YAML escape may give a lone surrogate; it is still a value to hide
    raw = f"{name}:{pw}".encode("utf-8", "surrogatepass")
    stable = raw[: len(raw) // 3 * 3]  # encoded alike however the header goes on after it
    for enc in (base64.b64encode, base64.urlsafe_b64encode):
        for b in (raw, stable):
            text = enc(b).decode()
            if len(text) >= 8:
                _SECRET_VALUES.update({text, text.rstrip("=")})


def redact(obj: Any, key: str = "") -> Any:
    """A copy of a config tree (dicts, lists, scalars) with secrets masked, for printing."""
    from telemetry.store.dsn import redact_dsn

    if isinstance(obj, dict):
        return {k: redact(v, str(k)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact(v, key) for v in obj]
    if isinstance(obj, str):
        if key in SECRET_KEYS and obj:
            return _MASK
        return redact_text(redact_dsn(obj))
    return obj


def redact_text(text: str) -> str:
    """`text` with every secret this process loaded, and any URL password, masked."""
    from telemetry.store.dsn import redact_dsn

    for value in sorted(_SECRET_VALUES, key=len, reverse=True):
        if value in text:
            text = text.replace(value, _MASK)
    return redact_dsn(text)


class RedactSecrets:
    """A logging filter: the formatted message of every record, secrets masked."""

    def filter(self, record: Any) -> bool:
        try:
            msg = record.getMessage()
        except Exception:  # a broken format string: let logging report it
            return True
        clean = redact_text(msg)
        if clean != msg:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None:
            text = redact_text(str(record.exc_info[1]))
            if text != str(record.exc_info[1]):
                record.exc_text = None
                record.exc_info = None
                record.msg = f"{record.msg} ({text})"
        return True


def flag_options(model: type[BaseModel], key: str) -> dict[str, Any]:
    """argparse keywords for a command-line flag that sets config key `key` (dotted for a nested
    section: `policy.mode`) of `model`: choices from a Literal, `append` for a list, store_true
    for a bool, else the field's type; the help is the field's description, then the key and
    its default, so `--help` and the config reference say the same."""
    *parents, leaf = key.split(".")
    for name in parents:
        model = model.model_fields[name].annotation  # type: ignore[assignment]
    field = model.model_fields[leaf]
    t = field.annotation
    if get_origin(t) in (Union, types.UnionType):  # X | None: a flag left out is the None
        t = next(a for a in get_args(t) if a is not type(None))
    kw: dict[str, Any]
    if get_origin(t) is Literal:
        kw = {"choices": list(get_args(t))}
    elif get_origin(t) is list:
        kw = {"action": "append"}
    elif t is bool:
        kw = {"action": "store_true", "default": None}
    else:
        kw = {"type": t} if t in (int, float) else {}
    note = [key]
    if kw.get("action") == "append":
        note.append("repeatable")
    desc = (field.description or leaf).rstrip(".")
    default = field.get_default(call_default_factory=True)
    if default not in (None, "", [], {}) and "default" not in desc:
        note.append(f"default {default}")
    return kw | {"help": f"{desc} ({', '.join(note)})".replace("%", "%%")}


def set_in(overrides: dict[str, Any], dotted: str, value: Any) -> None:
    """Helper for CLI flags: set_in(o, 'store.dsn', args.dsn)."""
    if value is None:
        return
    _deep_set(overrides, dotted.split("."), value)
