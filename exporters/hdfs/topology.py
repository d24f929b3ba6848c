"""Host -> (IDC, rack) from the cluster's topology: a table file (`host /idc/rack` per line, the
format of Hadoop's `net.topology.table.file.name`) or the output of `net.topology.script`.

Reads only the file / the script's stdout. Never guesses: a host the topology does not know (or
maps to a fallback rack such as /default-rack) stays unknown and is counted, not assigned an IDC.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from telemetry.errors import UserError

# Racks a topology script prints when it does not know the host (Hadoop's NetworkTopology default).
DEFAULT_UNKNOWN_RACKS = ("/default-rack",)


@dataclass(frozen=True)
class Location:
    idc: str
    rack: str  # full rack path, e.g. /idc1/rack07


def host_of(addr: str) -> str:
    """'/10.0.0.1:50010' or '10.0.0.1:50010' or 'dn1' -> host part ('10.0.0.1', 'dn1')."""
    a = addr.lstrip("/")
    if a.startswith("["):  # [v6]:port
        end = a.find("]")
        return a[1:end] if end > 0 else a
    if a.count(":") == 1:
        return a.partition(":")[0]
    return a


def split_rack(path: str) -> Location | None:
    """'/idc1/rack3' -> Location('idc1', '/idc1/rack3'); a one-level '/rack3' has no IDC level."""
    parts = [p for p in path.strip().split("/") if p]
    if len(parts) < 2:
        return None
    return Location(parts[0], "/" + "/".join(parts))


@dataclass
class Topology:
    """Lookup table host -> Location; remembers which hosts it could not place."""

    hosts: dict[str, Location] = field(default_factory=dict)
    unknown_racks: tuple[str, ...] = DEFAULT_UNKNOWN_RACKS
    unknown: dict[str, int] = field(default_factory=dict)  # host -> times looked up and not found

    def __len__(self) -> int:
        return len(self.hosts)

    def lookup(self, addr: str) -> Location | None:
        h = host_of(addr)
        loc = self.hosts.get(h)
        if loc is None:
            self.unknown[h] = self.unknown.get(h, 0) + 1
        return loc

    def idcs(self) -> list[str]:
        return sorted({loc.idc for loc in self.hosts.values()})

    def add(self, host: str, rack: str, *, origin: str) -> None:
        if rack.strip() in self.unknown_racks:
            return  # the script's "don't know": stays unknown on purpose
        loc = split_rack(rack)
        if loc is None:
            raise UserError(f"{origin}: rack {rack!r} for {host!r} has no /IDC/rack levels")
        self.hosts[host] = loc

    @classmethod
    def from_table(
        cls, path: str | Path, unknown_racks: Sequence[str] = DEFAULT_UNKNOWN_RACKS
    ) -> Topology:
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as e:
            raise UserError(f"topology {p}: cannot read: {e.strerror or e}") from None
        return cls.parse_table(text, origin=f"topology {p}", unknown_racks=unknown_racks)

    @classmethod
    def parse_table(
        cls,
        text: str,
        *,
        origin: str = "topology",
        unknown_racks: Sequence[str] = DEFAULT_UNKNOWN_RACKS,
    ) -> Topology:
        t = cls(unknown_racks=tuple(unknown_racks))
        for n, raw in enumerate(text.splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2 or not parts[1].startswith("/"):
                raise UserError(
                    f"{origin} line {n}: expected 'HOST /IDC/RACK', got {raw.strip()!r}"
                )
            t.add(parts[0], parts[1], origin=f"{origin} line {n}")
        return t

    @classmethod
    def from_script(
        cls,
        script: str,
        hosts: Iterable[str],
        *,
        max_args: int = 100,
        timeout: float = 30.0,
        unknown_racks: Sequence[str] = DEFAULT_UNKNOWN_RACKS,
    ) -> Topology:
        """Run the net.topology.script the way the NameNode does: hosts as arguments (at most
        `max_args` per run, net.topology.script.number.args), one rack per host on stdout."""
        t = cls(unknown_racks=tuple(unknown_racks))
        hs = sorted(set(hosts))
        for i in range(0, len(hs), max_args):
            chunk = hs[i : i + max_args]
            try:
                res = subprocess.run(
                    [script, *chunk], capture_output=True, text=True, timeout=timeout, check=False
                )
            except (OSError, subprocess.TimeoutExpired) as e:
                raise UserError(f"topology script {script}: {e}") from None
            if res.returncode != 0:
                raise UserError(
                    f"topology script {script}: exit {res.returncode}: {res.stderr.strip()[:200]}"
                )
            racks = res.stdout.split()
            if len(racks) != len(chunk):
                raise UserError(
                    f"topology script {script}: {len(chunk)} host(s) in, {len(racks)} rack(s) out"
                )
            for h, r in zip(chunk, racks, strict=True):
                t.add(h, r, origin=f"topology script {script}")
        return t
