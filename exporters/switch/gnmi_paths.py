"""Which gNMI paths a switch serves: each path (name maps, counters, queues, oper status, LLDP,
aliases) is asked on its own, and one the target refuses (NOT_FOUND, PERMISSION_DENIED,
UNIMPLEMENTED, ...) is named once in the log and in the switch's status while the others go on.

Switches with queue or PG counters disabled, restricted telemetry users and other network
operating systems serve subsets; a refusal of one path must not take the switch down. Never
decides what a path means (gnmi_sonic.py, gnmi_openconfig.py do) and never retries a path
within a session: the next session asks again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("exporters.switch.gnmi")

# status codes that answer for one path (the request named something the target does not serve
# or lets this user read), not for the connection or the credentials
PATH_CODES = frozenset(
    {
        "NOT_FOUND",
        "PERMISSION_DENIED",
        "INVALID_ARGUMENT",
        "UNIMPLEMENTED",
        "FAILED_PRECONDITION",
        "OUT_OF_RANGE",
    }
)


@dataclass(frozen=True)
class Unit:
    """One Subscribe (or Get) of its own: a target and the paths it names together."""

    target: str
    paths: tuple[str, ...]
    change: bool  # ON_CHANGE (status, LLDP) rather than SAMPLE (counters)

    @property
    def name(self) -> str:
        return ", ".join(key(self.target, p) for p in self.paths)


def key(target: str, path: str) -> str:
    return f"{target}/{path}" if target else path


def units(
    sample_target: str,
    sample_paths: Iterable[str],
    change_target: str,
    change_paths: Iterable[str],
    together: frozenset[str] = frozenset(),
) -> list[Unit]:
    """A Unit per path; the paths in `together` (a dialect's per-counter paths, refused and
    replaced as one) share one."""
    out: list[Unit] = []
    grouped = tuple(p for p in sample_paths if p in together)
    if grouped:
        out.append(Unit(sample_target, grouped, False))
    out += [Unit(sample_target, (p,), False) for p in sample_paths if p not in together]
    out += [Unit(change_target, (p,), True) for p in change_paths]
    return out


class Served:
    """What one switch's target refused in the current session, named once per path for the
    life of the process (a switch that keeps refusing a path is not a new event)."""

    def __init__(self, switch: str, address: str, problems: Any) -> None:
        self.switch, self.address, self.problems = switch, address, problems
        self.refused: dict[str, str] = {}  # "TARGET/path" -> "CODE: details"
        self._told: set[str] = set()

    def new_session(self) -> None:
        self.refused.clear()

    @staticmethod
    def code(e: Any) -> str:
        c = e.code() if hasattr(e, "code") else None
        return str(getattr(c, "name", "") or "")

    def is_refusal(self, e: Any, mode: str) -> bool:
        """True where `e` refuses the paths of one request (in STREAM and POLL, UNIMPLEMENTED
        refuses the mode instead: the session falls back to the next mode)."""
        code = self.code(e)
        if code not in PATH_CODES:
            return False
        return not (code == "UNIMPLEMENTED" and mode in ("stream", "poll"))

    def refuse(self, unit: Unit, e: Any, *, logged: bool = True) -> None:
        """Record that `unit`'s paths were refused with `e`; the first time for a path, one log
        line (unless the caller logs its own) and a `path_refused` problem."""
        details = (e.details() if hasattr(e, "details") else str(e)) or ""
        why = f"{self.code(e)}: {details}".strip(": ")
        new = []
        for p in unit.paths:
            k = key(unit.target, p)
            self.refused[k] = why
            if k not in self._told:
                self._told.add(k)
                new.append(k)
        if new:
            self.problems.add("path_refused", ", ".join(new), why, log=False)
            if logged:
                log.warning(
                    "switch %s: gNMI %s does not serve %s (%s): going on without it",
                    self.switch, self.address, ", ".join(new), why,
                )  # fmt: skip

    def all_refused(self, us: Iterable[Unit]) -> bool:
        return all(key(u.target, p) in self.refused for u in us for p in u.paths)

    def target_refused(self, target: str) -> bool:
        """True where every path of `target` asked this session was refused (APPL_DB: no oper
        status or LLDP to wait for)."""
        mine = [k for k in self.refused if k.startswith(target + "/")]
        return bool(mine)

    def note(self) -> str:
        """For the switch's status row: the paths it did not serve ("" when none)."""
        if not self.refused:
            return ""
        return "gNMI paths not served: " + "; ".join(
            f"{k} ({v.split(':', 1)[0]})" for k, v in sorted(self.refused.items())
        )
