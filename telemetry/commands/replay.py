"""load a capture bundle directory into the store

Through the real parsers. A bundle is a directory with one subdirectory (or file) per source,
named after the source's command: DIR/node/, DIR/switch/, DIR/sflow/, DIR/hdfs/, DIR/inventory/
... Each is handed to that source exactly as `railscope SOURCE --from DIR/SOURCE` would. A source
that fails is reported and the others still load.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

from telemetry.commands.common import add_command, add_store_args
from telemetry.errors import UserError
from telemetry.registry import SOURCES

log = logging.getLogger(__name__)


def register(sub: Any) -> list[str]:
    p = add_command(sub, "replay", __doc__)
    p.add_argument("dir", metavar="DIR", help="capture bundle: DIR/<source>/ per source")
    p.add_argument(
        "--only", metavar="SOURCE", action="append", help="replay only these sources (repeatable)"
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
    failed = []
    for name, path in parts:
        argv = [name, "--from", str(path)]
        if args.dsn:
            argv += ["--dsn", args.dsn]
        if args.config:
            argv = ["--config", args.config, *argv]
        sub_args = parser.parse_args(argv)
        t = time.perf_counter()
        try:
            sub_args.func(sub_args)
        except UserError as e:
            failed.append(name)
            print(f"  {name:<10} FAILED  {e}")
            continue
        print(f"  {name:<10} ok      {path}  ({time.perf_counter() - t:.1f}s)")
    if failed:
        raise UserError(
            f"replay {root}: {len(failed)} of {len(parts)} source(s) failed: {', '.join(failed)}"
        )
    return 0
