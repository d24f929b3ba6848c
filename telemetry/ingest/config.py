"""The `ingest` config section: where the gateway listens, its write-ahead log, how large and how
often its merged inserts are, and how long it remembers the tokens it has taken.

Validated with the rest of the config (a wrong key is one line); never opens a socket or a file.
"""

from __future__ import annotations

import ssl
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from telemetry.serve.config import ServeUser
from telemetry.text import parse_size
from telemetry.tls import server_context

DEFAULT_LISTEN = "127.0.0.1:8124"

# The per-user limits (users[].limits) the gateway cannot apply to an insert: it is answered once
# it is in the write-ahead log and never runs in an engine (ingest.max_request_bytes bounds it
# instead). They apply to the user's reads passed through to the store, and
# max_concurrent_queries to everything; `config check` names a writer that sets one.
INSERT_UNBOUNDED_LIMITS = (
    "max_execution_time",
    "max_memory_usage",
    "max_result_rows",
    "max_result_bytes",
)


class IngestConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)

    listen: str = Field(
        default=DEFAULT_LISTEN,
        description="HOST:PORT of the gateway's ClickHouse HTTP endpoint (agents' store DSN).",
    )
    spool_dir: str = Field(
        "./railscope-ingest",
        description="The gateway's write-ahead log: accepted batches until a merged insert holds "
        "them, and the tokens it has taken (one directory per gateway process).",
    )
    flush_seconds: float = Field(
        2.0,
        gt=0,
        le=60,
        description="Insert a kind's accepted rows once the oldest is this old: with R gateways "
        "a table gets R/flush_seconds inserts per second (per shard), whatever the agents number.",
    )
    flush_rows: int = Field(
        500_000, gt=0, description="...or once this many rows of one kind wait."
    )
    max_bytes: Annotated[int, BeforeValidator(parse_size)] = Field(
        4 << 30,
        ge=1 << 20,
        description="Write-ahead log limit: past it new inserts are answered TOO_MANY_PARTS "
        "(retryable) so agents keep their batches in their own spools; nothing is dropped.",
    )
    dedup_window_seconds: float = Field(
        900.0,
        ge=60,
        description="How long a token is remembered after its rows reached the store (or the "
        "gateway started): an agent's retry of a batch whose answer it lost is recognised "
        "within it (agents retry within sink.retry_max_seconds, 30 s, of reaching it again).",
    )
    retry_initial_seconds: float = Field(0.5, gt=0)
    retry_max_seconds: float = Field(30.0, gt=0)
    threads: int = Field(
        32, ge=1, le=512, description="Requests handled at once (each waits for its commit)."
    )
    max_request_bytes: Annotated[int, BeforeValidator(parse_size)] = Field(
        64 << 20, ge=1024, description="Largest request body (after decompression)."
    )
    max_connections: int = Field(
        1024,
        ge=8,
        description="Open agent connections in all (as serve.max_connections: lowered to fit "
        "the descriptor limit; at the cap an idle or trickling one is closed for a new one).",
    )
    max_connections_per_network: int = Field(
        1024,
        ge=2,
        description="Open connections from one source network (an IPv4 /24, an IPv6 /64, all "
        "of loopback). The agents share their nodes' subnets, so this is as high as "
        "max_connections by default (serve's own is 256); lower it to keep one rack from "
        "holding every connection.",
    )
    tls_cert_file: str | None = Field(
        None, description="Serve HTTPS with this certificate (PEM): agents send a password."
    )
    tls_key_file: str | None = Field(None, description="...and this private key (PEM).")
    users: list[ServeUser] = Field(
        default_factory=list,
        description="Who may insert (and read through to the store); none: `default` without a "
        "password, so the gateway then listens on loopback only.",
    )

    @field_validator("listen")
    @classmethod
    def _listen(cls, v: str) -> str:
        _, sep, port = v.rpartition(":")
        if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
            raise ValueError(f"expected HOST:PORT (e.g. {DEFAULT_LISTEN}), not {v!r}")
        return v

    @model_validator(mode="after")
    def _tls(self) -> IngestConfig:
        self.ssl_context()  # unreadable or mismatched files: one line now, not at start
        return self

    def notes(self) -> list[str]:
        """One line per limit a user sets that the gateway applies to its reads only
        (INSERT_UNBOUNDED_LIMITS): what `config check` prints beside "ok"."""
        out = []
        for u in self.users:
            if u.readonly:
                continue  # reads only: every limit applies
            for name in INSERT_UNBOUNDED_LIMITS:
                if getattr(u.limits, name) is not None:
                    out.append(
                        f"ingest.users[{u.name}].limits.{name}: applies to the reads it passes "
                        "to the store, not to its inserts (answered from the gateway's log, "
                        "bounded by ingest.max_request_bytes)"
                    )
        return out

    def ssl_context(self) -> ssl.SSLContext | None:
        """The gateway's server TLS context (None: plain HTTP)."""
        return server_context(self.tls_cert_file, self.tls_key_file)
