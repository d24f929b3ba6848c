"""`railscope` command line.

Commands come from two places, so adding one never edits a central list:
- sources registered with `@register_source` in `exporters/*` get the common source flags
  (`--once`, `--from`, `--output prom|jsonl`, `--dsn`) through `telemetry.commands.sources`;
- modules in `telemetry/commands/` define `register(subparsers)`.
A planned command that nothing registers yet says so in one line and exits 2.

User errors print one line (no traceback) and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys
from collections.abc import Sequence

from telemetry.errors import NotBuilt, UserError

log = logging.getLogger("railscope")

# command -> (help, where it is tracked). Shown until a module registers the command.
PLANNED: dict[str, tuple[str, str]] = {
    "demo": ("simulate a cluster, ingest, correlate and print findings", "the simulator issue"),
    "node": ("GPU/NIC/PFC node exporter", "the node exporter issue"),
    "switch": ("SONiC switch counters exporter", "the switch exporter issue"),
    "sflow": ("sFlow v5 collector with RoCEv2 decoding", "the switch/flow issue"),
    "hdfs": ("HDFS JMX, clienttrace and replica placement", "the HDFS issue"),
    "inventory": ("Kubernetes/Volcano inventory", "the inventory issue"),
    "topology": ("HyperNode tree, LCA, generation and drift", "the inventory/topology issue"),
    "dashboards": ("build Grafana dashboards", "the dashboards issue"),
    "alerts": ("render Prometheus alert rules", "the dashboards/alerts issue"),
    "sim": ("cluster simulator and scoring", "the simulator issue"),
}


def _import_all(package: str) -> None:
    try:
        pkg = importlib.import_module(package)
    except ImportError:
        return
    for m in pkgutil.iter_modules(pkg.__path__):
        if not m.name.startswith("_"):
            importlib.import_module(f"{package}.{m.name}")


def build_parser() -> argparse.ArgumentParser:
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
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    _import_all("exporters")  # sources register themselves
    from telemetry.commands import sources as source_commands

    registered: set[str] = set(source_commands.register(sub))
    for m in pkgutil.iter_modules(importlib.import_module("telemetry.commands").__path__):
        if m.name.startswith("_") or m.name == "sources":
            continue
        mod = importlib.import_module(f"telemetry.commands.{m.name}")
        if hasattr(mod, "register"):  # helper modules (common.py) register nothing
            registered |= set(mod.register(sub))

    for name, (help_, where) in sorted(PLANNED.items()):
        if name in registered:
            continue
        p = sub.add_parser(name, help=f"{help_} [not built yet]", add_help=True)
        p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        p.set_defaults(func=_not_built(name, where))
    return parser


def _not_built(name: str, where: str):  # type: ignore[no-untyped-def]
    def run(args: argparse.Namespace) -> int:
        raise NotBuilt(f"`railscope {name}` is not built yet (tracked in {where})")

    return run


def _quiet_clients(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.ERROR or not record.name.startswith(
        ("urllib3", "clickhouse_connect")
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        format="%(asctime)s railscope %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
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
        print(f"railscope: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
