"""`hdfs fsck PATH -files -blocks [-locations] [-racks]` output -> one BlockInfo per block (file
path, block id, length, live replicas with rack paths), plus the summary's totals.

Reads text only and never runs fsck itself (the source does that, when configured). Lines it does
not know are skipped; a block line that does not parse is counted as an error, never guessed.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import NamedTuple

# "/p 223281915 bytes, 2 block(s):  OK" (2.x) / "/p 5 bytes, replicated: replication=3, 1 block(s):  OK"
# / "/p 367001600 bytes, erasure-coded: policy=RS-3-2-1024k, 2 block(s):  OK" (3.x, NamenodeFsck)
_FILE = re.compile(
    r"^(/.*?) (\d+) bytes, (?:replicated: replication=(\d+), )?(?:erasure-coded: policy=([^,]*), )?(\d+) block\(s\):?(.*)$"
)
# An erasure-coding policy's name: codec-dataUnits-parityUnits-cellSize (RS-6-3-1024k,
# RS-LEGACY-6-3-1024k, XOR-2-1-1024k, RS-10-4-1024k; ErasureCodingPolicy.composePolicyName).
_EC_POLICY = re.compile(r"^[A-Za-z][\w-]*?-(\d+)-(\d+)-(\d+)k$")
_SUMMARY_INT = re.compile(r"^\s*([A-Za-z][A-Za-z ()_-]*?):\s+(\d+)\b")


Replica = tuple[str, str]  # (host:port as printed, rack path or '' without -racks)


# A NamedTuple of plain tuples, not dataclasses: at 10^6 blocks, object creation and the cyclic
# GC rescanning tracked instances dominated the parse (bench/hdfs.py).
class BlockInfo(NamedTuple):
    path: str
    block_id: str
    length: int
    live_replicas: int
    replication: int | None  # the file's replication factor when fsck printed it
    replicas: tuple[Replica, ...]
    missing: bool = False
    source: str = "fsck"
    # erasure-coded files: the block is a block group, `replicas` its internal blocks, and
    # `replication` the internal blocks it should have (data units used + parity units)
    ec_policy: str = ""
    parity_units: int = 0


class EcPolicy(NamedTuple):
    name: str
    data_units: int
    parity_units: int
    cell_bytes: int

    def internal_blocks(self, group_bytes: int) -> int:
        """Internal blocks a block group of this many bytes has: a group smaller than one full
        stripe uses fewer data units, never fewer parity units (BlockInfoStriped.getRealTotalBlockNum)."""
        data = min(self.data_units, max(1, -(-group_bytes // self.cell_bytes)))
        return data + self.parity_units


def ec_policy(name: str) -> EcPolicy | None:
    m = _EC_POLICY.match(name)
    if m is None:
        return None
    return EcPolicy(name, int(m[1]), int(m[2]), int(m[3]) * 1024)


REASONS = ("block_line", "ec_policy")  # every FsckReport.errors key: a bounded set


@dataclass
class FsckReport:
    blocks: list[BlockInfo] = field(default_factory=list)
    files: int = 0
    status: str = ""  # HEALTHY | CORRUPT | '' (not printed)
    # 'Under-replicated blocks' -> 0, ...; the EC block groups' summary (3.x) as 'EC Total files'
    summary: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    lines: int = 0

    def error(self, reason: str) -> None:
        self.errors[reason] = self.errors.get(reason, 0) + 1


def _replicas(inside: str) -> tuple[Replica, ...]:
    if "[" not in inside and "(" not in inside and not inside.startswith("blk_"):
        # fast path, -racks: "/idc/rack/10.0.0.1:9866, /idc/rack/10.0.0.2:9866"
        return tuple(
            [(h, r) for r, _, h in [x.strip().rpartition("/") for x in inside.split(", ")] if h]
        )
    out = []
    for item in inside.split(", "):
        item = item.strip()
        if not item:
            continue
        if item.startswith("blk_"):
            # a striped block group's internal block: "blk_-9223372036854775792:<location>"
            item = item.partition(":")[2]
        if item.startswith("DatanodeInfoWithStorage["):
            # DatanodeInfoWithStorage[10.0.0.1:9866,DS-uuid,DISK] (-locations without -racks)
            item = item[len("DatanodeInfoWithStorage[") :].split(",", 1)[0]
        item = item.split("(", 1)[0].rstrip("]")  # -replicaDetails appends (LIVE) etc.
        rack, _, host = item.rpartition("/")
        out.append((host, rack))
    return tuple(out)


# "0. BP-1-10.0.0.1-1700000000000:blk_1073741825_1001 len=134217728 Live_repl=3 [...]" (repl= before 2.7)
_BLOCK = re.compile(
    r"(\d+)\. ((?:BP-\S+:)?blk_\S+) len=(\d+)(?: (?:Live_)?repl=(\d+))?([^\[]*)(?:\[(.*)\])?"
)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Parsing builds millions of small tuples and no reference cycles: pausing the cyclic GC
    spares rescanning them again and again (half the parse time at 10^6 lines, bench/hdfs.py).
    Reference counting still frees everything; the previous state is restored."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def parse_fsck(lines: Iterable[str], report: FsckReport | None = None) -> FsckReport:
    with _gc_paused():
        return _parse_fsck(lines, report)


_new_block = tuple.__new__  # NamedTuple's own __new__ is a Python-level call: 3x slower


def _parse_fsck(lines: Iterable[str], report: FsckReport | None) -> FsckReport:
    r = report if report is not None else FsckReport()
    path = ""
    replication: int | None = None
    ec: EcPolicy | None = None
    skip = False
    section = ""
    n = 0
    blocks = r.blocks
    match_block = _BLOCK.match
    for raw in lines:
        n += 1
        c = raw[:1]
        if c.isdigit():
            m = match_block(raw)
            if m is None:
                if ". BP-" in raw or ". blk_" in raw:
                    r.error("block_line")
                continue
            if skip or "Expected_repl=" in m[5]:
                continue  # a file with an unknown EC policy; a block still under construction
            missing = "MISSING" in m[5]
            length = int(m[3])
            if m[4] is None and not missing:
                r.error("block_line")
                continue
            inside = m[6]
            if not inside:
                reps: tuple[Replica, ...] = ()
            elif inside[0] == "/" and inside.find("(") < 0:
                # the common -racks form, inlined: "/idc/rack/10.0.0.1:9866, /idc/rack/10.0.0.2:9866"
                reps = tuple(
                    [(h, rk) for rk, _, h in [x.rpartition("/") for x in inside.split(", ")] if h]
                )
            else:
                reps = _replicas(inside)
            live = int(m[4] or 0)
            if ec is None:
                rec = (path, m[2], length, live, replication, reps, missing, "fsck", "", 0)
            else:
                n_int = ec.internal_blocks(length)
                rec = (
                    path,
                    m[2],
                    length,
                    live,
                    n_int,
                    reps,
                    missing,
                    "fsck",
                    ec.name,
                    ec.parity_units,
                )
            blocks.append(_new_block(BlockInfo, rec))
        elif c == "/":
            m = _FILE.match(raw.rstrip("\r\n"))
            if m:
                path = m[1]
                replication = int(m[3]) if m[3] else None
                ec = None
                if m[4] is not None:
                    ec = ec_policy(m[4])
                    skip = ec is None
                    if skip:
                        r.error("ec_policy")  # an unknown policy name: its blocks stay unjudged
                else:
                    skip = False
                r.files += 1
        elif raw.startswith("Status: "):
            r.status = raw[8:].strip()
        elif raw.startswith("Erasure Coded Block Groups:"):
            section = "EC "  # Hadoop 3 prints a second summary for EC block groups
        elif c == " " or c == "\t":
            m = _SUMMARY_INT.match(raw)
            if m:
                r.summary[section + m[1].strip()] = int(m[2])
    r.lines += n
    return r


_SNIFF = re.compile(r"^(?:FSCK started by |\d+\. (?:BP-\S+:)?blk_\d+_\d+ len=\d+ )", re.MULTILINE)


def looks_like_fsck(head: str) -> bool:
    return _SNIFF.search(head) is not None
