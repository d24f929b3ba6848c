"""The `hdfs` source: NameNode/DataNode /jmx scrapes, DataNode clienttrace transfers mapped to
IDC/rack, the replica placement audit (fsck / WebHDFS) and the DCI budget; live or `--from FILE`.

Reads HTTP /jmx, log files, fsck output and the topology; writes record batches only. Never
assigns an unknown host to an IDC, and never lets one bad endpoint or line stop the others.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import subprocess
import time
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa

from exporters.common.tail import Tailer, TailOffsets
from exporters.hdfs import clienttrace, dci, fsck, jmx, placement, webhdfs
from exporters.hdfs.config import HdfsConfig
from exporters.hdfs.topology import Topology, host_of
from telemetry.contracts import Batch
from telemetry.errors import UserError
from telemetry.pipeline import BaseSource, ConfigFlags
from telemetry.records import DCI_USAGE, HDFS_TRANSFER

log = logging.getLogger(__name__)

_SNIFF_BYTES = 256 * 1024
# The `reason` label values of railscope_component_failed_total{component="source:hdfs"}.
REASONS = (
    "jmx_timeout",
    "jmx_invalid_json",
    "jmx_http_error",
    "jmx_unreachable",
    "livenodes",
    "clienttrace_unreadable",
    "clienttrace_offsets",
    *(f"clienttrace_{r}" for r in clienttrace.REASONS),
    *(f"fsck_{r}" for r in fsck.REASONS),
    "fsck_command",
)


def detect(path: Path, head: bytes) -> str:
    """'json' | 'clienttrace' | 'fsck' from a file's content (never from its name); a
    gzip-compressed file (a `.gz` rotated log) is recognized by what it holds."""
    if clienttrace.is_gzip(head):
        head = clienttrace.gunzip_head(head, _SNIFF_BYTES)
    text = head.decode("utf-8", errors="replace")
    if text.lstrip().startswith("{"):
        return "json"
    if fsck.looks_like_fsck(text):
        return "fsck"
    if clienttrace.looks_like_clienttrace(text):
        return "clienttrace"
    raise UserError(
        f"{path}: not recognized: expected Hadoop /jmx JSON, WebHDFS block-location JSON, "
        "DataNode clienttrace log lines or `hdfs fsck -files -blocks -racks` output"
    )


class HdfsSource(BaseSource):
    """HDFS over several IDCs.

    Live: scrape every NameNode's /jmx, discover DataNodes from LiveNodes and scrape them
    concurrently; follow DataNode clienttrace logs; map every host to /IDC/rack; sum bytes per IDC
    pair (DCI budget); run fsck on a schedule and audit replica placement against the policy.
    Offline: --from FILE|DIR recognizes /jmx JSON, WebHDFS block locations, clienttrace logs and
    fsck output by content. See docs/hdfs.md.
    """

    name = "hdfs"
    unit = "entries"  # each /jmx document, clienttrace log line and fsck/WebHDFS block read
    reasons = REASONS
    Config = HdfsConfig
    cfg: HdfsConfig

    def __init__(
        self,
        config: HdfsConfig | None = None,
        *,
        from_path: str | None = None,
        hdfs_path: str | None = None,
        datanode: str = "",
        clock: Any = time.time,
        offsets: TailOffsets | None = None,
    ) -> None:
        super().__init__(config, from_path)
        self.hdfs_path = hdfs_path
        self.datanode = datanode
        self.clock = clock
        self.tz = clienttrace.local_tz(self.cfg.log_timezone)
        self.policy = placement.Policy(
            mode=self.cfg.policy.mode,
            replicas=self.cfg.policy.replicas,
            per_idc=self.cfg.policy.per_idc,
            idcs=tuple(self.cfg.policy.idcs),
            distinct_racks=self.cfg.policy.distinct_racks,
        )
        # An empty topology (none configured) still counts every host it cannot place.
        self.topology = Topology(unknown_racks=tuple(self.cfg.unknown_racks))
        if self.cfg.topology_file:
            self.topology = Topology.from_table(self.cfg.topology_file, self.cfg.unknown_racks)
        self.budget = dci.Budget(
            self.cfg.dci.interval_seconds, dci.capacities(self.cfg.dci.capacity)
        )
        # A restart resumes each log where the last run stopped (offsets), else per from_start.
        self.offsets = offsets
        resume = offsets.load() if offsets else {}
        self.tailers = [
            Tailer(lc.path, from_start=lc.from_start, resume=resume.get(lc.path))
            for lc in self.cfg.clienttrace
        ]
        self._last_fsck = 0.0
        self._scripted: set[str] = set()
        self._ssl = None
        if self.cfg.tls.ca_file or self.cfg.tls.cert_file or not self.cfg.tls.verify:
            t = self.cfg.tls
            self._ssl = jmx.ssl_context(t.ca_file, t.cert_file, t.key_file, t.verify)
        self._auth = (
            jmx.spnego_auth(self.cfg.kerberos.principal) if self.cfg.kerberos.enabled else None
        )
        self.cross_idc_reads: list[dict[str, Any]] = []  # the latest cycle's, for reports and logs

    # --- CLI ------------------------------------------------------------------------------------
    config_flags: ClassVar[ConfigFlags] = {
        "--topology": ("topology_file", "FILE"),
        "--topology-script": ("topology_script", "PATH"),
        "--namenode": ("namenodes", "URL"),
        "--policy": ("policy.mode", None),
        "--replicas": ("policy.replicas", "N"),
        "--per-idc": ("policy.per_idc", "N"),  # and the per_idc mode
        "--dci-interval": ("dci.interval_seconds", "SECONDS"),
        "--datanode": ("datanode", "HOST:PORT"),
        "--hdfs-path": ("hdfs_path", "PATH"),
        "--log-timezone": ("log_timezone", "TZ"),
    }

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        cls.add_config_flags(p).add_argument(
            "--dci-capacity",
            action="append",
            metavar="PAIR=RATE",
            help="budget, e.g. idc1-idc2=100Gbit (dci.capacity, repeatable)",
        )

    @classmethod
    def fold_args(cls, args: argparse.Namespace, section: dict[str, Any]) -> dict[str, Any]:
        """The `sources.hdfs` section with this command line's flags on top."""
        out = cls.fold_config_flags(args, section)
        if args.per_idc is not None:
            out["policy"]["mode"] = "per_idc"
        for item in args.dci_capacity or []:
            k, eq, v = item.partition("=")
            if not eq:
                raise UserError(
                    f"--dci-capacity {item!r}: expected PAIR=RATE, e.g. idc1-idc2=100Gbit"
                )
            d = out["dci"] = dict(out.get("dci") or {})
            d["capacity"] = {**(d.get("capacity") or {}), k: v}
        return out

    @classmethod
    def build(cls, c: HdfsConfig, cfg: Any, *, from_path: str | None, once: bool) -> HdfsSource:
        if not from_path and not (c.namenodes or c.datanodes or c.clienttrace or c.fsck_command):
            raise UserError(
                "hdfs: nothing to collect: set sources.hdfs.namenodes / clienttrace / fsck_command "
                "(or --namenode URL), or read a capture with --from FILE"
            )
        if from_path:
            # Check the capture before the pipeline starts: a bad --from is exit 2, not a log line.
            p = Path(from_path)
            if not p.exists():
                raise UserError(f"{p}: no such file or directory")
            if p.is_file():
                try:
                    with p.open("rb") as fh:
                        detect(p, fh.read(_SNIFF_BYTES))
                except OSError as e:
                    raise UserError(f"{p}: cannot read: {e.strerror or e}") from None
        offsets = None
        if c.clienttrace and not from_path:
            spool = getattr(getattr(cfg, "sink", None), "spool_dir", None) or "."
            offsets = TailOffsets(c.offsets_file or Path(spool) / "hdfs-clienttrace-offsets.json")
        return cls(
            c, from_path=from_path, hdfs_path=c.hdfs_path, datanode=c.datanode, offsets=offsets
        )

    # --- collection -----------------------------------------------------------------------------
    def _collect(self) -> list[Batch]:
        self.topology.unknown.clear()
        out: list[Batch] = []
        if self.from_path is not None:
            out += self._offline(self.from_path)
            out += self._dci_rows(None)
        else:
            out += self._live()
            out += self._dci_rows(int(self.clock() * 1000))
        self._report_unknown()
        return [b for b in out if b.num_rows]

    def _offline(self, path: Path) -> list[Batch]:
        if path.is_dir():
            # rotated logs oldest first (x.log.2.gz, x.log.1, x.log): transfers in log order
            files = sorted(
                (p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")),
                key=clienttrace.rotation_order,
            )
            if not files:
                raise UserError(f"{path}: empty directory")
        elif path.exists():
            files = [path]
        else:
            raise UserError(f"{path}: no such file or directory")
        texts: dict[str, list[Path]] = {"clienttrace": [], "fsck": []}
        jsons: list[tuple[Path, Any]] = []
        for f in files:
            try:
                with f.open("rb") as fh:
                    head = fh.read(_SNIFF_BYTES)
            except OSError as e:
                raise UserError(f"{f}: cannot read: {e.strerror or e}") from None
            try:
                kind = detect(f, head)
            except UserError as e:
                if len(files) == 1:
                    raise
                # A capture directory may hold notes (README, PROVENANCE): skip them, loudly.
                self.stats.dropped += 1
                log.warning("%s (skipped)", e)
                continue
            if kind == "json":
                try:
                    with clienttrace.open_text(f) as fh:
                        jsons.append((f, json.loads(fh.read())))
                except json.JSONDecodeError as e:
                    raise UserError(
                        f"{f}: invalid JSON: {e.msg} at line {e.lineno} column {e.colno}"
                    ) from None
            else:
                texts[kind].append(f)
        hosts: set[str] = set()
        parsed_traces = clienttrace.Transfers()
        for f in texts["clienttrace"]:
            try:
                with clienttrace.open_text(f) as fh:
                    self._parse_trace(fh, self.datanode, parsed_traces, origin=str(f))
            except (OSError, EOFError) as e:  # a truncated .gz: keep what was read before it
                self.problems.add("clienttrace_unreadable", str(f), str(e))
        reports: list[fsck.BlockInfo] = []
        for f in texts["fsck"]:
            with clienttrace.open_text(f) as fh:
                rep = fsck.parse_fsck(fh)
            for reason, n in rep.errors.items():
                self.problems.add(f"fsck_{reason}", str(f), f"{n} fsck line(s) not understood", n)
            reports += rep.blocks
        samples: list[tuple[str, str, dict[str, Any], str]] = []
        for f, doc in jsons:
            role = jmx.role_of(doc)
            if role:
                samples.append((role, _jmx_name(doc, role, f.stem), doc, ""))
            elif webhdfs.looks_like_webhdfs(doc):
                reports += webhdfs.parse_block_locations(
                    doc, self.hdfs_path or "/" + f.stem, origin=str(f)
                )
            else:
                msg = f"{f}: JSON but neither a Hadoop /jmx document nor WebHDFS block locations"
                if len(files) == 1:
                    raise UserError(msg)
                self.stats.dropped += 1
                log.warning("%s (skipped)", msg)
        if self.cfg.topology_script:  # only the script needs the host list up front
            hosts |= {host_of(a) for a in (*parsed_traces.src, *parsed_traces.dest)}
            hosts |= {host_of(h) for b in reports for h, _ in b.replicas}
            self._ensure_topology(hosts)
        self.stats.received += len(samples) + len(reports)
        out: list[Batch] = []
        out += self._jmx_batches(samples)
        out += self._transfer_batches(parsed_traces)
        out += self._placement_batches(reports)
        return out

    def _live(self) -> list[Batch]:
        samples = self._scrape_all()
        traces = clienttrace.Transfers()
        for lc, tailer in zip(self.cfg.clienttrace, self.tailers, strict=True):
            try:
                lines = tailer.read()
            except OSError as e:
                self.problems.add("clienttrace_unreadable", lc.path, str(e))
                continue
            self._parse_trace(lines, lc.datanode, traces, origin=lc.path)
        self._save_offsets()
        reports: list[fsck.BlockInfo] = []
        now = self.clock()
        if self.cfg.fsck_command and now - self._last_fsck >= self.cfg.fsck_every_seconds:
            self._last_fsck = now
            reports = self._run_fsck()
        if self.cfg.topology_script:
            hosts = {host_of(a) for a in (*traces.src, *traces.dest)}
            self._ensure_topology(hosts | {host_of(h) for b in reports for h, _ in b.replicas})
        self.stats.received += sum(1 for s in samples if not s[3]) + len(reports)
        return (
            self._jmx_batches(samples)
            + self._transfer_batches(traces)
            + self._placement_batches(reports)
        )

    def _run_fsck(self) -> list[fsck.BlockInfo]:
        cmd = self.cfg.fsck_command
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            self.problems.add("fsck_command", " ".join(cmd), str(e))
            return []
        # fsck exits 1 when the filesystem is CORRUPT: the report is still what we want.
        rep = fsck.parse_fsck(res.stdout.splitlines())
        if not rep.blocks and res.returncode != 0:
            detail = f"exit {res.returncode}: {res.stderr.strip()[:200]}"
            self.problems.add("fsck_command", " ".join(cmd), detail)
        return rep.blocks

    # --- JMX --------------------------------------------------------------------------------------
    def _scrape_all(self) -> list[tuple[str, str, dict[str, Any], str]]:
        """[(role, endpoint, doc, error)] for every NameNode then every DataNode."""
        c = self.cfg
        kw: dict[str, Any] = {
            "timeout": c.timeout_seconds,
            "concurrency": c.concurrency,
            "ssl_ctx": self._ssl,
            "auth": self._auth,
        }
        out: list[tuple[str, str, dict[str, Any], str]] = []
        dns: list[str] = list(c.datanodes)
        if c.namenodes:
            for r in asyncio.run(jmx.scrape(c.namenodes, **kw)):
                out.append(("namenode", _endpoint(r.endpoint), r.doc or {}, r.error))
                if r.doc is not None and c.discover_datanodes and not c.datanodes:
                    try:
                        nodes = jmx.live_nodes(r.doc, partial(self._bad_live_node, r.endpoint))
                    except UserError as e:
                        self.problems.add("livenodes", f"NameNode {r.endpoint}", str(e))
                        continue
                    for n in nodes:
                        addr = n.info_secure_addr if c.datanode_scheme == "https" else n.info_addr
                        dns.append(f"{c.datanode_scheme}://{addr}")
        dns = list(dict.fromkeys(dns))  # HA pair: both NameNodes list the same DataNodes
        if dns:
            for r in asyncio.run(jmx.scrape(dns, **kw)):
                out.append(("datanode", _endpoint(r.endpoint), r.doc or {}, r.error))
        return out

    def _bad_live_node(self, namenode: str, name: str, why: str) -> None:
        """One malformed LiveNodes entry: that DataNode's error; the others are scraped."""
        self.problems.add("livenodes", f"DataNode {name} (LiveNodes of {namenode})", why)

    def _jmx_batches(self, samples: list[tuple[str, str, dict[str, Any], str]]) -> list[Batch]:
        ts = int(self.clock() * 1000)
        nn: list[dict[str, Any]] = []
        dn: list[dict[str, Any]] = []
        for role, endpoint, doc, error in samples:
            if error:
                # the row and the log line keep the details; the label says which kind of failure
                self.problems.add(
                    _scrape_reason(error), f"{role} {endpoint}", f"scrape failed: {error}"
                )
                row: dict[str, Any] = {"ts": ts, "up": 0, "error": error}
            else:
                row = {"ts": ts, "up": 1, "error": "", **jmx.sample(doc, role)}
            if role == "namenode":
                nn.append({"namenode": endpoint, **row})
            else:
                loc = self.topology.lookup(endpoint)
                dn.append({"datanode": endpoint, "idc": loc.idc if loc else "", **row})
        out = []
        if nn:
            out.append(Batch.from_rows("hdfs_namenode_sample", nn))
        if dn:
            out.append(Batch.from_rows("hdfs_datanode_sample", dn))
        return out

    # --- transfers ------------------------------------------------------------------------------
    def _parse_trace(
        self, lines: Any, datanode: str, into: clienttrace.Transfers, origin: str
    ) -> None:
        st = clienttrace.ParseStats()
        clienttrace.parse_lines(lines, tz=self.tz, datanode=datanode, stats=st, out=into)
        self.stats.received += st.lines
        self.stats.dropped += st.skipped
        for reason, n in st.errors.items():
            self.problems.add(
                f"clienttrace_{reason}", origin, f"{n} clienttrace line(s) rejected", n
            )

    def _save_offsets(self) -> None:
        """Persist where each log was read up to, right after reading it: a restart resumes there
        (a crash before the cycle's records reach a sink loses them; none is counted twice)."""
        if self.offsets is None:
            return
        pos = {
            lc.path: p
            for lc, t in zip(self.cfg.clienttrace, self.tailers, strict=True)
            if (p := t.position()) is not None
        }
        try:
            self.offsets.save(pos)
        except OSError as e:
            self.problems.add("clienttrace_offsets", str(self.offsets.path), str(e))

    def _ensure_topology(self, hosts: set[str]) -> None:
        if self.cfg.topology_script and hosts:
            todo = hosts - set(self.topology.hosts) - self._scripted
            if todo:
                t = Topology.from_script(
                    self.cfg.topology_script, todo, unknown_racks=self.cfg.unknown_racks
                )
                self.topology.hosts.update(t.hosts)
                self._scripted |= todo  # asked once; a host the script does not know stays unknown

    def _transfer_batches(self, t: clienttrace.Transfers) -> list[Batch]:
        if not len(t):
            return []
        topo = self.topology
        cache: dict[str, tuple[str, str]] = {}

        def where(addr: str) -> tuple[str, str]:
            # clienttrace addresses are 'ip:port' (v4): skip host_of's general path for them
            h = addr[: addr.find(":")] if addr.count(":") == 1 else host_of(addr)
            r = cache.get(h)
            if r is None:
                loc = topo.lookup(h)
                r = cache[h] = (loc.idc, loc.rack) if loc else ("", "")
            elif not r[0]:
                topo.unknown[h] += 1
            return r

        s = [where(a) for a in t.src]
        d = [where(a) for a in t.dest]
        src_idc = [x[0] for x in s]
        dest_idc = [x[0] for x in d]
        cross = [bool(a and b and a != b) for a, b in zip(src_idc, dest_idc, strict=True)]
        self.cross_idc_reads = [
            {
                "ts": t.ts[i],
                "client_id": t.client_id[i],
                "block_id": t.block_id[i],
                "src": t.src[i],
                "dest": t.dest[i],
                "src_idc": src_idc[i],
                "dest_idc": dest_idc[i],
                "bytes": t.bytes[i],
            }
            for i in [
                i
                for i, (c, o) in enumerate(zip(cross, t.op, strict=True))
                if c and o == "HDFS_READ"
            ]
        ]
        self.stats.extra["cross_idc_reads"] = float(len(self.cross_idc_reads))
        for r in self.cross_idc_reads[:5]:
            log.warning(
                "hdfs: cross-IDC read %s -> %s: client %s block %s (%d bytes)",
                r["src_idc"],
                r["dest_idc"],
                r["client_id"],
                r["block_id"],
                r["bytes"],
            )
        self.budget.add(t.ts, src_idc, dest_idc, t.op, t.write_mode, t.bytes)
        cols = {
            "ts": t.ts,
            "cluster": [""] * len(t),
            "datanode": t.datanode,
            "op": t.op,
            "src": t.src,
            "dest": t.dest,
            "src_idc": src_idc,
            "dest_idc": dest_idc,
            "src_rack": [x[1] for x in s],
            "dest_rack": [x[1] for x in d],
            "bytes": t.bytes,
            "client_id": t.client_id,
            "block_id": t.block_id,
            "duration_seconds": t.duration_seconds,
            "cross_idc": cross,
            "write_mode": t.write_mode,
        }
        return [Batch(HDFS_TRANSFER, pa.Table.from_pydict(cols, schema=HDFS_TRANSFER.arrow_schema))]

    def _dci_rows(self, before_ms: int | None) -> list[Batch]:
        rows = self.budget.flush(before_ms)
        self.stats.extra["dci_unplaced_bytes"] = float(self.budget.unplaced_bytes)
        return [Batch.from_rows(DCI_USAGE, rows)] if rows else []

    # --- placement --------------------------------------------------------------------------------
    def _placement_batches(self, blocks: list[fsck.BlockInfo]) -> list[Batch]:
        if not blocks:
            return []
        rows, totals = placement.audit(
            blocks,
            self.policy,
            self.topology,
            ts=int(self.clock() * 1000),
            unknown_racks=self.cfg.unknown_racks,
            prefix_depth=self.cfg.prefix_depth,
        )
        bad = sum(r["violation"] for r in rows)
        self.stats.extra["placement_violations"] = float(bad)
        if bad:
            first = next(r for r in rows if r["violation"])
            log.warning(
                "hdfs: %d of %d block(s) break the placement policy, e.g. %s %s: %s",
                bad,
                len(rows),
                first["path"],
                first["block_id"],
                first["reason"],
            )
        return [
            Batch.from_rows("hdfs_block_placement", rows),
            Batch.from_rows("hdfs_placement_total", totals),
        ]

    def _report_unknown(self) -> None:
        unknown = self.topology.unknown
        self.stats.extra["unknown_hosts"] = float(len(unknown))
        if unknown:
            top = sorted(unknown.items(), key=lambda kv: -kv[1])[:10]
            log.warning(
                "hdfs: %d host(s) not in the topology (never assigned an IDC): %s",
                len(unknown),
                ", ".join(f"{h} ({n}x)" for h, n in top),
            )
        if not len(self.topology) and not self.cfg.topology_script:
            log.info("hdfs: no topology configured (--topology / topology_file): IDCs are unknown")


def _scrape_reason(error: str) -> str:
    """The bounded reason of a failed /jmx scrape from its error text (see jmx.scrape)."""
    if error.startswith("timeout"):
        return "jmx_timeout"
    if error.startswith("invalid JSON"):
        return "jmx_invalid_json"
    if error.startswith("HTTP "):
        return "jmx_http_error"
    return "jmx_unreachable"


def _endpoint(base: str) -> str:
    """'http://dn1:9864/' -> 'dn1:9864' (the series label)."""
    return base.split("://", 1)[-1].rstrip("/")


def _jmx_name(doc: dict[str, Any], role: str, fallback: str) -> str:
    for b in doc.get("beans", []):
        if not isinstance(b, dict):
            continue
        if (
            role == "namenode"
            and str(b.get("name", "")).endswith("name=NameNodeStatus")
            and b.get("HostAndPort")
        ):
            return str(b["HostAndPort"])
        if (
            role == "datanode"
            and "DataNodeActivity-" in str(b.get("name", ""))
            and b.get("tag.Hostname")
        ):
            return str(b["tag.Hostname"])
    return fallback
