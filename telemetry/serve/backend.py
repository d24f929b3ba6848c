"""What serve's ClickHouse HTTP front (http.QueryServer) asks of what runs the statements: the
embedded engine (engine.Engine, `railscope serve`) or the ingest gateway's write-ahead log and
store (ingest/gateway.Gateway, `railscope ingest`). The front authenticates, judges every
statement with the guard (on the backend's own parser) and applies the user's limits; a backend
runs the guard's plan, deciding from the plan's fields (its root kind, tables, INSERT target),
never from the statement's text. Declares only: never runs anything itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from telemetry.serve.engine import Outcome
from telemetry.serve.guard import Parser
from telemetry.serve.plan import Plan


class Backend(Parser, Protocol):
    """Runs guard plans. Besides guard.Parser (the statement's canonical text and AST):"""

    version: str  # the engine's version, in every error text
    timezone: str  # X-ClickHouse-Timezone

    def run(
        self,
        plan: Plan,
        fmt: str,
        data: bytes | memoryview = b"",
        *,
        database: str | None = None,
        settings: Sequence[tuple[str, str]] = (),
        params: Mapping[str, str] | None = None,
        readonly: int = 0,
        tag: str = "",
    ) -> Outcome:
        """Run `plan`: a query (its answer in `fmt` unless it names its own) or an insert of
        `data` (in plan.fmt). `settings`, in order: the user's limits, the user's own settings,
        the plan's; `tag` marks the statement for `kill`. EngineError on refusal or failure."""
        ...

    def kill(self, tags: Sequence[str], *, wait: bool = False) -> None:
        """Cancel the statements run with these tags (nothing else)."""
        ...

    def purge_memory(self) -> None:
        """Hand freed memory back to the system after a statement refused for memory."""
        ...

    def close(self) -> None: ...
