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
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, field_validator

from exporters.hdfs import clienttrace, dci, fsck, jmx, placement, webhdfs
from exporters.hdfs.topology import DEFAULT_UNKNOWN_RACKS, Topology, host_of
from telemetry.errors import UserError
from telemetry.pipeline import BaseSource, Batch, register_source
from telemetry.records import DCI_USAGE, HDFS_TRANSFER

log = logging.getLogger(__name__)

_SNIFF_BYTES = 256 * 1024


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TlsConfig(_M):
    ca_file: str | None = Field(
        default=None, description="CA bundle that signed the NameNode/DataNode HTTPS certs."
    )
    cert_file: str | None = Field(default=None, description="Client certificate (mutual TLS).")
    key_file: str | None = Field(default=None, description="Key of the client certificate.")
    verify: bool = Field(
        default=True, description="Verify server certificates (never turn off in production)."
    )


class KerberosConfig(_M):
    enabled: bool = Field(
        default=False, description="SPNEGO on /jmx (hadoop.http.authentication.type=kerberos)."
    )
    principal: str | None = Field(
        default=None, description="Client principal; default: the ticket cache's."
    )


class LogConfig(_M):
    path: str = Field(
        description="DataNode log file with clienttrace lines (followed across rotation)."
    )
    datanode: str = Field(
        default="",
        description="host:port of the DataNode writing it (needed for replication lines).",
    )
    from_start: bool = Field(
        default=False, description="Read the existing content on the first cycle."
    )


class PolicyConfig(_M):
    mode: Literal["per_idc", "rack"] = Field(
        default="rack", description="per_idc: N per IDC; rack: HDFS default."
    )
    replicas: int = Field(default=3, ge=1, le=32, description="Replicas every block must have.")
    per_idc: int = Field(default=2, ge=1, le=32, description="Replicas per IDC (per_idc mode).")
    idcs: list[str] = Field(
        default_factory=list, description="IDCs that must hold replicas (default: all known)."
    )
    distinct_racks: bool = Field(
        default=False, description="per_idc: the replicas inside one IDC on distinct racks."
    )


class DciConfig(_M):
    interval_seconds: float = Field(
        default=60.0, ge=1.0, le=86400.0, description="Budget interval."
    )
    capacity: dict[str, Any] = Field(
        default_factory=dict, description="'idc1-idc2: 100Gbit' (each way) or 'a->b'."
    )

    @field_validator("capacity")
    @classmethod
    def _cap(cls, v: dict[str, Any]) -> dict[str, Any]:
        dci.capacities(v)  # ValueError names the bad key/rate
        return v


class HdfsConfig(_M):
    namenodes: list[str] = Field(
        default_factory=list, description="NameNode HTTP base URLs (http://nn:9870)."
    )
    datanodes: list[str] = Field(
        default_factory=list, description="DataNode base URLs (default: from LiveNodes)."
    )
    discover_datanodes: bool = Field(
        default=True, description="Scrape every DataNode in NameNodeInfo.LiveNodes."
    )
    datanode_scheme: Literal["http", "https"] = "http"
    timeout_seconds: float = Field(
        default=5.0, gt=0, le=300, description="Per-endpoint /jmx timeout."
    )
    concurrency: int = Field(default=32, ge=1, le=1024, description="Scrapes in flight at once.")
    tls: TlsConfig = Field(default_factory=TlsConfig)
    kerberos: KerberosConfig = Field(default_factory=KerberosConfig)
    clienttrace: list[LogConfig] = Field(
        default_factory=list, description="DataNode logs to follow."
    )
    log_timezone: str = Field(
        default="UTC", description="Time zone of the log4j timestamps (UTC, +08:00, Asia/Shanghai)."
    )
    topology_file: str | None = Field(
        default=None, description="Table 'HOST /IDC/RACK' (net.topology.table.file.name)."
    )
    topology_script: str | None = Field(
        default=None, description="net.topology.script.file.name: run with hosts."
    )
    unknown_racks: list[str] = Field(default_factory=lambda: list(DEFAULT_UNKNOWN_RACKS))
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    prefix_depth: int = Field(
        default=2, ge=0, le=16, description="Placement totals per path prefix up to this depth."
    )
    fsck_command: list[str] = Field(
        default_factory=list, description="e.g. [hdfs, fsck, /, -files, -blocks, -racks]"
    )
    fsck_every_seconds: float = Field(
        default=3600.0, ge=60.0, description="How often the live source runs fsck."
    )
    dci: DciConfig = Field(default_factory=DciConfig)

    @field_validator("log_timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        try:
            clienttrace.local_tz(v)
        except Exception:
            raise ValueError(f"unknown time zone {v!r}") from None
        return v


def detect(path: Path, head: bytes) -> str:
    """'jmx' | 'webhdfs' | 'clienttrace' | 'fsck' from a file's content (never from its name)."""
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


@register_source(
    "hdfs",
    help="HDFS across IDCs: /jmx, clienttrace transfers by IDC pair, replica placement audit, DCI budget",
    kinds=[
        "hdfs_transfer",
        "hdfs_block_placement",
        "hdfs_placement_total",
        "hdfs_namenode_sample",
        "hdfs_datanode_sample",
        "dci_usage",
    ],
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
    Config = HdfsConfig

    def __init__(
        self,
        config: HdfsConfig | None = None,
        *,
        from_path: str | None = None,
        hdfs_path: str | None = None,
        datanode: str = "",
        clock: Any = time.time,
    ) -> None:
        super().__init__()
        self.cfg = config or HdfsConfig()
        self.from_path = Path(from_path) if from_path else None
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
        self.tailers = [
            clienttrace.Tailer(lc.path, from_start=lc.from_start) for lc in self.cfg.clienttrace
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
    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        g = p.add_argument_group("hdfs options")
        g.add_argument(
            "--topology", metavar="FILE", help="host -> /IDC/rack table (overrides topology_file)"
        )
        g.add_argument(
            "--topology-script",
            metavar="PATH",
            help="net.topology.script to run with the hosts seen",
        )
        g.add_argument(
            "--namenode", action="append", metavar="URL", help="NameNode base URL (repeatable)"
        )
        g.add_argument("--policy", choices=["per_idc", "rack"], help="placement policy mode")
        g.add_argument("--replicas", type=int, metavar="N", help="replicas every block must have")
        g.add_argument("--per-idc", type=int, metavar="N", help="replicas per IDC (per_idc policy)")
        g.add_argument(
            "--dci-capacity",
            action="append",
            metavar="PAIR=RATE",
            help="budget, e.g. idc1-idc2=100Gbit (repeatable)",
        )
        g.add_argument("--dci-interval", type=float, metavar="SECONDS", help="DCI budget interval")
        g.add_argument(
            "--datanode",
            metavar="HOST:PORT",
            default="",
            help="DataNode that wrote the --from log (for 'Received ... from' replication lines)",
        )
        g.add_argument(
            "--hdfs-path",
            metavar="PATH",
            help="file path of a --from WebHDFS block-location document",
        )
        g.add_argument(
            "--log-timezone", metavar="TZ", help="time zone of log timestamps (default UTC)"
        )

    @classmethod
    def from_args(cls, args: argparse.Namespace, cfg: Any) -> HdfsSource:
        from pydantic import ValidationError

        from telemetry.config import _format

        c: HdfsConfig = cfg.source("hdfs")
        upd: dict[str, Any] = {}
        if args.topology:
            upd["topology_file"] = args.topology
        if args.topology_script:
            upd["topology_script"] = args.topology_script
        if args.namenode:
            upd["namenodes"] = args.namenode
        if args.log_timezone:
            upd["log_timezone"] = args.log_timezone
        pol = c.policy.model_dump()
        if args.policy:
            pol["mode"] = args.policy
        if args.per_idc is not None:
            pol["mode"], pol["per_idc"] = "per_idc", args.per_idc
        if args.replicas is not None:
            pol["replicas"] = args.replicas
        d = c.dci.model_dump()
        if args.dci_interval:
            d["interval_seconds"] = args.dci_interval
        for item in args.dci_capacity or []:
            k, eq, v = item.partition("=")
            if not eq:
                raise UserError(
                    f"--dci-capacity {item!r}: expected PAIR=RATE, e.g. idc1-idc2=100Gbit"
                )
            d["capacity"][k] = v
        try:
            c = HdfsConfig.model_validate({**c.model_dump(), **upd, "policy": pol, "dci": d})
        except ValidationError as e:
            raise UserError(_format(e, prefix="sources.hdfs", source="hdfs options")) from None
        if not args.from_path and not (
            c.namenodes or c.datanodes or c.clienttrace or c.fsck_command
        ):
            raise UserError(
                "hdfs: nothing to collect: set sources.hdfs.namenodes / clienttrace / fsck_command "
                "(or --namenode URL), or read a capture with --from FILE"
            )
        if args.from_path:
            # Check the capture before the pipeline starts: a bad --from is exit 2, not a log line.
            p = Path(args.from_path)
            if not p.exists():
                raise UserError(f"{p}: no such file or directory")
            if p.is_file():
                try:
                    with p.open("rb") as fh:
                        detect(p, fh.read(_SNIFF_BYTES))
                except OSError as e:
                    raise UserError(f"{p}: cannot read: {e.strerror or e}") from None
        return cls(c, from_path=args.from_path, hdfs_path=args.hdfs_path, datanode=args.datanode)

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
            files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
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
                    jsons.append((f, json.loads(f.read_bytes())))
                except json.JSONDecodeError as e:
                    raise UserError(
                        f"{f}: invalid JSON: {e.msg} at line {e.lineno} column {e.colno}"
                    ) from None
            else:
                texts[kind].append(f)
        self.stats.received += len(files)
        hosts: set[str] = set()
        parsed_traces = clienttrace.Transfers()
        for f in texts["clienttrace"]:
            with f.open(encoding="utf-8", errors="replace") as fh:
                self._parse_trace(fh, self.datanode, parsed_traces, origin=str(f))
        reports: list[fsck.BlockInfo] = []
        for f in texts["fsck"]:
            with f.open(encoding="utf-8", errors="replace") as fh:
                rep = fsck.parse_fsck(fh)
            for reason, n in rep.errors.items():
                self.stats.error(f"fsck {reason}", n)
                log.warning("%s: %d fsck line(s) not understood (%s)", f, n, reason)
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
                self.stats.error(f"log {lc.path}: {type(e).__name__}")
                log.warning("clienttrace log %s: %s", lc.path, e)
                continue
            self._parse_trace(lines, lc.datanode, traces, origin=lc.path)
        reports: list[fsck.BlockInfo] = []
        now = self.clock()
        if self.cfg.fsck_command and now - self._last_fsck >= self.cfg.fsck_every_seconds:
            self._last_fsck = now
            reports = self._run_fsck()
        if self.cfg.topology_script:
            hosts = {host_of(a) for a in (*traces.src, *traces.dest)}
            self._ensure_topology(hosts | {host_of(h) for b in reports for h, _ in b.replicas})
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
            self.stats.error("fsck command")
            log.warning("fsck %s: %s", " ".join(cmd), e)
            return []
        # fsck exits 1 when the filesystem is CORRUPT: the report is still what we want.
        rep = fsck.parse_fsck(res.stdout.splitlines())
        if not rep.blocks and res.returncode != 0:
            self.stats.error("fsck command")
            log.warning(
                "fsck %s: exit %d: %s", " ".join(cmd), res.returncode, res.stderr.strip()[:200]
            )
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
                        nodes = jmx.live_nodes(r.doc)
                    except UserError as e:
                        self.stats.error(f"livenodes {_endpoint(r.endpoint)}")
                        log.warning("NameNode %s: %s", r.endpoint, e)
                        continue
                    for n in nodes:
                        addr = n.info_secure_addr if c.datanode_scheme == "https" else n.info_addr
                        dns.append(f"{c.datanode_scheme}://{addr}")
        dns = list(dict.fromkeys(dns))  # HA pair: both NameNodes list the same DataNodes
        if dns:
            for r in asyncio.run(jmx.scrape(dns, **kw)):
                out.append(("datanode", _endpoint(r.endpoint), r.doc or {}, r.error))
        return out

    def _jmx_batches(self, samples: list[tuple[str, str, dict[str, Any], str]]) -> list[Batch]:
        ts = int(self.clock() * 1000)
        nn: list[dict[str, Any]] = []
        dn: list[dict[str, Any]] = []
        for role, endpoint, doc, error in samples:
            if error:
                # short reason for the self-metric label: 'timeout after 5s', 'invalid JSON',
                # 'HTTP 500', 'ClientConnectorError'; the log line and the row keep the details
                short = error.split(" (")[0].split(":")[0]
                self.stats.error(f"jmx {role} {endpoint}: {short}")
                log.warning("hdfs: %s %s: scrape failed: %s", role, endpoint, error)
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
            self.stats.error(f"clienttrace {reason}", n)
            log.warning("%s: %d clienttrace line(s) rejected: %s", origin, n, reason)

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
