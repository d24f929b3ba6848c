"""RDMA NIC collector: nic_sample and nic_priority_sample rows from sysfs
(`class/infiniband/<dev>/ports/<n>/{counters,hw_counters,state,rate,link_layer}`,
`class/net/<netdev>/statistics`) plus the port netdev's ethtool statistics (nic_counters.csv).

Read-only: it never writes sysfs. A malformed file or a vanished device is named as a problem
and the rest keeps reporting; `N/A` (a counter the HCA does not implement) is skipped quietly.
"""

from __future__ import annotations

import csv
import logging
import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exporters.node.counters import CounterTracker
from exporters.node.counters import scaled as _scaled
from exporters.node.ethtool import EthtoolError, EthtoolReader
from telemetry.records import NIC_PRIORITY_SAMPLE, NIC_SAMPLE

log = logging.getLogger(__name__)

COUNTERS_CSV = Path(__file__).with_name("nic_counters.csv")
PRIORITIES = range(8)
Problem = Callable[[str, str], None]


@dataclass(frozen=True)
class NicCounter:
    source: str
    name: str
    field: str
    bits: int
    scale: float  # an int when integral, so integer counters stay integers


def load_counters(path: Path = COUNTERS_CSV) -> list[NicCounter]:
    lines = [ln for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    out = []
    for row in csv.DictReader(lines):
        scale = float(row["scale"])
        c = NicCounter(
            row["source"],
            row["name"],
            row["field"],
            int(row["bits"]),
            int(scale) if scale.is_integer() else scale,
        )
        kind = NIC_PRIORITY_SAMPLE if c.source == "ethtool_prio" else NIC_SAMPLE
        if c.field not in kind.by_name:
            raise ValueError(f"{path}: {c.field!r} is not a {kind.name} field")
        out.append(c)
    return out


def sysfs_root(path: str | os.PathLike[str]) -> Path:
    """Accept both the sysfs mount (/sys) and a capture directory that contains `sys/`."""
    p = Path(path)
    return p / "sys" if (p / "sys" / "class").is_dir() else p


class Malformed(ValueError):
    pass


def read_int(path: str | Path, fd: int | None = None) -> int | None:
    """A sysfs counter: int, or None for `N/A` (not implemented by this HCA). Malformed content
    raises Malformed naming the file. With `fd` (kept open), pread at offset 0: sysfs regenerates
    an attribute's value on every read from offset 0, so a scrape needs no open/close per counter."""
    if fd is not None:
        raw = os.pread(fd, 128, 0)
    else:
        fd = os.open(path, os.O_RDONLY)
        try:
            raw = os.read(fd, 128)
        finally:
            os.close(fd)
    return parse_counter(raw, path)


def parse_counter(raw: bytes, path: str | Path = "") -> int | None:
    """A sysfs counter file's bytes -> int, None for `N/A`; anything else raises Malformed."""
    try:
        v = int(raw)
    except ValueError:
        text = raw.decode(errors="replace").strip()
        if text.startswith("N/A"):
            return None
        try:
            v = int(text, 16) if text.startswith("0x") else int(text)
        except ValueError:
            raise Malformed(f"{path}: not an integer: {text[:40]!r}") from None
    if v < 0:
        raise Malformed(f"{path}: negative counter {v}")
    if v >> 64:  # no 64-bit counter holds it: malformed, never fatal to the whole node
        raise Malformed(f"{path}: counter {v} does not fit in 64 bits")
    return v


_RATE = re.compile(r"^\s*([\d.]+)\s*Gb/sec")


def parse_rate(text: str) -> float | None:
    """'25 Gb/sec (1X EDR)' -> bytes per second."""
    m = _RATE.match(text)
    try:
        return float(m[1]) * 1e9 / 8 if m else None
    except ValueError:  # "1.2.3 Gb/sec", ". Gb/sec": not a rate
        return None


_STATE = re.compile(r"^\s*(\d+)\s*:")


def state_id(text: str) -> int | None:
    """'4: ACTIVE' / '5: LinkUp' -> 4 / 5 (the IB spec's number; the word varies by kernel)."""
    m = _STATE.match(text)
    return int(m[1]) if m and int(m[1]) < 256 else None


def _read_text(path: str | Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return ""
    try:
        return os.read(fd, 256).decode(errors="replace").strip()
    except OSError:
        return ""
    finally:
        os.close(fd)


@dataclass
class Port:
    device: str
    port: int
    netdev: str
    pci: str  # PCI address of the device ('' when sysfs has no device link, e.g. a flat capture)
    path: Path
    # (counter, absolute path) of the counters this port has, found at discovery: a scrape then
    # costs one open+read per counter and no directory walks.
    files: list[tuple[NicCounter, str, int]] = field(default_factory=list)  # counter, path, open fd
    link_layer: str = ""  # fixed by the hardware/firmware: read at discovery

    @property
    def spath(self) -> str:
        return f"{self.path}/"


class RdmaCollector:
    """`rediscover_seconds`: how often the device/port/netdev layout is walked again (VFs come and
    go); a port that vanishes triggers a walk at the next cycle anyway."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        node: str,
        ethtool: EthtoolReader | None = None,
        rediscover_seconds: float = 30.0,
    ) -> None:
        self.root = sysfs_root(root)
        self.rediscover_seconds = rediscover_seconds
        self._ports: list[Port] | None = None
        self._ports_at = 0.0
        self._rediscover = False
        self.node = node
        self.ethtool = ethtool
        self.ethtool_seconds = 0.0  # of the last collect()
        counters = load_counters()
        self.by_source: dict[str, list[NicCounter]] = {}
        for c in counters:
            self.by_source.setdefault(c.source, []).append(c)
        self.tracker = CounterTracker()

    # --- discovery ---------------------------------------------------------------------------
    def ports(self, problem: Problem) -> list[Port]:
        base = self.root / "class" / "infiniband"
        try:
            devices = sorted(os.listdir(base))
        except FileNotFoundError:
            return []  # no RDMA devices on this host: nothing here, not an error
        out = []
        for dev in devices:
            d = base / dev
            try:
                port_dirs = sorted(os.listdir(d / "ports"), key=lambda s: (len(s), s))
            except OSError as e:
                problem("missing_device", f"{d}: cannot list ports: {e.strerror or e}")
                continue
            netdevs = self._netdevs(d)
            pci = _pci_of(d / "device")
            for pn in port_dirs:
                if not pn.isdigit():
                    continue
                n = int(pn)
                port = Port(dev, n, netdevs.get(n, ""), pci, d / "ports" / pn)
                port.files = self._files(port)
                port.link_layer = _read_text(port.path / "link_layer")
                out.append(port)
        return out

    def _files(self, p: Port) -> list[tuple[NicCounter, str, int]]:
        dirs = {
            "counters": p.path / "counters",
            "counters_ext": p.path / "counters_ext",
            "hw_counters": p.path / "hw_counters",
        }
        if p.netdev:
            dirs["netdev"] = self.root / "class" / "net" / p.netdev / "statistics"
        out = []
        for source, d in dirs.items():
            try:
                present = set(os.listdir(d))
            except OSError:
                continue  # e.g. no hw_counters on this HCA/driver
            for c in self.by_source.get(source, ()):
                if c.name in present:
                    path = str(d / c.name)
                    try:
                        out.append((c, path, os.open(path, os.O_RDONLY)))
                    except OSError:
                        continue  # unreadable (permissions) or gone since listdir
        return out

    def _close_ports(self) -> None:
        for p in self._ports or ():
            for _, _, fd in p.files:
                os.close(fd)
            p.files = []
        self._ports = None

    def close(self) -> None:
        self._close_ports()

    def _cached_ports(self, problem: Problem) -> list[Port]:
        now = time.monotonic()
        if self._ports is None or now - self._ports_at >= self.rediscover_seconds:
            self._close_ports()
            self._ports, self._ports_at = self.ports(problem), now
        return self._ports

    def _netdevs(self, dev_dir: Path) -> dict[int, str]:
        """port number -> netdev, from <dev>/device/net/<netdev>/dev_port (0-based) as the kernel's
        rdma tools do; a single netdev without dev_port belongs to port 1."""
        net = dev_dir / "device" / "net"
        try:
            names = sorted(os.listdir(net))
        except OSError:
            return {}
        out: dict[int, str] = {}
        for nd in names:
            txt = _read_text(net / nd / "dev_port")
            port = int(txt) + 1 if txt.isdigit() else 1
            out.setdefault(port, nd)
        return out

    # --- collection --------------------------------------------------------------------------
    def collect(
        self, ts: int, problem: Problem, ethtool_problem: Problem | None = None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(nic_sample rows, nic_priority_sample rows). Problems reading ethtool statistics go to
        `ethtool_problem` (default `problem`); `ethtool_seconds` is the time spent on them."""
        self.tracker.next_cycle()
        self.ethtool_seconds = 0.0
        eth_problem = ethtool_problem or problem
        if self._rediscover:
            self._rediscover = False
            self._close_ports()
        nic_rows: list[dict[str, Any]] = []
        prio_rows: list[dict[str, Any]] = []
        for p in self._cached_ports(problem):
            try:
                row, prios = self._port(p, ts, problem, eth_problem)
            except FileNotFoundError as e:
                problem(
                    "missing_device",
                    f"{p.device} port {p.port} vanished during the scrape: {e.filename}",
                )
                self._rediscover = True  # walk the tree again next cycle
                continue
            nic_rows.append(row)
            prio_rows += prios
        self.tracker.forget(
            {f"{r['device']}/{r['port']}" for r in nic_rows}
            | {f"eth:{r['netdev']}" for r in nic_rows}
        )
        return nic_rows, prio_rows

    def _port(
        self, p: Port, ts: int, problem: Problem, eth_problem: Problem
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        key = f"{p.device}/{p.port}"
        base = p.spath
        state = _read_text(base + "state")
        if not state and not p.path.exists():
            raise FileNotFoundError(2, "gone", str(p.path))
        row: dict[str, Any] = {
            "ts": ts,
            "node": self.node,
            "device": p.device,
            "port": p.port,
            "netdev": p.netdev,
            "_pci": p.pci,  # not a record field: used to attach the pod holding a VF
            "link_layer": p.link_layer,
            "up": 1 if state.endswith("ACTIVE") else 0,
            "state_id": state_id(state),
            "phys_state_id": state_id(_read_text(base + "phys_state")),
            "rate_bytes_per_second": parse_rate(_read_text(base + "rate")),
        }
        sums: dict[str, float] = {}
        for c, path, fd in p.files:
            self._add(sums, key, c, path, fd, problem)
        t = time.perf_counter()
        prios = self._ethtool(p, ts, sums, eth_problem)
        self.ethtool_seconds += time.perf_counter() - t
        row.update({f: v for f, v in sums.items() if not math.isnan(v)})  # unknown: absent
        # One NIC reset zeroes both its RDMA and ethtool counters: count it once.
        row["resets_total"] = max(
            self.tracker.reset_count(key), self.tracker.reset_count(f"eth:{p.netdev}")
        )
        return row, prios

    def _add(
        self, sums: dict[str, float], key: str, c: NicCounter, path: str, fd: int, problem: Problem
    ) -> None:
        try:
            raw = read_int(path, fd)
        except Malformed as e:
            problem("malformed_sysfs", str(e))
            sums[c.field] = math.nan  # a sum missing a term is unknown (null), not smaller
            return
        except OSError as e:
            # ENODEV/EIO: the device went away or the driver cannot read the counter right now.
            problem("sysfs_read_error", f"{path}: {e.strerror or e}")
            self._rediscover = True
            sums[c.field] = math.nan
            return
        if raw is None:
            return
        total = self.tracker.update(key, c.name, raw, bits=c.bits)
        sums[c.field] = sums.get(c.field, 0) + _scaled(total, c.scale)

    def _ethtool(
        self, p: Port, ts: int, sums: dict[str, float], problem: Problem
    ) -> list[dict[str, Any]]:
        if self.ethtool is None or not p.netdev:
            return []
        try:
            stats = self.ethtool.stats(p.netdev)
        except EthtoolError as e:
            if e.reason == "ethtool_not_supported":
                return []  # the driver has no statistics: nothing here
            problem(e.reason, str(e))
            return []
        if not stats:
            return []
        key = f"eth:{p.netdev}"
        for c in self.by_source.get("ethtool", ()):
            raw = stats.get(c.name)
            if raw is None:  # a term seen before and missing now: the sum is unknown (null),
                if self.tracker.seen(key, c.name):  # not smaller (that would read as a reset)
                    sums[c.field] = math.nan
                continue
            sums[c.field] = sums.get(c.field, 0) + _scaled(
                self.tracker.update(key, c.name, raw), c.scale
            )
        rows = []
        for prio in PRIORITIES:
            r: dict[str, Any] = {}
            for c in self.by_source.get("ethtool_prio", ()):
                raw = stats.get(c.name.replace("{p}", str(prio)))
                if raw is not None:
                    r[c.field] = r.get(c.field, 0) + _scaled(
                        self.tracker.update(key, f"{c.name}:{prio}", raw), c.scale
                    )
            if r:
                r.update(
                    ts=ts,
                    node=self.node,
                    netdev=p.netdev,
                    device=p.device,
                    priority=prio,
                    resets_total=self.tracker.reset_count(key),
                )
                rows.append(r)
        # nic_sample keeps the cross-priority sums; per priority (the configured lossless ones
        # included) is nic_priority_sample: no priority is special here.
        if rows:
            for field, src in (
                ("pfc_rx_pause_total", "rx_pause_total"),
                ("pfc_tx_pause_total", "tx_pause_total"),
            ):
                vals = [r[src] for r in rows if src in r]
                if vals:
                    sums[field] = sum(vals)
            durs = [
                r["rx_pause_duration_seconds_total"]
                for r in rows
                if "rx_pause_duration_seconds_total" in r
            ]
            if durs:
                sums["pfc_rx_pause_duration_seconds_total"] = sum(durs)
        return rows


def _pci_of(link: Path) -> str:
    """PCI address a sysfs `device` link points at ('' when it is not a link to a PCI device)."""
    try:
        target = os.path.realpath(link)
    except OSError:
        return ""
    name = os.path.basename(target)
    return name if re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", name) else ""
