"""NVIDIA's Xid catalog (telemetry/xid_catalog.yaml) and the two things a kernel line adds to an
Xid: Xid 154's recovery action and "caused by previous Xid N". Words are the catalog's own
(`RESTART_APP`, `RESET_GPU`, `RESTART_BM`, `IGNORE`, `WORKFLOW_XID_48`, ...).

Leaf data: reads the YAML file only, imports nothing of railscope, never guesses an action for
an Xid the catalog does not know (it is kept, named, with its action None).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

CATALOG_URL = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
PRODUCTS = ("A100", "H100", "B100", "GB200")
XID_154 = 154


@dataclass(frozen=True)
class XidInfo:
    """One Xid as the catalog has it. `action` is the immediate action (None where the catalog
    gives none, or does not know the code); `fatal` is the action bucket's (None: undecided)."""

    xid: int
    mnemonic: str | None
    description: str
    action: str | None
    investigatory: str | None
    fatal: bool | None
    applies: tuple[str, ...]
    known: bool = True

    @property
    def label(self) -> str:
        """'Xid 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS' or 'Xid 999 (not in NVIDIA's
        Xid catalog)'."""
        if not self.known:
            return f"Xid {self.xid} (not in NVIDIA's Xid catalog)"
        return f"Xid {self.xid} {self.mnemonic}" if self.mnemonic else f"Xid {self.xid}"


@dataclass(frozen=True)
class Bucket:
    """One immediate action of the catalog's vocabulary."""

    name: str
    fatal: bool | None
    means: str


@functools.cache
def _catalog() -> dict[str, Any]:
    text = resources.files("telemetry").joinpath("xid_catalog.yaml").read_text()
    return dict(yaml.safe_load(text))


@functools.cache
def buckets() -> dict[str, Bucket]:
    """The catalog's immediate actions: name -> Bucket."""
    return {name: Bucket(name, b["fatal"], b["means"]) for name, b in _catalog()["buckets"].items()}


@functools.cache
def catalog() -> dict[int, XidInfo]:
    """Every Xid the catalog lists: code -> XidInfo."""
    out: dict[int, XidInfo] = {}
    for code, (mnemonic, description, applies, action, investigatory) in _catalog()["xids"].items():
        bucket = buckets().get(action) if action else None
        out[int(code)] = XidInfo(
            xid=int(code),
            mnemonic=mnemonic or None,
            description=description,
            action=action or None,
            investigatory=investigatory or None,
            fatal=bucket.fatal if bucket else None,
            applies=tuple(p for p, flag in zip(PRODUCTS, applies, strict=True) if flag == "Y"),
        )
    return out


def strongest(actions: Iterable[str | None]) -> str | None:
    """Of several actions, the one that takes the most out of service (the buckets' order in the
    catalog file). An unknown action (None, or a word the catalog lacks) ranks with
    CONTACT_SUPPORT, above RESTART_APP and IGNORE: what nobody knows is looked at."""
    order = list(buckets())
    unknown = order.index("CONTACT_SUPPORT")
    best: tuple[int, str | None] | None = None
    for a in actions:
        r = order.index(a) if a in order else unknown
        if best is None or r < best[0]:
            best = (r, a)
    return best[1] if best else None


def describe(xid: int) -> XidInfo | None:
    """The catalog's entry for `xid`; None for a code it does not list."""
    return catalog().get(int(xid))


def lookup(xid: int) -> XidInfo:
    """Like describe, but an unknown code is kept: named, its action and fatality None."""
    known = describe(xid)
    if known is not None:
        return known
    return XidInfo(int(xid), None, "", None, None, None, (), known=False)


@dataclass(frozen=True)
class Recovery:
    """What Xid 154 says the GPU now needs: NVML's nvmlDeviceGpuRecoveryAction_t code, the
    driver's text, and the catalog action that carries it out (None for a code NVML's enum
    does not name)."""

    code: int
    text: str
    action: str | None


# nvmlDeviceGpuRecoveryAction_t -> the catalog's word for doing it. DRAIN_P2P and
# DRAIN_AND_RESET are NVIDIA's own words (the catalog's WORKFLOW_XID_48 uses DRAIN_AND_RESET).
RECOVERY_ACTIONS: dict[int, str] = {
    0: "IGNORE",
    1: "RESET_GPU",
    2: "RESTART_BM",
    3: "DRAIN_P2P",
    4: "DRAIN_AND_RESET",
}

# "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
_RECOVERY = re.compile(
    r"recovery action changed from\s+(0x[0-9a-f]+|\d+)(?:\s*\([^)]*\))?\s+to\s+"
    r"(0x[0-9a-f]+|\d+)(?:\s*\(([^)]*)\))?",
    re.IGNORECASE,
)
_CAUSED_BY = re.compile(r"caused by previous Xid\s+(\d+)", re.IGNORECASE)


def recovery_action(text: str) -> Recovery | None:
    """The action an Xid 154 line reports ('... changed from 0x0 (None) to 0x1 (GPU Reset
    Required)'); None when the line says no such thing."""
    m = _RECOVERY.search(text)
    if m is None:
        return None
    code = int(m.group(2), 0)
    return Recovery(code, (m.group(3) or "").strip(), RECOVERY_ACTIONS.get(code))


def caused_by(text: str) -> int | None:
    """N of a derivative line's 'caused by previous Xid N' (the driver's own annotation, mostly
    on Xid 45); None when the line has none."""
    m = _CAUSED_BY.search(text)
    return int(m.group(1)) if m else None


def effective_action(
    xid: int, *, cause: int | None = None, recovery: Recovery | None = None
) -> str | None:
    """The action to take for one Xid line: Xid 154's reported recovery (without its text, the
    catalog's XID_154, which ranks below the Xid it accompanies); for a line caused by a
    previous Xid, that Xid's action (the catalog: 'Not Solo: IGNORE (follow other Xid)');
    otherwise the catalog's immediate action. None: unknown."""
    if int(xid) == XID_154 and recovery is not None:
        return recovery.action
    if cause is not None and int(cause) != int(xid):
        return lookup(cause).action
    return lookup(xid).action


__all__ = [
    "CATALOG_URL",
    "RECOVERY_ACTIONS",
    "Bucket",
    "Recovery",
    "XidInfo",
    "buckets",
    "catalog",
    "caused_by",
    "describe",
    "effective_action",
    "lookup",
    "recovery_action",
    "strongest",
]
