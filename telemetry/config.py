"""Configuration: one YAML file, then environment variables, then CLI flags (highest wins).

Everything is validated up front; an error names the key (`store.batch_rows: ...`). Each source's
section `sources.<name>` is validated by the model `telemetry.registry` names for it (a subclass of
`SourceConfig`), so adding a source never edits this file and no exporter must be imported first.

Environment: RAILSCOPE_CONFIG (file), RAILSCOPE_DSN (store.dsn), RAILSCOPE_CLUSTER (cluster), and
RAILSCOPE__<SECTION>__<KEY>=value for any key (value parsed as YAML), e.g. RAILSCOPE__SINK__BATCH_ROWS=5000.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from telemetry.errors import ConfigError
from telemetry.records import KINDS
from telemetry.serve.config import ServeConfig

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B?|B)?\s*$", re.IGNORECASE)
_MULT = {
    "": 1,
    "B": 1,
    "K": 1000,
    "KB": 1000,
    "KIB": 1024,
    "KI": 1024,
    "M": 10**6,
    "MB": 10**6,
    "MIB": 1 << 20,
    "MI": 1 << 20,
    "G": 10**9,
    "GB": 10**9,
    "GIB": 1 << 30,
    "GI": 1 << 30,
    "T": 10**12,
    "TB": 10**12,
    "TIB": 1 << 40,
    "TI": 1 << 40,
}


def parse_size(v: Any) -> int:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    m = _SIZE.match(str(v))
    if not m:
        raise ValueError(f"not a size: {v!r} (use bytes or e.g. 512MiB, 2GiB)")
    return int(float(m[1]) * _MULT[(m[2] or "").upper()])


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
        default_factory=dict, description="TTL per table in days (null = none)."
    )

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
        tables = {k.table for k in KINDS.values()}
        for t, days in v.items():
            if t not in tables:
                raise ValueError(f"unknown table {t!r} (tables: {', '.join(sorted(tables))})")
            if days is not None and days <= 0:
                raise ValueError(f"{t}: TTL must be a positive number of days or null")
        return v


class SinkConfig(_Model):
    batch_rows: int = Field(100_000, gt=0, description="Seal a batch at this many rows.")
    batch_seconds: float = Field(5.0, gt=0, description="...or when its oldest row is this old.")
    spool_dir: str = Field("./railscope-spool", description="Write-ahead spool directory.")
    spool_max_bytes: int = Field(
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

    @field_validator("spool_max_bytes", mode="before")
    @classmethod
    def _size(cls, v: Any) -> int:
        n = parse_size(v)
        if n < 1 << 20:
            raise ValueError("must be at least 1MiB")
        return n


class PrometheusConfig(_Model):
    enabled: bool = True
    listen: str = Field("0.0.0.0:9580", description="host:port for /metrics.")

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
    serve: ServeConfig = Field(
        default_factory=ServeConfig,
        description="`railscope serve`: query endpoint and its users (telemetry/serve/config.py).",
    )
    sources: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per-source sections."
    )

    def source(self, name: str) -> Any:
        """The validated section of one source (its config model), defaults if absent."""
        from telemetry import registry

        if name not in registry.SOURCES:
            raise ConfigError(
                f"sources.{name}: unknown source (known: {', '.join(sorted(registry.SOURCES))})"
            )
        model = registry.SOURCES[name].config_model()
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
    if env.get("RAILSCOPE_CLUSTER"):
        out["cluster"] = env["RAILSCOPE_CLUSTER"]
    for k, v in env.items():
        if k.startswith("RAILSCOPE__"):
            path = [p.lower() for p in k[len("RAILSCOPE__") :].split("__") if p]
            if path:
                _deep_set(out, path, yaml.safe_load(v) if v else v)
    return out


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """File (or $RAILSCOPE_CONFIG), then env, then `overrides` (from CLI flags)."""
    env = os.environ if env is None else env
    path = path or env.get("RAILSCOPE_CONFIG") or None
    data: dict[str, Any] = {}
    source = "config"
    if path:
        p = Path(path)
        source = f"config {p}"
        try:
            loaded = yaml.safe_load(p.read_text())
        except FileNotFoundError:
            raise ConfigError(f"config {p}: no such file") from None
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f" line {mark.line + 1}" if mark else ""
            raise ConfigError(
                f"config {p}:{where}: not valid YAML: {getattr(e, 'problem', e)}"
            ) from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(
                f"config {p}: the top level must be a mapping, not {type(loaded).__name__}"
            )
        data = loaded
    data = _merge(data, _env_overrides(env))
    data = _merge(data, {k: v for k, v in (overrides or {}).items() if v is not None})
    try:
        cfg = Config.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, source=source)) from None
    # validate the sections of known sources now, not when the source starts
    from telemetry import registry

    for name, raw in cfg.sources.items():
        if name not in registry.SOURCES:
            raise ConfigError(
                f"{source}: sources.{name}: unknown source (known: {', '.join(sorted(registry.SOURCES))})"
            )
        try:
            registry.SOURCES[name].config_model().model_validate(raw or {})
        except ValidationError as e:
            raise ConfigError(
                format_validation_error(e, prefix=f"sources.{name}", source=source)
            ) from None
    return cfg


def set_in(overrides: dict[str, Any], dotted: str, value: Any) -> None:
    """Helper for CLI flags: set_in(o, 'store.dsn', args.dsn)."""
    if value is None:
        return
    _deep_set(overrides, dotted.split("."), value)
