"""HyperNode tree, LCA, generation from LLDP and drift

HyperNode tree queries (lca, check), HyperNode generation from the LLDP graph (hypernodes,
units) and drift between declared HyperNodes and LLDP (diff); paths and lldp.

Reads the store (inventory, lldp_links, gpu_nic_affinity) or files given with --from; prints
YAML/JSON/text. It never applies anything to a cluster.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from telemetry.commands.common import (
    Verb,
    add_from_arg,
    add_json_arg,
    add_store_args,
    arg,
    config_from_args,
    open_store,
)
from telemetry.errors import UserError

log = logging.getLogger(__name__)


def _since_hours_arg(q: argparse.ArgumentParser) -> None:
    q.add_argument(
        "--since-hours",
        type=float,
        default=24.0,
        help="store: LLDP neighbours seen within this window",
    )


def _input_args(q: argparse.ArgumentParser) -> None:
    """What a verb reads: the store, or --from files."""
    add_store_args(q)
    add_from_arg(
        q,
        "files instead of the store (repeatable): HyperNode/Node manifests (YAML/JSON), "
        "lldpcli JSON (host = file name), record JSONL (lldp_link, gpu_nic_affinity)",
        metavar="PATH",
        dest="from_paths",
        many=True,
    )


def _gen_args(q: argparse.ArgumentParser) -> None:
    """A verb that generates HyperNodes from the LLDP graph: how to name the tiers, its input."""
    q.add_argument(
        "--tier-names",
        default="leaf,spine,superspine",
        help="tierName per generated tier, lowest first (default leaf,spine,superspine)",
    )
    q.add_argument("--prefix", default="", help="prefix of generated HyperNode names")
    q.add_argument(
        "--tiers",
        type=int,
        default=0,
        metavar="N",
        help="pad the top with root HyperNodes up to N tiers (e.g. to match a declared tree)",
    )
    _since_hours_arg(q)
    _input_args(q)


# --- inputs ------------------------------------------------------------------------------------
class Inputs:
    def __init__(self) -> None:
        self.objects: list[dict[str, Any]] = []
        self.links: list[dict[str, Any]] = []
        self.affinity: list[dict[str, Any]] = []


def load_inputs(paths: list[str]) -> Inputs:
    import yaml

    from exporters.inventory.objects import iter_objects
    from telemetry.topology.physical import LldpFormatError, parse_lldpcli_json

    inp = Inputs()
    files: list[Path] = []
    for p in map(Path, paths):
        if not p.exists():
            raise UserError(f"{p}: no such file or directory")
        files += sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    for f in files:
        text = f.read_text()
        if f.suffix == ".jsonl":
            for i, line in enumerate(text.splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except ValueError as e:
                    raise UserError(f"{f}:{i}: not JSON: {e}") from None
                if rec.get("_kind") == "lldp_link":
                    inp.links.append(rec)
                elif rec.get("_kind") == "gpu_nic_affinity":
                    inp.affinity.append(rec)
        elif f.suffix in (".json", ".yaml", ".yml"):
            try:
                docs = [json.loads(text)] if f.suffix == ".json" else list(yaml.safe_load_all(text))
            except (ValueError, yaml.YAMLError) as e:
                raise UserError(f"{f}: not valid JSON/YAML: {str(e).splitlines()[0]}") from None
            for d in docs:
                if isinstance(d, dict) and "lldp" in d:
                    try:
                        inp.links += parse_lldpcli_json(d, f.stem, where=str(f))
                    except LldpFormatError as e:
                        raise UserError(str(e)) from None
                else:
                    inp.objects.extend(iter_objects(d))
    return inp


def _declared(args: argparse.Namespace, paths: list[str] | None) -> Any:
    from telemetry.topology.hypernodes import HyperNodeTree, load_manifests

    if paths:
        inp = load_inputs(paths)
        specs, problems = load_manifests(inp.objects)
        nodes = {
            str((o.get("metadata") or {}).get("name")): {
                str(k): str(v) for k, v in ((o.get("metadata") or {}).get("labels") or {}).items()
            }
            for o in inp.objects
            if o.get("kind") == "Node"
        }
        tree = HyperNodeTree.build(specs, nodes or None)
        tree.problems[:0] = problems
        return tree
    from exporters.inventory.who import parse_at
    from telemetry.topology.store_io import declared_from_store

    cfg = config_from_args(args)
    at = parse_at(args.at) if getattr(args, "at", None) else None
    specs, nodes = declared_from_store(open_store(cfg, reading=True), cfg.cluster, at)
    return HyperNodeTree.build(specs, nodes or None)


def _fabric(args: argparse.Namespace) -> Any:
    from telemetry.topology.physical import Fabric

    if args.from_paths:
        inp = load_inputs(args.from_paths)
        links, aff = inp.links, inp.affinity
    else:
        from telemetry.topology.store_io import fabric_inputs_from_store

        cfg = config_from_args(args)
        links, aff = fabric_inputs_from_store(
            open_store(cfg, reading=True), cfg.cluster, args.since_hours
        )
    if not links:
        raise UserError(
            "no LLDP links found (give lldpcli JSON / lldp_link JSONL with --from, or collect them first)"
        )
    return Fabric(links, aff)


# --- verbs -------------------------------------------------------------------------------------
def cmd_lca(args: argparse.Namespace) -> int:
    tree = _declared(args, args.from_paths)
    for n in (args.node_a, args.node_b):
        if n not in tree.node_index:
            raise UserError(f"node {n!r} is in no declared HyperNode")
    got = tree.lca(args.node_a, args.node_b)
    if got is None:
        print(f"{args.node_a} and {args.node_b} share no HyperNode")
        return 1
    name, tier = got
    tname = tree.specs[name].tier_name
    print(f"{name}\ttier {tier}" + (f" ({tname})" if tname else ""))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    tree = _declared(args, args.from_paths)
    for p in tree.problems:
        print(p)
    print(
        f"{len(tree.specs)} HyperNodes, {len(tree.node_index)} nodes, tiers {tree.tiers}, {len(tree.problems)} problem(s)",
        file=sys.stderr,
    )
    return 1 if tree.problems else 0


def cmd_hypernodes(args: argparse.Namespace) -> int:
    import yaml

    from telemetry.topology.hypernodes import to_manifest
    from telemetry.topology.physical import generate_specs

    fabric = _fabric(args)
    names = [n for n in args.tier_names.split(",") if n]
    tiers, issues = fabric.hierarchy(names, prefix=args.prefix, tiers_wanted=args.tiers)
    for d in issues:
        print(f"# warning: {d.kind}: {d.message}", file=sys.stderr)
    docs = [to_manifest(s) for s in generate_specs(tiers, names)]
    sys.stdout.write(yaml.safe_dump_all(docs, sort_keys=False, explicit_start=True))
    return 0


def cmd_units(args: argparse.Namespace) -> int:
    fabric = _fabric(args)
    tiers, _ = fabric.hierarchy(
        [n for n in args.tier_names.split(",") if n], prefix=args.prefix, tiers_wanted=args.tiers
    )
    for g in tiers[0] if tiers else []:
        print(json.dumps({"unit": g.name, "leaves": sorted(g.switches), "nodes": sorted(g.nodes)}))
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    from telemetry.topology.physical import diff

    fabric = _fabric(args)
    declared = _declared(args, args.declared)
    # a declared root above a single group is a convention, not drift: pad to the declared depth
    tiers, issues = fabric.hierarchy(
        [n for n in args.tier_names.split(",") if n],
        prefix=args.prefix,
        tiers_wanted=args.tiers or len(declared.tiers),
    )
    diffs = diff(declared, fabric, tiers)
    diffs[:0] = [d for d in issues if d not in diffs]
    for d in diffs:
        print(json.dumps(d.as_dict()) if args.json else f"{d.kind}\t{d.subject}\t{d.message}")
    print(f"{len(diffs)} difference(s)", file=sys.stderr)
    return 1 if diffs else 0


def cmd_lldp(args: argparse.Namespace) -> int:
    import os
    import socket
    from datetime import UTC, datetime

    from telemetry.commands.common import write_jsonl
    from telemetry.contracts import Batch
    from telemetry.topology.physical import LldpFormatError, parse_lldpcli_json, read_lldpcli
    from telemetry.transforms import StampCluster

    host = args.host or os.environ.get("NODE_NAME") or socket.gethostname()
    cfg = config_from_args(args)
    stamp = StampCluster(cfg.cluster)
    t0 = time.monotonic()
    try:
        if args.from_path:
            path = Path(args.from_path)
            if not path.is_file():
                raise UserError(f"{path}: no such file")
            rows = parse_lldpcli_json(path.read_text(), host, where=str(path))
        else:
            rows = read_lldpcli(host, args.socket, args.lldpcli)
    except LldpFormatError as e:
        if not args.output:  # the rejection is counted where the collector's runs are watched
            _store_lldp_self_report(cfg, stamp, host, 0, time.monotonic() - t0, failed=True)
        raise UserError(str(e)) from None
    now = datetime.now(UTC)
    batch = stamp.process(Batch.from_rows("lldp_link", [{"ts": now, **r} for r in rows]))
    if args.output:
        write_jsonl([batch])
        return 0
    store = open_store(cfg)
    n = store.insert(batch.kind, batch.table)
    _store_lldp_self_report(cfg, stamp, host, n, time.monotonic() - t0, failed=False, store=store)
    print(f"{host}: stored {n} LLDP neighbour(s)", file=sys.stderr)
    return 0


def _store_lldp_self_report(
    cfg: Any,
    stamp: Any,
    host: str,
    stored: int,
    seconds: float,
    *,
    failed: bool,
    store: Any = None,
) -> None:
    """One `component_stat` row for this run of `topology lldp` (component `source:lldp`, the
    pipeline's self-report): the neighbours stored, or a failed run (lldpcli's output refused).
    Each run is a new process, so its counters start from zero, as after a restart. A store that
    cannot take the row is logged, and the run's own outcome stands."""
    from telemetry.contracts import ComponentStats, self_report

    stats = ComponentStats("source:lldp", received=stored, sent=stored)
    stats.last_duration_seconds = seconds
    if failed:
        stats.error("lldp_format")
        stats.last_success = False
    try:
        batch = stamp.process(self_report(host, [stats]))
        (store or open_store(cfg)).insert(batch.kind, batch.table)
    except Exception as e:  # the store's own trouble: named, never instead of the real outcome
        log.warning("topology lldp: could not store its self-report: %s", e)


def cmd_paths(args: argparse.Namespace) -> int:
    fabric = _fabric(args)
    if args.node not in fabric.servers:
        raise UserError(f"node {args.node!r} has no rail links in the LLDP graph")
    paths = fabric.gpu_paths(args.node)
    if not paths:
        raise UserError(f"node {args.node!r}: no gpu_nic_affinity records (run the node exporter)")
    for p in paths:
        print(json.dumps(p))
    return 0


# `railscope topology VERB` (registered by telemetry.cli)
VERBS = [
    Verb(
        "lca",
        "lowest common HyperNode of two nodes and its tier",
        cmd_lca,
        [
            arg("node_a"),
            arg("node_b"),
            _input_args,
            arg(
                "--at", metavar="TIME", help="HyperNodes as of this time (store only; default now)"
            ),
        ],
    ),
    Verb(
        "check",
        "validate declared HyperNodes (cycles, double claims, unresolved members)",
        cmd_check,
        [_input_args],
    ),
    Verb(
        "hypernodes",
        "generate HyperNode manifests (YAML for kubectl apply) from the LLDP graph",
        cmd_hypernodes,
        [_gen_args],
    ),
    Verb(
        "units",
        "scalable units derived from the LLDP graph (servers per rail-leaf group)",
        cmd_units,
        [_gen_args],
    ),
    Verb(
        "diff",
        "compare declared HyperNodes with the LLDP graph",
        cmd_diff,
        [
            _gen_args,
            arg(
                "--declared",
                action="append",
                metavar="PATH",
                help="declared HyperNode (and Node) manifests; default: the store's inventory",
            ),
            lambda p: add_json_arg(p, "the differences (one object each)"),
        ],
    ),
    Verb(
        "paths",
        "per GPU of a node: NIC -> leaf port -> leaf -> spines",
        cmd_paths,
        [arg("node"), _input_args, _since_hours_arg],
    ),
    Verb(
        "lldp",
        "read this host's LLDP neighbours (lldpcli) into lldp_link records",
        cmd_lldp,
        [
            add_store_args,
            arg("--host", help="local device name (default $NODE_NAME, else the hostname)"),
            arg("--socket", metavar="PATH", help="lldpd control socket (default lldpcli's)"),
            arg(
                "--lldpcli",
                default="lldpcli",
                metavar="PATH",
                help="lldpcli binary (default from $PATH)",
            ),
            lambda p: add_from_arg(
                p, "a saved `lldpcli show neighbors -f json` instead of running lldpcli"
            ),
            arg("--output", choices=["jsonl"], help="print the records instead of storing them"),
        ],
    ),
]
