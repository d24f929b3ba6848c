"""`railscope spool status|replay-rejected`: the write-ahead spool, seen and fixed by a person.

replay-rejected puts batches the store refused for good back in line after the cause is fixed
(a migration, a column type): renames are atomic, so a running exporter simply replays them at
its next cycle with their own deduplication tokens; `--now` inserts them from this process.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from telemetry.commands.common import add_store_args, config_from_args, open_store
from telemetry.sinks.configured import clickhouse_sink


def register(sub: Any) -> list[str]:
    p = sub.add_parser(
        "spool",
        help="the write-ahead spool: status, replay-rejected",
        description=(__doc__ or "").strip(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ssub = p.add_subparsers(dest="spool_command", metavar="SUBCOMMAND", required=True)
    verbs = {
        "status": ("batches waiting and rejected, per spool directory", status),
        "replay-rejected": ("put rejected batches back in line (after the fix)", replay_rejected),
    }
    for verb, (text, func) in verbs.items():
        q = ssub.add_parser(verb, help=text)
        q.add_argument(
            "--spool-dir", metavar="DIR", help="spool directory (default sink.spool_dir)"
        )
        q.set_defaults(func=func)
        if verb == "replay-rejected":
            add_store_args(q)
            q.add_argument(
                "--now",
                action="store_true",
                help="insert them from this process (no exporter may be running on this spool)",
            )
    return ["spool"]


def _spool_dirs(root: Path) -> list[Path]:
    """The spool directory and, for `railscope serve`, its one-per-source subdirectories."""
    if not root.is_dir():
        return []
    subs = [d for d in sorted(root.iterdir()) if d.is_dir() and d.name != "rejected"]
    return [root, *subs]


def _root(args: argparse.Namespace) -> tuple[Any, Path]:
    cfg = config_from_args(args)
    return cfg, Path(args.spool_dir or cfg.sink.spool_dir)


def status(args: argparse.Namespace) -> int:
    from telemetry.store.spool import Spool

    _, root = _root(args)
    for d in _spool_dirs(root):
        sp = Spool.view(d)
        waiting, rejected = sp.entries(), sp.rejected_entries()
        unconfirmed = [e for e in waiting if sp.is_unconfirmed(e)]
        print(
            f"{d}: {len(waiting)} waiting ({sum(e.rows for e in waiting)} rows), "
            f"{len(rejected)} rejected ({sum(e.rows for e in rejected)} rows), "
            f"{sp.bytes()} bytes"
            + (
                f"; {len(unconfirmed)} waiting batch(es) may be stored already (an insert "
                "broke off after it was sent: the replay's token keeps it from being stored twice)"
                if unconfirmed
                else ""
            )
        )
    return 0


def replay_rejected(args: argparse.Namespace) -> int:
    from telemetry.store.spool import Spool

    cfg, root = _root(args)
    total_batches = total_rows = 0
    for d in _spool_dirs(root):
        back = Spool.view(d).replay_rejected()
        if back:
            rows = sum(e.rows for e in back)
            print(f"{d}: {len(back)} rejected batch(es) ({rows} rows) back in line")
            total_batches += len(back)
            total_rows += rows
        if args.now and back:
            spool_cfg = cfg.model_copy(
                update={"sink": cfg.sink.model_copy(update={"spool_dir": str(d)})}
            )
            sink = clickhouse_sink(spool_cfg, open_store(spool_cfg))
            sink.close()
            again = sink.spool.rejected_entries()
            print(
                f"{d}: inserted {sink.stats.sent} rows; {len(sink.spool.entries())} batch(es) "
                f"still waiting, {len(again)} rejected again"
            )
    if not total_batches:
        print(f"no rejected batches under {root}")
    return 0
