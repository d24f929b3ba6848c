"""`railscope` command line.

Commands come from two places:
- every source in the table `telemetry/registry.py` is a command with the common source flags
  (`--once`, `--from`, `--output prom|jsonl`, `--dsn`) through `telemetry.commands.sources`;
- modules in `telemetry/commands/` define `register(subparsers)`, or a table of verbs `VERBS`
  (telemetry.commands.common.Verb rows) for `railscope MODULE VERB`.

User errors print one line (no traceback) and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys
from collections.abc import Sequence
from typing import Any

from telemetry.errors import UserError

log = logging.getLogger("railscope")


def command_word(argv: Sequence[str]) -> str | None:
    """The command `argv` runs: its first word that is not a global option or its value."""
    it = iter(argv)
    for word in it:
        if word in ("--config", "--log-level"):
            next(it, None)
        elif not word.startswith("-"):
            return word
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The `railscope` parser. Given a command line `argv`, it holds that command's parser only
    where it can: a source's command (`railscope node --no-store` loads the node exporter and
    nothing else) or the command of the module of that name (`railscope demo` imports no
    source's module: a second of each start); otherwise, and for `railscope --help`, every
    command."""
    from telemetry.catalog import SOURCES
    from telemetry.commands import sources as source_commands

    word = command_word(argv) if argv is not None else None
    if word in SOURCES:
        parser, sub = _root()
        source_commands.register(sub, only=word)
        return parser
    if word and _command_module(word) and _found(word):
        parser, sub = _root()
        _register_module(sub, word)
        if word in sub.choices:
            return parser
    parser, sub = _root()  # a command whose module is named otherwise (`config`, `findings`)
    source_commands.register(sub)
    for m in pkgutil.iter_modules(importlib.import_module("telemetry.commands").__path__):
        if _command_module(m.name):
            _register_module(sub, m.name)
    return parser


def _root() -> tuple[argparse.ArgumentParser, Any]:
    """The parser without commands, and its subparsers."""
    parser = argparse.ArgumentParser(
        prog="railscope",
        description=(
            "Observability for AI training clusters: collects GPU, RDMA NIC, switch, sFlow, HDFS and "
            "Kubernetes/Volcano data into ClickHouse and finds why jobs are slow."
        ),
        epilog="Store: --dsn or RAILSCOPE_DSN (default chdb://./railscope-data). Docs: README.md.",
    )
    parser.add_argument("--config", metavar="FILE", help="YAML config (default $RAILSCOPE_CONFIG)")
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="log verbosity on stderr (default info)",
    )
    return parser, parser.add_subparsers(dest="command", metavar="COMMAND")


def _command_module(name: str) -> bool:
    """A name a module of telemetry/commands that registers commands may have (not a private
    one, nor the sources' table of commands, registered apart)."""
    return name.isidentifier() and not name.startswith("_") and name != "sources"


def _found(name: str) -> bool:
    """telemetry/commands/NAME.py exists."""
    import importlib.util

    return importlib.util.find_spec(f"telemetry.commands.{name}") is not None


def _register_module(sub: Any, name: str) -> None:
    """The commands of telemetry/commands/NAME.py: a table of verbs (`railscope NAME VERB`) or
    its own `register`; helper modules (common.py) register nothing."""
    from telemetry.commands.common import register_verbs

    mod = importlib.import_module(f"telemetry.commands.{name}")
    if hasattr(mod, "VERBS"):
        register_verbs(sub, name, mod.__doc__, mod.VERBS)
    elif hasattr(mod, "register"):
        mod.register(sub)


def _quiet_clients(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.ERROR or not record.name.startswith(
        ("urllib3", "clickhouse_connect")
    )


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        format="%(asctime)s railscope %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    from telemetry.config import RedactSecrets, redact_text

    for handler in logging.getLogger().handlers:  # no secret in any log line
        handler.addFilter(RedactSecrets())
    if args.log_level != "debug":
        # client libraries log their own retries; railscope reports the outcome once, by name
        for handler in logging.getLogger().handlers:
            handler.addFilter(_quiet_clients)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UserError as e:
        print(f"railscope: error: {redact_text(str(e))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
