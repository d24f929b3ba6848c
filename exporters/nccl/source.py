"""The `nccl` source: NCCL Inspector per-collective telemetry, live from the dump directory or
`--from FILE|DIR`, attributed to pod, job and GPU.

Reads Inspector JSON files (followed like `tail -F`, offsets kept across restarts) and Prom
textfiles (read when rewritten); writes `collective_sample` batches only. A malformed line, an
unknown format version or an unreadable file is counted under a bounded reason and never stops
the others. See docs/nccl.md.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import socket
from pathlib import Path
from typing import Any

import pyarrow as pa

from exporters.common.tail import Tailer, TailOffsets
from exporters.nccl import parse
from exporters.nccl.attribution import Attributor, PodInfo, pod_directory
from exporters.nccl.config import NcclConfig
from telemetry.contracts import Batch
from telemetry.errors import UserError
from telemetry.pipeline import BaseSource
from telemetry.records import COLLECTIVE_SAMPLE

log = logging.getLogger(__name__)

REASONS = (*parse.REASONS, "file_unreadable", "offsets", "unrecognized_file")
_SNIFF_BYTES = 4096


def detect(head: bytes) -> str | None:
    """'json' | 'prom' from a file's first bytes, None when it is neither."""
    text = head.lstrip()
    if text.startswith(b"{"):
        return "json"
    if text.startswith((b"# HELP nccl_", b"# TYPE nccl_", b"nccl_")):
        return "prom"
    return None


class NcclSource(BaseSource):
    """NCCL Inspector collectives (NCCL >= 2.23 profiler plugin, `ext-profiler/inspector`).

    Live: follow every JSON file under sources.nccl.dump_dir (NCCL_INSPECTOR_DUMP_DIR), resuming
    from saved offsets after a restart, and read the Prom textfiles (NCCL_INSPECTOR_PROM_DUMP=1)
    each time they are rewritten. Each rank's process is attributed to its container and pod
    through /proc/PID/cgroup under the proc root, its rank to the pod's GPU.
    Offline: --from FILE|DIR reads JSON and Prom files by content. See docs/nccl.md.
    """

    name = "nccl"
    unit = "entries"  # JSON lines and Prom textfile samples read
    reasons = REASONS
    Config = NcclConfig
    cfg: NcclConfig

    def __init__(
        self,
        config: NcclConfig | None = None,
        *,
        from_path: str | None = None,
        offsets: TailOffsets | None = None,
        cluster: str = "",
    ) -> None:
        super().__init__(config, from_path)
        self.cluster = cluster
        self.node_name = self.cfg.node_name or os.environ.get("NODE_NAME") or socket.gethostname()
        self.attributor = Attributor(self.cfg.proc_root)
        self._by_name: Any = lambda ns_pod: None
        self.offsets = offsets
        self._resume = offsets.load() if offsets else {}
        self._tailers: dict[str, Tailer] = {}
        self._prom_seen: dict[str, int] = {}  # textfile -> mtime_ns last read
        self._first_scan = True
        self._ignored: set[str] = set()  # live files that are not Inspector output (counted once)

    # --- CLI ------------------------------------------------------------------------------------
    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        g = p.add_argument_group("nccl options")
        g.add_argument("--dump-dir", metavar="DIR", help="NCCL_INSPECTOR_DUMP_DIR to follow")
        g.add_argument("--proc-root", metavar="DIR", help="the host's /proc (default /proc)")
        g.add_argument("--node-name", metavar="NAME", help="this node's name")
        g.add_argument("--format", choices=["auto", "json", "prom"], help="files to read")

    @classmethod
    def fold_args(cls, args: argparse.Namespace, section: dict[str, Any]) -> dict[str, Any]:
        out = dict(section)
        for flag in ("dump_dir", "proc_root", "node_name", "format"):
            if getattr(args, flag, None):
                out[flag] = getattr(args, flag)
        return out

    @classmethod
    def build(cls, c: NcclConfig, cfg: Any, *, from_path: str | None, once: bool) -> NcclSource:
        if not from_path and not c.dump_dir:
            raise UserError(
                "nccl: nothing to collect: set sources.nccl.dump_dir (or --dump-dir DIR), "
                "or read a capture with --from FILE|DIR"
            )
        path = Path(from_path or c.dump_dir or "")
        if not path.exists():
            raise UserError(f"{path}: no such file or directory")
        if from_path and path.is_file():
            try:
                with path.open("rb") as fh:
                    head = fh.read(_SNIFF_BYTES)
            except OSError as e:
                raise UserError(f"{path}: cannot read: {e.strerror or e}") from None
            if detect(head) is None:
                raise UserError(
                    f"{path}: not recognized: expected NCCL Inspector JSON lines or an Inspector "
                    "Prometheus textfile"
                )
        offsets = None
        if not from_path:
            spool = getattr(getattr(cfg, "sink", None), "spool_dir", None) or "."
            offsets = TailOffsets(c.offsets_file or Path(spool) / "nccl-inspector-offsets.json")
        return cls(c, from_path=from_path, offsets=offsets, cluster=getattr(cfg, "cluster", ""))

    def bind_store(self, store: Any) -> None:
        """Pod names, jobs and GPU assignments come from the inventory in this store."""
        self.attributor.pods = pod_directory(store, self.cluster)
        # live: the pods of this node; a capture (--from): any pod the inventory knows
        node = self.node_name if self.from_path is None else None
        self.attributor.named = pod_directory(store, self.cluster, by="name", node=node)

    # --- collection -----------------------------------------------------------------------------
    def _collect(self) -> list[Batch]:
        rows = parse.Rows()
        local = self.from_path is None
        if self.from_path is not None:
            self._offline(self.from_path, rows)
        else:
            self._live(Path(self.cfg.dump_dir or "."), rows)
        for reason, n in rows.errors.items():
            self.problems.add(reason, rows.first_error.get(reason, ""), "", n)
        self.stats.received += len(rows) + sum(rows.errors.values()) + sum(rows.skipped.values())
        if rows.inspector_dropped:  # lost before they reached a file: the sample is incomplete
            extra = self.stats.extra
            extra["inspector_dropped_records"] = (
                extra.get("inspector_dropped_records", 0.0) + rows.inspector_dropped
            )
            log.warning(
                "nccl: the Inspector dropped %d collective record(s) before dumping them (its "
                "ring buffer overflowed): raise NCCL_INSPECTOR_DUMP_COLL_RING_SIZE or dump more often",
                rows.inspector_dropped,
            )
        if not len(rows):
            return []
        return [Batch(COLLECTIVE_SAMPLE, self._table(rows, local))]

    def _files(self, root: Path) -> list[Path]:
        if root.is_file():
            return [root]
        return sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))

    def _kind(self, f: Path) -> str | None:
        try:
            with f.open("rb") as fh:
                head = fh.read(_SNIFF_BYTES)
        except OSError as e:
            self.problems.add("file_unreadable", str(f), str(e))
            return None
        if not head:
            return "empty"
        kind = detect(head)
        if kind is None:
            self.problems.add("unrecognized_file", str(f), "neither Inspector JSON nor Prom")
        elif self.cfg.format not in ("auto", kind):
            return None
        return kind

    def _offline(self, root: Path, rows: parse.Rows) -> None:
        files = self._files(root)
        if not files:
            raise UserError(f"{root}: empty directory")
        for f in files:
            kind = self._kind(f)
            try:
                if kind == "json":
                    with f.open("rb") as fh:
                        if parse.pretty_printed(fh.read(_SNIFF_BYTES)):
                            text = f.read_text(errors="replace")
                            parse.parse_json_lines(parse.compact_objects(text), rows)
                        else:
                            fh.seek(0)
                            parse.parse_json_lines(fh, rows)
                elif kind == "prom":
                    self._read_prom(f, rows)
            except OSError as e:
                self.problems.add("file_unreadable", str(f), str(e))

    def _read_prom(self, f: Path, rows: parse.Rows) -> None:
        mtime_ms = f.stat().st_mtime_ns // 1_000_000
        parse.parse_prom(f.read_text(errors="replace"), mtime_ms, rows)

    def _live(self, root: Path, rows: parse.Rows) -> None:
        seen: set[str] = set()
        for f in self._files(root) if root.exists() else []:
            key = str(f)
            seen.add(key)
            if key in self._ignored:
                continue
            if key in self._tailers:
                kind: str | None = "json"
            elif f.suffix == ".prom" or key in self._prom_seen:
                kind = "prom" if self.cfg.format in ("auto", "prom") else None
            else:
                kind = self._kind(f)
                if kind is None:
                    self._ignored.add(key)
            if kind == "prom":
                self._live_prom(f, rows)
            elif kind == "json":
                tailer = self._tailers.get(key)
                if tailer is None:
                    tailer = self._tailers[key] = Tailer(
                        f,
                        from_start=self.cfg.from_start or not self._first_scan,
                        resume=self._resume.get(key),
                    )
                try:
                    parse.parse_json_lines(tailer.read(), rows)
                except OSError as e:
                    self.problems.add("file_unreadable", key, str(e))
        for gone in set(self._tailers) - seen:  # deleted (the job's dump dir cleaned up)
            del self._tailers[gone]
        for gone in set(self._prom_seen) - seen:
            del self._prom_seen[gone]
        self._first_scan = False
        self._save_offsets()

    def _live_prom(self, f: Path, rows: parse.Rows) -> None:
        """A textfile is rewritten each interval with the latest collectives: read it when its
        mtime changed, never twice the same version."""
        key = str(f)
        try:
            mtime = f.stat().st_mtime_ns
            if self._prom_seen.get(key) == mtime:
                return
            self._read_prom(f, rows)
            self._prom_seen[key] = mtime
        except OSError as e:
            self.problems.add("file_unreadable", key, str(e))

    def _save_offsets(self) -> None:
        if self.offsets is None:
            return
        pos = {k: p for k, t in self._tailers.items() if (p := t.position()) is not None}
        try:
            self.offsets.save(pos)
        except OSError as e:
            self.problems.add("offsets", str(self.offsets.path), str(e))

    # --- rows -----------------------------------------------------------------------------------
    def _table(self, rows: parse.Rows, local: bool) -> pa.Table:
        c = rows.cols
        n = len(rows)
        buckets = functools.lru_cache(maxsize=256)(parse.size_bucket)
        att: dict[str, list[str]] = {
            k: [""] * n for k in ("pod_uid", "container_id", "namespace", "pod", "job")
        }
        gpus = c["gpu"]
        for i in range(n):
            a = self._attribute(c, i, local)
            for k in att:
                att[k][i] = a[k]
            gpus[i] = a["gpu"]
        cols: dict[str, Any] = {
            "ts": pa.array(c["ts"], pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
            "cluster": [self.cluster] * n,
            "node": c["node"],
            **att,
            "comm_id": c["comm_id"],
            "collective": c["collective"],
            "msg_size_bucket": [buckets(s) for s in c["msg_size_bytes"]],
            "rank": c["rank"],
            "gpu": gpus,
            "pid": c["pid"],
            "n_ranks": c["n_ranks"],
            "n_nodes": c["n_nodes"],
            "coll_sn": c["coll_sn"],
            "msg_size_bytes": c["msg_size_bytes"],
            "exec_time_seconds": [t / 1e6 for t in c["exec_time_us"]],
            "algo_bandwidth_gbs": c["algo_bandwidth_gbs"],
            "bus_bandwidth_gbs": c["bus_bandwidth_gbs"],
            "timing_source": c["timing_source"],
            "format_version": c["format_version"],
            "algorithm": c["algorithm"],
            "protocol": c["protocol"],
            "channels": c["channels"],
            "comm_name": c["comm_name"],
        }
        schema = COLLECTIVE_SAMPLE.arrow_schema
        arrays = [
            v if isinstance(v := cols[f.name], pa.Array) else pa.array(v, f.type) for f in schema
        ]
        return pa.Table.from_arrays(arrays, schema=schema)

    def _attribute(self, c: dict[str, list[Any]], i: int, local: bool) -> dict[str, Any]:
        """The pod of row i: by pid through the proc root when the rank ran in this node's pid
        namespace (hostname = this node, live only); otherwise by pod name = hostname (a pod's
        hostname is its name) when the inventory knows it."""
        host = c["node"][i]
        same = local and host == self.node_name
        return self.attributor.attribute(
            c["pid"][i],
            c["rank"][i],
            c["n_ranks"][i],
            c["n_nodes"][i],
            c["gpu"][i],
            host="" if same else host,
        )


__all__ = ["NcclSource", "PodInfo", "detect"]
