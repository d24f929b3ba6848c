"""The `logs` source: pods' CRI logs and the kernel log -> `log_event` records of the lines the
grammar recognises (exporters/logs/grammar.py). Live from /var/log/pods and /dev/kmsg, or
`--from FILE|DIR` (CRI files or a pods tree, `kubectl logs` / terminal text, dmesg, journalctl -k,
each by content).

A pod's identity (namespace, pod, uid, container) comes from its log file's path, never from a
line. Unmatched lines are counted, never stored. Bad input (binary, invalid UTF-8, overlong lines,
bad timestamps, a file truncated or deleted under the reader, a kmsg overrun) is counted under a
bounded reason and never stops the rest. See docs/logs.md.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

from exporters.common.tail import (
    CHUNK_BYTES,
    Checkpoints,
    FileGone,
    FileKey,
    Position,
    Truncated,
    file_key,
    locate,
    read_chunks,
)
from exporters.logs import kmsg as kmsg_mod
from exporters.logs.config import LogsConfig
from exporters.logs.formats import Clock, last_mono_usec, sniff
from exporters.logs.limits import TokenBucket
from exporters.logs.scan import Counts, Hit, Scanner
from telemetry.contracts import Batch
from telemetry.errors import UserError
from telemetry.pipeline import BaseSource, ConfigFlags
from telemetry.records import LOG_EVENT

log = logging.getLogger(__name__)

# Counts of exporters/logs/scan.Counts -> the reason each is reported under.
_COUNT_REASONS = {
    "binary": "binary_line",
    "invalid_utf8": "invalid_utf8",
    "too_long": "line_too_long",
    "bad_timestamp": "bad_timestamp",
    "rate_limited": "rate_limited",
}
REASONS = (
    *_COUNT_REASONS.values(),
    "file_truncated",
    "file_vanished",
    "file_unreadable",
    "kmsg_overrun",
    "kmsg_unreadable",
    "checkpoint",
)
_SNIFF_BYTES = 65536
_TAIL_BYTES = 65536


@dataclass(frozen=True)
class PodId:
    namespace: str
    pod: str
    uid: str
    container: str


def pod_identity(path: Path) -> PodId | None:
    """namespace, pod, uid and container of `<namespace>_<pod>_<uid>/<container>/<n>.log`
    (namespace and pod names cannot hold '_'); None for a path not shaped so."""
    container = path.parent.name
    ns, sep, rest = path.parent.parent.name.partition("_")
    pod, sep2, uid = rest.rpartition("_")
    if not (sep and sep2 and ns and pod and uid and container):
        return None
    return PodId(ns, pod, uid, container)


def _is_log(name: str) -> bool:
    """A CRI log or its uncompressed rotation (N.log, N.log.20240101-120000); not .gz, .tmp."""
    if name.endswith((".gz", ".tmp")):
        return False
    return name.endswith(".log") or ".log." in name


@dataclass
class _Followed:
    key: FileKey
    path: Path
    pos: Position
    scanner: Scanner
    pod: PodId | None
    at_eof: bool = False  # the last read reached the end: its going away loses nothing seen


def _pod_key(pod: PodId | None) -> tuple[str, str, str] | None:
    """The token bucket's key: the pod, all its containers together."""
    return (pod.namespace, pod.pod, pod.uid) if pod else None


def _to_json(v: Any) -> Any:
    return str(v)


class LogsSource(BaseSource):
    """Pod logs (CRI files under /var/log/pods) and the kernel log (/dev/kmsg) as typed events.

    Live: follows every <namespace>_<pod>_<uid>/<container>/N.log under sources.logs.pods_dir
    (rotation by rename and copytruncate survived, offsets by inode checkpointed in
    sources.logs.state_file, a token bucket per pod) and reads /dev/kmsg (monotonic time turned
    into wall time with the proc root's boot time). Offline: --from FILE|DIR reads CRI files (or a
    pods tree), plain `kubectl logs` / terminal text, dmesg and journalctl -k text, each
    recognised by its content. Only lines the grammar recognises are stored (kind, fields, a
    redacted 512-character excerpt); the rest are counted. See docs/logs.md.
    """

    name = "logs"
    unit = "entries"  # log lines read (matched or not, dropped included)
    reasons = REASONS
    Config = LogsConfig
    cfg: LogsConfig

    config_flags: ClassVar[ConfigFlags] = {
        "--pods-dir": ("pods_dir", "DIR"),
        "--kmsg": ("kmsg", "PATH"),
        "--proc-root": ("proc_root", "DIR"),
        "--state-file": ("state_file", "FILE"),
        "--node-name": ("node_name", "NAME"),
        "--from-start": ("from_start", None),
        "--rate": ("rate_lines_per_second", "LINES"),
    }

    def __init__(
        self,
        config: LogsConfig | None = None,
        *,
        from_path: str | None = None,
        checkpoints: Checkpoints | None = None,
        cluster: str = "",
        kmsg_device: kmsg_mod.KmsgDevice | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        super().__init__(config, from_path)
        self.cluster = cluster
        default_node = "" if from_path else (os.environ.get("NODE_NAME") or socket.gethostname())
        self.node_name = self.cfg.node_name or default_node
        self.checkpoints = checkpoints
        self._clock = clock
        self._followed: dict[FileKey, _Followed] = {}
        self._buckets: dict[tuple[str, str, str] | None, TokenBucket] = {}
        self._resume: dict[FileKey, Position] = {}
        self._extra: dict[str, object] = {}
        self._first_scan = True
        self._turn = 0
        self._budget = 0
        self._kmsg = kmsg_device
        self._kmsg_failed = False
        self._kmsg_scanner: Scanner | None = None
        self.counts = Counts()
        if checkpoints is not None:
            self._load_checkpoints(checkpoints)

    # --- CLI ------------------------------------------------------------------------------------
    @classmethod
    def add_arguments(cls, p: Any) -> None:
        cls.add_config_flags(p)

    @classmethod
    def fold_args(cls, args: Any, section: dict[str, Any]) -> dict[str, Any]:
        return cls.fold_config_flags(args, section)

    @classmethod
    def build(cls, c: LogsConfig, cfg: Any, *, from_path: str | None, once: bool) -> LogsSource:
        if from_path:
            if not Path(from_path).exists():
                raise UserError(f"{from_path}: no such file or directory")
            return cls(c, from_path=from_path, cluster=getattr(cfg, "cluster", ""))
        spool = getattr(getattr(cfg, "sink", None), "spool_dir", None) or "."
        state = c.state_file or str(Path(spool) / "logs-checkpoints.json")
        return cls(c, checkpoints=Checkpoints(state), cluster=getattr(cfg, "cluster", ""))

    # --- collection -----------------------------------------------------------------------------
    def _collect(self) -> list[Batch]:
        rows: list[dict[str, Any]] = []
        before = Counts()
        before.add(self.counts)
        if self.from_path is not None:
            self._offline(self.from_path, rows)
        else:
            if self.cfg.pods_dir:
                self._pods(Path(self.cfg.pods_dir), rows)
            if self.cfg.kmsg:
                self._kernel(rows)
            self._save_checkpoints()
        self._report(before)
        if not rows:
            return []
        return [Batch.from_rows(LOG_EVENT, rows)]

    def _report(self, before: Counts) -> None:
        delta = {k: getattr(self.counts, k) - getattr(before, k) for k in vars(self.counts)}
        self.stats.received += delta["lines"]
        if delta["rate_limited"]:
            self.stats.dropped += delta["rate_limited"]
        extra = self.stats.extra
        unmatched = delta["lines"] - delta["matched"] - delta["rate_limited"]
        extra["matched_lines"] = extra.get("matched_lines", 0.0) + delta["matched"]
        extra["unmatched_lines"] = extra.get("unmatched_lines", 0.0) + max(0, unmatched)
        extra["files_followed"] = float(len(self._followed))

    def _account(self, counts: Counts, subject: str) -> None:
        """Adds one stream's counts to the source's, each bad-input count as a problem naming
        the stream (its file, or the kernel log)."""
        for count, reason in _COUNT_REASONS.items():
            n = getattr(counts, count)
            if n:
                self.problems.add(reason, subject, f"{n} line(s)", n)
        self.counts.add(counts)

    def _row(self, hit: Hit, src: str, file: str, pod: PodId | None) -> dict[str, Any]:
        return {
            "ts": int(hit.ts.timestamp() * 1000),  # epoch ms: the batch needs no Arrow here
            "cluster": self.cluster,
            "node": self.node_name,
            "namespace": pod.namespace if pod else "",
            "pod": pod.pod if pod else "",
            "pod_uid": pod.uid if pod else "",
            "container": pod.container if pod else "",
            "source": src,
            "kind": hit.kind,
            "fields": json.dumps(hit.fields, separators=(",", ":"), default=_to_json),
            "excerpt": hit.excerpt,
            "file": file,
            "line": hit.line,
        }

    def _scanner(self, fmt: str, clock: Clock, line: int = 0) -> Scanner:
        return Scanner(
            fmt,
            clock,
            line=line,
            max_line=self.cfg.max_line_bytes,
            excerpt_chars=self.cfg.excerpt_chars,
        )

    # --- offline: --from ------------------------------------------------------------------------
    def _offline(self, root: Path, rows: list[dict[str, Any]]) -> None:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        if not files:
            raise UserError(f"{root}: empty directory")
        for f in files:
            if f.name.endswith(".gz"):
                continue
            try:
                self._read_capture(f, rows)
            except OSError as e:
                self.problems.add("file_unreadable", str(f), str(e))

    def _read_capture(self, f: Path, rows: list[dict[str, Any]]) -> None:
        st = f.stat()
        mtime = datetime.fromtimestamp(st.st_mtime, UTC)
        with f.open("rb") as fh:
            head = fh.read(_SNIFF_BYTES)
            fmt = sniff(head)
            boot = None
            if fmt in ("dmesg", "kmsg"):  # a capture's clock: its last line was written at mtime
                fh.seek(max(0, st.st_size - _TAIL_BYTES))
                last = last_mono_usec(fh.read(_TAIL_BYTES), fmt)
                boot = mtime - timedelta(microseconds=last) if last is not None else None
            fh.seek(0)
            scanner = self._scanner(fmt, Clock(boot=boot, year=mtime.year, fallback=mtime))
            pod = pod_identity(f) if fmt == "cri" else None
            src = {"cri": "cri", "kmsg": "kmsg"}.get(fmt, "text")
            while data := fh.read(CHUNK_BYTES):
                for hit in scanner.feed(data):
                    rows.append(self._row(hit, src, str(f), pod))
            for hit in scanner.finish():
                rows.append(self._row(hit, src, str(f), pod))
        self._account(scanner.counts, str(f))

    # --- live: pod logs -------------------------------------------------------------------------
    def _bucket(self, pod: PodId | None) -> TokenBucket:
        key = _pod_key(pod)
        b = self._buckets.get(key)
        if b is None:
            kw = {"clock": self._clock} if self._clock is not None else {}
            b = self._buckets[key] = TokenBucket(
                self.cfg.rate_lines_per_second, self.cfg.rate_burst_lines, **kw
            )
        return b

    def _pods(self, root: Path, rows: list[dict[str, Any]]) -> None:
        # the files followed so far first (a rotated one under its new name), then new ones;
        # each cycle starts at another file, so that the read budget passes over them all
        self._budget = self.cfg.max_read_bytes_per_cycle
        keys = list(self._followed)
        if keys:
            start = self._turn % len(keys)
            self._turn += 1
            for key in keys[start:] + keys[:start]:
                if self._budget <= 0:
                    break
                self._read_followed(self._followed[key], rows)
        for path in self._discover(root):
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            key = file_key(st)
            if key in self._followed:
                continue
            resume = self._resume.pop(key, None)
            if resume is not None:
                pos = Position(str(path), resume.offset, resume.line)
            elif self._first_scan and not self.cfg.from_start:
                pos = Position(str(path), st.st_size, _count_lines(path, st.st_size))
            else:
                pos = Position(str(path), 0, 0)
            mtime = datetime.fromtimestamp(st.st_mtime, UTC)
            fw = _Followed(
                key,
                path,
                pos,
                self._scanner("cri", Clock(boot=None, year=mtime.year, fallback=mtime), pos.line),
                pod_identity(path),
            )
            self._followed[key] = fw
            if self._budget > 0:
                self._read_followed(fw, rows)
        self._first_scan = False
        self._resume.clear()  # files of the checkpoint not found again are gone
        live_pods = {_pod_key(fw.pod) for fw in self._followed.values()}
        for pod in [p for p in self._buckets if p not in live_pods]:
            del self._buckets[pod]

    @staticmethod
    def _discover(root: Path) -> list[Path]:
        out: list[Path] = []
        try:
            pods = list(os.scandir(root))
        except (FileNotFoundError, NotADirectoryError):
            return out  # no pod logs on this host: quiet
        for pod in pods:
            try:
                for container in os.scandir(pod.path):
                    for f in os.scandir(container.path):
                        if _is_log(f.name) and f.is_file():
                            out.append(Path(f.path))
            except (FileNotFoundError, NotADirectoryError):
                continue  # a pod directory deleted while listed
        return sorted(out)

    def _read_followed(self, fw: _Followed, rows: list[dict[str, Any]]) -> None:
        try:
            fw.path = locate(fw.path, fw.key)
        except FileGone:
            if fw.at_eof:  # read to its end, then rotated away or deleted: nothing lost
                self._account(fw.scanner.counts, str(fw.path))
                del self._followed[fw.key]
            else:
                self._gone(fw, "gone before its end was read")
            return
        fw.pos.path = str(fw.path)
        bucket = self._bucket(fw.pod)
        budget = bucket.available()
        used = 0
        sc = fw.scanner
        fw.at_eof = False
        try:
            try:
                chunks = read_chunks(fw.path, fw.key, fw.pos, min(CHUNK_BYTES, self._budget))
                for data in chunks:
                    self._budget -= len(data)
                    if budget - used > 0:
                        before = sc.line
                        hits = sc.feed(data, limit=budget - used)
                        used += sc.line - before
                        rows.extend(self._row(h, "cri", str(fw.path), fw.pod) for h in hits)
                    else:
                        sc.skip(data)
                    if self._budget <= 0:
                        break  # the rest in the next cycle
                else:
                    fw.at_eof = True
            except Truncated:
                self.problems.add("file_truncated", str(fw.path), "shorter than read: from 0")
                sc.carry, sc.skipping, sc.line = b"", False, 0
                for data in read_chunks(fw.path, fw.key, fw.pos):
                    before = sc.line
                    hits = sc.feed(data, limit=max(0, budget - used))
                    used += sc.line - before
                    rows.extend(self._row(h, "cri", str(fw.path), fw.pod) for h in hits)
                fw.at_eof = True
        except FileGone:
            self._gone(fw, "deleted while read")
        except OSError as e:
            self.problems.add("file_unreadable", str(fw.path), str(e))
        finally:
            self._account(sc.counts, str(fw.path))
            sc.counts = Counts()
            bucket.take(used)

    def _gone(self, fw: _Followed, why: str) -> None:
        self.problems.add("file_vanished", str(fw.path), why)
        self._account(fw.scanner.counts, str(fw.path))
        del self._followed[fw.key]

    # --- live: the kernel log -------------------------------------------------------------------
    def _kernel(self, rows: list[dict[str, Any]]) -> None:
        dev = self._kmsg
        if dev is None and not self._kmsg_failed:
            try:
                dev = self._kmsg = kmsg_mod.DevKmsg(self.cfg.kmsg)
            except FileNotFoundError:
                self._kmsg_failed = True  # no kernel log here: quiet
            except OSError as e:
                self._kmsg_failed = True
                self.problems.add("kmsg_unreadable", self.cfg.kmsg, str(e))
        if dev is None:
            return
        boot_id = kmsg_mod.boot_id(self.cfg.proc_root)
        if self._extra.get("boot_id") != boot_id:
            self._extra = {"boot_id": boot_id, "kmsg_seq": -1}
        last = int(str(self._extra.get("kmsg_seq", -1)))
        if self._kmsg_scanner is None:
            now = datetime.now(UTC)
            boot = kmsg_mod.boot_time(self.cfg.proc_root)
            self._kmsg_scanner = self._scanner(
                "kmsg", Clock(boot=boot, year=now.year, fallback=now)
            )
        sc = self._kmsg_scanner
        overrun = False  # the device said so: the gap after it is that loss, counted once
        for _ in range(kmsg_mod.MAX_RECORDS):
            try:
                rec = dev.read()
            except BrokenPipeError:
                self.problems.add("kmsg_overrun", self.cfg.kmsg, "records overwritten before read")
                overrun = True
                continue
            except OSError as e:
                self.problems.add("kmsg_unreadable", self.cfg.kmsg, str(e))
                break
            if rec is None:
                break
            seq = kmsg_mod.record_seq(rec)
            if seq is None:
                continue
            if seq <= last:
                continue  # read before a restart
            if last >= 0 and seq > last + 1 and not overrun:  # overwritten while we were away
                self.problems.add("kmsg_overrun", self.cfg.kmsg, f"{seq - last - 1} record(s) lost")
            last, overrun = seq, False
            sc.line = seq - 1  # a kernel record's `line` is its sequence number
            data = rec if rec.endswith(b"\n") else rec + b"\n"
            for hit in sc.feed(data):
                rows.append(self._row(hit, "kmsg", "", None))
        self._extra["kmsg_seq"] = last
        self._account(sc.counts, self.cfg.kmsg)
        sc.counts = Counts()

    # --- checkpoints ----------------------------------------------------------------------------
    def _load_checkpoints(self, cp: Checkpoints) -> None:
        try:
            self._resume, self._extra = cp.load()
        except FileNotFoundError:
            return
        except (OSError, ValueError, KeyError, TypeError) as e:
            self.problems.add("checkpoint", str(cp.path), f"unreadable, starting over: {e}")
            return
        self._first_scan = False  # a restart: files not in the checkpoint are new, read whole

    def _save_checkpoints(self) -> None:
        if self.checkpoints is None:
            return
        files = {
            k: Position(
                str(fw.path),
                fw.pos.offset - len(fw.scanner.carry),  # resume at the start of the open line
                fw.scanner.line,
            )
            for k, fw in self._followed.items()
        }
        try:
            self.checkpoints.save(files, self._extra)
        except OSError as e:
            self.problems.add("checkpoint", str(self.checkpoints.path), str(e))

    def close(self) -> None:
        if self._kmsg is not None:
            self._kmsg.close()


def _count_lines(path: Path, size: int) -> int:
    """Newlines in the first `size` bytes of a file (the line number to go on from when
    following starts at its end)."""
    n = 0
    try:
        with path.open("rb") as f:
            left = size
            while left > 0 and (data := f.read(min(CHUNK_BYTES, left))):
                n += data.count(b"\n")
                left -= len(data)
    except OSError:
        return 0
    return n


__all__ = ["LogsSource", "PodId", "pod_identity"]
