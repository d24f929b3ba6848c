"""Shared CLI plumbing: config from flags, store and sinks from config, record output."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any, cast

from telemetry.config import Config, load_config, set_in
from telemetry.contracts import Batch, ComponentStats

if TYPE_CHECKING:
    from telemetry.store import Store


def add_command(sub: Any, name: str, doc: str | None) -> argparse.ArgumentParser:
    """`railscope NAME`, described by its module's docstring (PEP 257 form): the summary line is
    the command's line in `railscope --help`, the rest heads its own --help, printed as written."""
    summary, _, rest = (doc or "").strip().partition("\n")
    return cast(
        argparse.ArgumentParser,
        sub.add_parser(
            name,
            help=summary,
            description=rest.strip() or None,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        ),
    )


def add_verb_command(sub: Any, name: str, doc: str | None) -> Any:
    """`railscope NAME VERB ...` (add_command's description) and its verbs' subparsers;
    `railscope NAME` alone prints its help and exits 2."""
    p = add_command(sub, name, doc)

    def usage(args: argparse.Namespace) -> int:
        p.print_help()
        return 2

    p.set_defaults(func=usage)
    return p.add_subparsers(dest=f"{name}_verb", metavar="VERB")


ArgSetup = Callable[[argparse.ArgumentParser], Any]


def arg(*flags: str, **kw: Any) -> ArgSetup:
    """One `add_argument(*flags, **kw)`, as a row of a Verb's `args`."""
    return lambda p: p.add_argument(*flags, **kw)


@dataclass(frozen=True)
class Verb:
    """`railscope COMMAND NAME`: its --help line, what runs it, and its arguments, set up in order
    (add_*_arg helpers, `arg(...)` rows, a module's shared groups)."""

    name: str
    help: str
    run: Callable[[argparse.Namespace], int]
    args: Sequence[ArgSetup] = ()
    description: str | None = None


def register_verbs(sub: Any, name: str, doc: str | None, verbs: Sequence[Verb]) -> list[str]:
    """A verb command (add_verb_command) from its table of verbs; a module's `register`."""
    parsers = add_verb_command(sub, name, doc)
    for v in verbs:
        p = parsers.add_parser(v.name, help=v.help, description=v.description)
        for setup in v.args:
            setup(p)
        p.set_defaults(func=v.run)
    return [name]


def add_range_args(p: argparse.ArgumentParser, *, since: str | None = None) -> None:
    """--since/--until (telemetry.times: ISO time, 'now', epoch ms or a duration ago). Without
    defaults they span the stored data."""
    p.add_argument(
        "--since",
        default=since,
        help=f"start: ISO time or duration ago (default: {since or 'start of the stored data'})",
    )
    p.add_argument(
        "--until",
        help=f"end: ISO time or duration ago (default: {'now' if since else 'end of the stored data'})",
    )


def add_out_arg(p: argparse.ArgumentParser, help: str = "output directory") -> None:
    p.add_argument("--out", required=True, metavar="DIR", help=help)


def add_lag_arg(p: argparse.ArgumentParser, when: str = "") -> None:
    """--lag: how long after a tick the engine evaluates it (correlate --follow, serve)."""
    p.add_argument(
        "--lag",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help=f"{when}evaluate each tick this long after it passes, for data still in flight "
        "(default 5)",
    )


def add_timing_arg(p: argparse.ArgumentParser) -> None:
    """--timing: the simulator's collection timing profile (telemetry/sim/timing.py)."""
    p.add_argument(
        "--timing",
        choices=("ideal", "realistic", "harsh"),
        help="collection timing of the simulated samples (default: the scenario's; realistic for "
        "the built-ins): ideal = every device on one 10 s grid; realistic = each device at its own "
        "phase with jitter, NTP-level skew and rare lost polls; harsh = production extremes "
        "(+-2 s jitter, 5 %% lost polls, restarts, duplicates, 10 %% sFlow loss, 20 %% of polls "
        "30 s late); docs/simulator.md, Timing",
    )


def add_from_arg(
    p: Any, help: str, *, metavar: str = "FILE", dest: str = "from_path", many: bool = False
) -> None:
    """--from: read the input from a file (a capture, a saved command output, another config)
    instead of the live or packaged one; `many`: repeatable, a list."""
    kw: dict[str, Any] = {"action": "append"} if many else {}
    p.add_argument("--from", dest=dest, metavar=metavar, help=help, **kw)


def add_listen_arg(p: Any, when: str = "") -> None:
    """--listen: where /metrics is served (a source, correlate --follow)."""
    p.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help=f"{when}serve /metrics here (default prometheus.listen, 0.0.0.0:9580)",
    )


def add_json_arg(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--json", action="store_true", help=f"print {what} as JSON")


def add_listing_args(p: Any) -> None:
    """--since, --limit and --format (table | json | prom) of a command that lists stored rows."""
    p.add_argument("--since", help="last seen after: ISO time or duration ago (e.g. 2h)")
    p.add_argument("--limit", type=int, default=200, help="at most this many rows")
    p.add_argument(
        "--format",
        choices=["table", "json", "prom"],
        default="table",
        help="table (people), json (one object per line), prom (metrics for alerting)",
    )


def print_listing(
    rows: list[dict[str, Any]],
    fmt: str,
    what: str,
    as_json: Callable[[dict[str, Any]], Any],
    as_prom: Callable[[list[dict[str, Any]]], str],
    as_line: Callable[[dict[str, Any]], str],
) -> None:
    """A listing command's output (add_listing_args' --format): one JSON object per row,
    Prometheus text, or one line per row for people ("no WHAT" when there is none)."""
    if fmt == "json":
        for r in rows:
            print(json.dumps(as_json(r), default=str))
    elif fmt == "prom":
        print(as_prom(rows), end="")
    else:
        if not rows:
            print(f"no {what}")
        for r in rows:
            print(as_line(r))


def add_store_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dsn",
        help="store: chdb://PATH or http(s)://user:pass@host:port/db (default $RAILSCOPE_DSN)",
    )


def config_from_args(args: argparse.Namespace, **dotted: Any) -> Config:
    overrides: dict[str, Any] = {}
    set_in(overrides, "store.dsn", getattr(args, "dsn", None))
    for key, value in dotted.items():
        set_in(overrides, key.replace("__", "."), value)
    return load_config(getattr(args, "config", None), overrides=overrides)


def store_from_config(cfg: Config, *, reading: bool = False) -> Store:
    """The configured store. `reading`: the command only reads what was collected, so an
    embedded store that does not exist yet is a mistyped path, not one to create (opening it
    would create it empty and every answer would be "nothing found")."""
    from telemetry.errors import StoreUnavailable
    from telemetry.store import Store  # the client imports pyarrow: not for a /metrics-only node
    from telemetry.store.dsn import parse_dsn

    dsn = parse_dsn(cfg.store.dsn)
    if reading and dsn.embedded and dsn.path and not os.path.isdir(dsn.path):
        raise StoreUnavailable(
            f"no embedded store at {dsn.path}: nothing was collected there (name the store with "
            "--dsn or RAILSCOPE_DSN; `railscope demo`, `railscope serve` and the sources create one)"
        )
    return Store(
        cfg.store.dsn,
        database=cfg.store.database,
        cluster=cfg.store.cluster,
        ttl_overrides=cfg.store.ttl_days,
    )


def open_store(cfg: Config, *, migrate: bool | None = None, reading: bool = False) -> Store:
    """Open the store and make sure its schema is current. Embedded stores are migrated on the
    spot; a server must be migrated by `railscope db migrate` (one place runs cluster DDL).
    `reading`: as for store_from_config."""
    from telemetry.errors import StoreUnavailable

    store = store_from_config(cfg, reading=reading)
    store.ping()
    if migrate if migrate is not None else store.dsn.embedded:
        store.migrate()
    elif store.pending():
        raise StoreUnavailable(
            f"store {store.dsn.redacted()} needs migrations: run `railscope db migrate`"
        )
    return store


def store_from_args(
    args: argparse.Namespace, *, reading: bool = False, **dotted: Any
) -> tuple[Config, Store]:
    """The config (flags over file over environment) and its store, opened as `open_store` does."""
    cfg = config_from_args(args, **dotted)
    return cfg, open_store(cfg, reading=reading)


def _jsonable(v: Any) -> Any:
    if isinstance(v, datetime):
        return v.isoformat().replace("+00:00", "Z")
    return str(v)


def flat_log_event(row: dict[str, Any]) -> dict[str, Any]:
    """A log_event record as its jsonl line shows it: `line`, `kind`, the kind's matched fields
    flattened to the top level (their names are docs/logs.md's), then where it came from. A
    field that would shadow a record column keeps the column's value."""
    fields = json.loads(row.get("fields") or "{}")
    head = {"line": row["line"], "kind": row["kind"]}
    rest = {k: v for k, v in row.items() if k not in ("fields", "line", "kind")}
    return {**head, **{k: v for k, v in fields.items() if k not in rest}, **rest}


def write_jsonl(batches: Iterable[Batch], out: IO[str] | None = None) -> int:
    """One JSON object per record: the kind's field names, plus `_kind` (a log_event's matched
    fields flattened, see flat_log_event)."""
    out = out or sys.stdout  # looked up per call: sys.stdout may be replaced after import
    n = 0
    for b in batches:
        flat = b.kind.name == "log_event"
        for row in b.table.to_pylist():
            obj = flat_log_event(row) if flat else row
            out.write(
                json.dumps({"_kind": b.kind.name, **obj}, default=_jsonable, separators=(",", ":"))
            )
            out.write("\n")
            n += 1
    return n


def write_output(
    batches: list[Batch],
    fmt: str,
    components: Iterable[ComponentStats] = (),
    out: IO[str] | None = None,
) -> None:
    out = out or sys.stdout
    if fmt == "jsonl":
        write_jsonl(batches, out)
    else:
        from telemetry.sinks.prometheus import render_prometheus

        out.write(render_prometheus(batches, components))
    out.flush()
