"""load a capture bundle directory into the store

Through the real parsers. A bundle is a directory with one subdirectory (or file) per source,
named after the source's command: DIR/node/, DIR/switch/, DIR/sflow/, DIR/hdfs/, DIR/inventory/
... Each is handed to that source exactly as `railscope SOURCE --from DIR/SOURCE` would. A source
that fails is reported and the others still load.

Before anything is stored, every source's rows are compared with the TTL of the table they go to:
a bundle with rows the store would drop is refused whole, in one line naming the table, its TTL
and the capture's time range. --keep stores them, lengthening those tables' TTL by the capture's
age so that its rows are kept for the TTL counted from this load (docs/replay.md).
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

from telemetry.catalog import SOURCES
from telemetry.commands.common import add_command, add_store_args
from telemetry.errors import UserError

log = logging.getLogger(__name__)


def register(sub: Any) -> list[str]:
    p = add_command(sub, "replay", __doc__)
    p.add_argument("dir", metavar="DIR", help="capture bundle: DIR/<source>/ per source")
    p.add_argument(
        "--only", metavar="SOURCE", action="append", help="replay only these sources (repeatable)"
    )
    p.add_argument(
        "--keep",
        action="store_true",
        help="keep rows older than their table's TTL (lengthens that TTL by the capture's age)",
    )
    add_store_args(p)
    p.set_defaults(func=run)
    return ["replay"]


def bundle_parts(root: Path, only: list[str] | None = None) -> list[tuple[str, Path]]:
    if not root.is_dir():
        raise UserError(f"replay {root}: not a directory")
    parts = []
    for entry in sorted(root.iterdir()):
        name = entry.name.split(".")[0]
        if name in SOURCES and (not only or name in only):
            parts.append((name, entry))
    unknown = [
        e.name
        for e in root.iterdir()
        if e.name.split(".")[0] not in SOURCES and not e.name.startswith(".")
    ]
    if unknown:
        shown = ", ".join(sorted(unknown)[:5]) + (
            f" (+{len(unknown) - 5} more)" if len(unknown) > 5 else ""
        )
        log.warning(
            "replay %s: skipped %s: no source of that name (known: %s)",
            root,
            shown,
            ", ".join(sorted(SOURCES)),
        )
    if not parts:
        raise UserError(
            f"replay {root}: nothing to replay (expected subdirectories named after sources: {', '.join(sorted(SOURCES))})"
        )
    return parts


def run(args: argparse.Namespace) -> int:
    from telemetry.cli import build_parser

    root = Path(args.dir)
    parts = bundle_parts(root, args.only)
    parser = build_parser()
    argvs = []
    for name, path in parts:
        argv = [name, "--from", str(path)]
        if args.dsn:
            argv += ["--dsn", args.dsn]
        if args.keep:
            argv.append("--keep")
        if args.config:
            argv = ["--config", args.config, *argv]
        argvs.append((name, path, parser.parse_args(argv)))
    if not args.keep:
        _refuse_expiring(root, argvs, args)
    failed = []
    for name, path, sub_args in argvs:
        t = time.perf_counter()
        try:
            rc = sub_args.func(sub_args)
        except UserError as e:
            failed.append(name)
            print(f"  {name:<10} FAILED  {e}")
            continue
        if rc:  # the source said why (one line, logged): a capture it could not read
            failed.append(name)
            print(f"  {name:<10} FAILED  {path}: see the line above")
            continue
        print(f"  {name:<10} ok      {path}  ({time.perf_counter() - t:.1f}s)")
    if failed:
        raise UserError(
            f"replay {root}: {len(failed)} of {len(parts)} source(s) failed: {', '.join(failed)}"
        )
    return 0


def _refuse_expiring(
    root: Path, argvs: list[tuple[str, Path, argparse.Namespace]], args: argparse.Namespace
) -> None:
    """Every source's rows against the store's TTLs, before any source stores a row: a bundle is
    refused whole rather than half loaded (its inventory stored, its flows refused). Each source
    is parsed here and again as it loads: the rows are not held meanwhile. A source that fails
    to parse is left to the load, which reports it."""
    from telemetry.commands.common import config_from_args, open_store
    from telemetry.commands.sources import config_for
    from telemetry.registry import build_source
    from telemetry.store.retention import ReplayAdmission, Span, spans

    found: dict[str, Span] = {}
    for name, _path, sub_args in argvs:
        try:
            src: Any = build_source(name, config_for(name, sub_args), once=True)
            try:
                batches = src.collect()
            finally:
                closer = getattr(src, "close", None)
                if closer is not None:
                    closer()
        except Exception as e:
            log.debug("replay %s: %s not checked before loading: %s", root, name, e)
            continue
        for table, span in spans(batches).items():
            found[table] = found[table] | span if table in found else span
        del batches
    store = open_store(config_from_args(args))
    ReplayAdmission(store, what=f"replay {root}").check(found)
