"""The `railscope switch` source: SONiC switches' COUNTERS_DB (and APPL_DB) over Redis, or dumps.

Reads port/queue/PG counters, RATES, watermarks and PFC watchdog state from COUNTERS_DB, port
speed/oper status and LLDP neighbours from APPL_DB, of many switches (and every ASIC of a
multi-ASIC switch) concurrently, with pipelined reads (`sonic.py`; parsing in `counters.py`).
It never writes to a switch, never stores a number it could not read as such (a wrong-type key
or bad value is counted by reason and named in a log line instead), and never derives a negative
rate across a reset.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from exporters.switch import counters as C
from exporters.switch import ecmp
from exporters.switch.config import SwitchConfig, SwitchSourceConfig
from exporters.switch.sonic import SwitchDown, Target, poll, targets_from_config, targets_from_dump
from telemetry.contracts import Batch
from telemetry.errors import UserError
from telemetry.pipeline import BaseSource
from telemetry.records import KINDS, RecordKind

log = logging.getLogger(__name__)


class SwitchSource(BaseSource):
    """Polls SONiC switches' COUNTERS_DB (Redis db 2 per database_config.json) and APPL_DB:
    port counters and RATES, per-queue packets/bytes/drops/ECN marks/watermarks, PG
    watermarks, PFC frames and pause time, PFC watchdog; LLDP neighbours; ECMP uplink spread.
    --from takes a COUNTERS_DB JSON dump (sonic-db-dump or mock-table layout) or a directory
    of them (SWITCH/counters_db.json, SWITCH/ASIC/counters_db.json, + appl_db.json)."""

    name = "switch"
    unit = "records"  # ports, queues/PGs and LLDP entries read per poll
    # gNMI: auth_failed, bad_update, stream_stalled, unreachable (exporters/switch/gnmi_stream.py)
    reasons = (*C.REASONS, "switch_down", "poll_failed",
               "auth_failed", "bad_update", "stream_stalled", "unreachable")  # fmt: skip
    Config = SwitchSourceConfig

    def __init__(
        self,
        targets: list[Target],
        config: SwitchSourceConfig | None = None,
        clock: Callable[[], float] = time.time,
        gnmi: list[SwitchConfig] | None = None,
        interval: float = 10.0,
        snmp: list[SwitchConfig] | None = None,
    ) -> None:
        super().__init__()
        self.cfg = config or SwitchSourceConfig()
        self.clock = clock
        self.targets = list(targets)
        self._prev: dict[tuple[str, str, str], tuple[float, int | None, int | None]] = {}
        # a switch's previous counters as columns, where its poll gave whole uint64 columns
        # (`_column_rates`): they stand for its ports' entries in `_prev` until a poll of it
        # goes row by row again (which writes them back there first)
        self._prev_cols: dict[tuple[str, str], _PrevColumns] = {}
        # Arrow arrays of the column lists a poll handed over, by the list (kept: its id is
        # its own while here); a cache hands the same list again while it is unchanged (port
        # names, queue types, PORT_TABLE status, LLDP), which is not converted again
        self._arrays: dict[int, tuple[list[Any], pa.Array]] = {}
        self._down: set[tuple[str, str]] = set()
        self.resets = 0
        self._gnmi_loop: Any = None
        self._streams: list[Any] = []
        if gnmi:
            self._start_gnmi(gnmi, interval)
        if snmp:
            self._start_snmp(snmp)

    def _start_gnmi(self, switches: list[SwitchConfig], interval: float) -> None:
        """Every gNMI switch streams on one asyncio loop (one thread) into its cache; a poll
        reads the caches like databases."""
        from exporters.switch.gnmi import DIALECTS
        from exporters.switch.gnmi_stream import GnmiLoop

        self._gnmi_loop = GnmiLoop()
        for s in switches:
            assert s.gnmi is not None
            st = DIALECTS[s.gnmi.dialect](
                s.name, s.gnmi, interval, self.cfg.timeout_seconds, self.problems.about(s.name)
            )
            self._streams.append(st)
            self.targets.append(Target(s.name, "", s.role, st))
            self._gnmi_loop.start(st)

    def _start_snmp(self, switches: list[SwitchConfig]) -> None:
        """SNMP agents are walked on the same kind of loop (one thread), one walk per poll."""
        from exporters.switch.gnmi_stream import GnmiLoop
        from exporters.switch.snmp import SnmpSwitch

        if self._gnmi_loop is None:
            self._gnmi_loop = GnmiLoop()
        for s in switches:
            assert s.snmp is not None
            sw = SnmpSwitch(s.name, s.snmp, self.cfg.timeout_seconds, self._gnmi_loop.loop)
            self.targets.append(Target(s.name, "", s.role, sw))

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def add_arguments(cls, p: Any) -> None:
        p.add_argument("--switch", action="append", default=[], metavar="NAME=ADDRESS",
                       help="a switch's redis (host:port or unix socket); repeatable; adds to config")  # fmt: skip
        p.add_argument("--database-config", metavar="PATH", help="SONiC database_config.json")
        p.add_argument(
            "--name", help="switch name for a single --from dump file (default: file stem)"
        )
        p.add_argument("--gnmi", action="append", default=[], metavar="NAME=HOST:PORT",
                       help="a switch's gNMI server (plaintext; TLS and users in the config); repeatable")  # fmt: skip
        p.add_argument("--snmp", action="append", default=[], metavar="NAME=HOST[:PORT]",
                       help="a switch's SNMP agent (v2c, --snmp-community; v3 in the config); repeatable")  # fmt: skip
        p.add_argument("--snmp-community", default="public", help="v2c community for --snmp")
        p.add_argument("--gnmi-dialect", choices=("sonic", "openconfig"), default="sonic",
                       help="paths the --gnmi switches serve (default: sonic)")  # fmt: skip

    @classmethod
    def fold_args(cls, args: Any, section: dict[str, Any]) -> dict[str, Any]:
        """The `sources.switch` section with this command line's flags on top."""
        out = dict(section)
        if getattr(args, "database_config", None):
            out["database_config"] = args.database_config
        if getattr(args, "name", None):
            out["dump_name"] = args.name
        extra = []
        for spec in getattr(args, "switch", []) or []:
            name, sep, addr = spec.partition("=")
            if not sep or not name or not addr:
                raise UserError(
                    f"--switch {spec!r}: expected NAME=HOST:PORT or NAME=/path/redis.sock"
                )
            extra.append({"name": name, "address": addr})
        for spec in getattr(args, "gnmi", []) or []:
            name, sep, addr = spec.partition("=")
            if not sep or not name or ":" not in addr:
                raise UserError(f"--gnmi {spec!r}: expected NAME=HOST:PORT")
            dialect = getattr(args, "gnmi_dialect", None) or "sonic"
            extra.append({"name": name, "gnmi": {"address": addr, "dialect": dialect}})
        for spec in getattr(args, "snmp", []) or []:
            name, sep, addr = spec.partition("=")
            if not sep or not name or not addr:
                raise UserError(f"--snmp {spec!r}: expected NAME=HOST[:PORT]")
            community = getattr(args, "snmp_community", None) or "public"
            extra.append({"name": name, "snmp": {"address": addr, "community": community}})
        if extra:
            out["switches"] = [*(out.get("switches") or []), *extra]
        return out

    @classmethod
    def build(
        cls, c: SwitchSourceConfig, cfg: Any, *, from_path: str | None, once: bool
    ) -> SwitchSource:
        if from_path:
            targets = targets_from_dump(Path(from_path), c.dump_name)
            roles = {s.name: s.role for s in c.switches}  # a replayed switch keeps its role
            for t in targets:
                t.role = roles.get(t.switch, t.role)
            return cls(targets, c)
        if not c.switches:
            raise UserError(
                "switch: no switches: give --switch NAME=HOST:PORT, --gnmi NAME=HOST:PORT, "
                "--snmp NAME=HOST[:PORT] or sources.switch.switches"
            )
        interval = c.interval_seconds or getattr(cfg, "interval_seconds", None) or 10.0
        gnmi = [s for s in c.switches if s.gnmi is not None]
        snmp = [s for s in c.switches if s.snmp is not None and s.gnmi is None]
        return cls(targets_from_config(c), c, gnmi=gnmi, interval=float(interval), snmp=snmp)

    # -- polling ---------------------------------------------------------------------------
    def _collect(self) -> list[Batch]:
        # a stream's first full sample is worth waiting for (--once), up to the timeout
        deadline = time.monotonic() + self.cfg.timeout_seconds
        for st in self._streams:
            st.synced.wait(max(0.0, deadline - time.monotonic()))
        ts = int(self.clock() * 1000)
        # a cache that polls itself into columns (gNMI SONiC) costs CPU only: read it here;
        # the rest wait on the network and go through the thread pool
        cached = [t for t in self.targets if hasattr(t.db, "poll_columns")]
        remote = [t for t in self.targets if not hasattr(t.db, "poll_columns")]
        workers = max(1, min(self.cfg.workers, len(remote)))
        with ThreadPoolExecutor(workers, thread_name_prefix="railscope-switch") as pool:
            results = dict(zip(map(id, remote), pool.map(self._poll_one, remote), strict=True))
        results.update((id(t), self._poll_one(t)) for t in cached)
        rows: dict[str, list[dict[str, Any]]] = {k: [] for k in _KINDS}
        tables: dict[str, list[pa.Table]] = {k: [] for k in _KINDS}
        status: list[dict[str, Any]] = []
        columns: dict[str, list[Any]] = {k: [] for k in _KINDS}  # each switch's columns
        for t in self.targets:
            st, p, q, ll = results[id(t)]
            st.update(ts=ts, switch=t.switch, asic=t.asic)
            status.append(st)
            if isinstance(p, tuple):  # columns: (ports, priorities, queues)
                self._merge_columns(t, p, ts, columns)
            else:
                self._merge_rows(t, p, q, ts, rows)
            if isinstance(ll, dict):  # columns (gNMI SONiC), the same on every poll
                if ll:
                    columns["lldp_link"].append((dict(ll), {"ts": ts, "local_device": t.switch}))
                continue
            for r in ll:
                r.update(ts=ts, local_device=t.switch)
                rows["lldp_link"].append(r)
        seen: dict[int, tuple[list[Any], pa.Array]] = {}
        for kind, ps in columns.items():  # every switch's columns of a kind: one table
            if ps:
                tables[kind].append(_table(KINDS[kind], ps, self._arrays, seen))
        self._arrays = seen  # only the lists this poll had: the others may be gone
        n = {k: len(rows[k]) + sum(x.num_rows for x in tables[k]) for k in _KINDS}
        self.stats.received += n["switch_port_sample"] + n["switch_queue_sample"] + n["lldp_link"]
        up = sum(1 for s in status if s["up"])
        self.stats.extra["switches_up"] = float(up)
        self.stats.extra["switches_down"] = float(len(status) - up)
        out = [Batch.from_rows("switch_status", status)]
        for kind in _KINDS:
            if n[kind]:
                k = KINDS[kind]
                parts = ([k.to_arrow(rows[kind])] if rows[kind] else []) + tables[kind]
                out.append(Batch(k, parts[0] if len(parts) == 1 else pa.concat_tables(parts)))
        groups = self._ecmp_rows(out, rows["lldp_link"], tables["lldp_link"], ts)
        if groups:
            out.append(Batch.from_rows("ecmp_group_sample", groups))
        return out

    def _merge_rows(
        self, t: Target, p: list[Any], q: list[Any], ts: int, rows: dict[str, list[Any]]
    ) -> None:
        for r in p:
            r.setdefault("ts", ts)  # gNMI rows carry the switch's own update time
            r.update(switch=t.switch, asic=t.asic, role=t.role)
            r.pop("oid", None)
            for pr in r.pop("priorities", ()):
                pr.update(ts=r["ts"], switch=t.switch, asic=t.asic, port=r["port"])
                rows["switch_priority_sample"].append(pr)
            r["rx_bytes_per_second"], r["tx_bytes_per_second"], r["tx_utilization_ratio"] = (
                self._rates(
                    (t.switch, t.asic, r["port"]), r["ts"], r.get("rx_bytes_total"),
                    r.get("tx_bytes_total"), r.get("rx_bytes_per_second"),
                    r.get("tx_bytes_per_second"), r.get("speed_bps"),
                )
            )  # fmt: skip
            rows["switch_port_sample"].append(r)
        for r in q:
            r.setdefault("ts", ts)
            r.update(switch=t.switch, asic=t.asic)
            r.pop("oid", None)
            rows["switch_queue_sample"].append(r)

    def _merge_columns(
        self, t: Target, cols: tuple[dict[str, list[Any]], ...], ts: int,
        parts: dict[str, list[Any]],
    ) -> None:  # fmt: skip
        pc, prio, qc = cols
        for kind, c in zip(_KINDS[:3], (pc, prio, qc), strict=True):
            n = len(c["ts"])
            if not n:
                continue
            if None in c["ts"]:
                c["ts"] = [ts if x is None else x for x in c["ts"]]
            const = {"switch": t.switch, "asic": t.asic}
            if kind == "switch_port_sample":
                const["role"] = t.role
                rx = c.get("rx_bytes_per_second") or [None] * n
                tx = c.get("tx_bytes_per_second") or [None] * n
                got = self._column_rates(t, c, rx, tx)
                if got is not None:
                    c.update(got)
                    parts[kind].append((c, const))
                    continue
                self._flush_prev(t)
                rates = [
                    self._rates((t.switch, t.asic, port), *row)
                    for port, *row in zip(
                        c["port"], c["ts"], c["rx_bytes_total"], c["tx_bytes_total"], rx, tx,
                        c["speed_bps"], strict=True,
                    )
                ]  # fmt: skip
                for i, f in enumerate(
                    ("rx_bytes_per_second", "tx_bytes_per_second", "tx_utilization_ratio")
                ):
                    c[f] = [r[i] for r in rates]
            parts[kind].append((c, const))

    def _column_rates(
        self, t: Target, c: dict[str, Any], rx: Any, tx: Any
    ) -> dict[str, pa.Array] | None:
        """`_rates` for a whole switch at once, where its byte counters are uint64 columns on
        every port and the switch gave no rates of its own: the same values (the difference
        of the integer counters, as a double, over the same double seconds), the same resets
        counted, no rate where a counter went backwards, has no previous value or no time
        passed. None where that does not apply: the caller goes port by port."""
        rxc, txc = c["rx_bytes_total"], c["tx_bytes_total"]
        if not (
            isinstance(rxc, np.ndarray) and isinstance(txc, np.ndarray)
            and rxc.dtype == np.uint64 and txc.dtype == np.uint64
            and all(isinstance(v, list) and v.count(None) == len(v) for v in (rx, tx))
        ):  # fmt: skip
            return None
        ts = c["ts"]
        if not isinstance(ts, np.ndarray):
            if None in ts:
                return None
            ts = np.asarray(ts, dtype=np.int64)
        secs = ts / 1000  # int64 / int: doubles, as ts / 1000 in `_rates`
        names = list(c["port"])
        key = (t.switch, t.asic)
        prev = self._prev_cols.get(key)
        if prev is None or prev.names != names:
            self._flush_prev(t)
            prev = self._prev_from_rows(t, names)
        out: dict[str, pa.Array] = {}
        rates = []
        for f, cur, old, known in (
            ("rx_bytes_per_second", rxc, prev.rx, prev.rx_known),
            ("tx_bytes_per_second", txc, prev.tx, prev.tx_known),
        ):
            dt = secs - prev.secs
            ok = known & (dt > 0)  # nan (no previous poll) > 0 is False
            back = ok & (cur < old)
            if back.any():
                self.resets += int(back.sum())
                self.stats.extra["counter_resets"] = float(self.resets)
            ok &= ~back
            # where ok: cur >= old, dt > 0 (elsewhere 0, masked: null)
            rate = np.divide((cur - old).astype(np.float64), dt, out=np.zeros(len(dt)), where=ok)
            out[f] = pa.array(rate, pa.float64(), mask=~ok)
            rates.append((rate, ok))
        speed = c["speed_bps"]
        sp = np.array([s if s else np.nan for s in speed], dtype=np.float64)
        has = ~np.isnan(sp)
        rate, ok = rates[1]
        util = np.divide(rate * 8, sp, out=np.zeros(len(sp)), where=ok & has)
        out["tx_utilization_ratio"] = pa.array(util, pa.float64(), mask=~(ok & has))
        self._prev_cols[key] = _PrevColumns(
            names, secs, rxc, np.ones(len(names), dtype=bool), txc, np.ones(len(names), dtype=bool)
        )
        return out

    def _prev_from_rows(self, t: Target, names: list[str]) -> _PrevColumns:
        """The previous counters of a switch's ports from `_prev` (row by row polls), as
        columns: unknown where a port has no entry or a counter had no value."""
        n = len(names)
        secs = np.full(n, np.nan)
        rx, tx = np.zeros(n, dtype=np.uint64), np.zeros(n, dtype=np.uint64)
        rxk, txk = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        for i, name in enumerate(names):
            p = self._prev.get((t.switch, t.asic, name))
            if p is None:
                continue
            secs[i] = p[0]
            if p[1] is not None:
                rx[i], rxk[i] = p[1], True
            if p[2] is not None:
                tx[i], txk[i] = p[2], True
        return _PrevColumns(names, secs, rx, rxk, tx, txk)

    def _flush_prev(self, t: Target) -> None:
        """A switch's previous counters kept as columns back into `_prev` (row by row)."""
        prev = self._prev_cols.pop((t.switch, t.asic), None)
        if prev is None:
            return
        rx = [int(v) if k else None for v, k in zip(prev.rx.tolist(), prev.rx_known, strict=True)]
        tx = [int(v) if k else None for v, k in zip(prev.tx.tolist(), prev.tx_known, strict=True)]
        for name, s, r, x in zip(prev.names, prev.secs.tolist(), rx, tx, strict=True):
            if s == s:  # not nan: the port was polled
                self._prev[(t.switch, t.asic, name)] = (s, r, x)

    def _poll_one(self, t: Target) -> tuple[dict[str, Any], Any, Any, list[Any]]:
        who = t.switch + (f"/{t.asic}" if t.asic else "")
        t0 = time.perf_counter()
        try:
            own = getattr(t.db, "poll_columns", None)  # gNMI SONiC: columns from its cache
            if own is not None:
                pc, prio, qc, ll = own(self.problems.about(who), lldp=self.cfg.lldp)
                p: Any = (pc, prio, qc)
                nports, nqueues = len(pc["port"]), len(qc["port"])
            else:
                own = getattr(t.db, "poll", None)  # other dialects poll their own caches
                if own is not None:
                    p, q, ll = own(self.problems.about(who), lldp=self.cfg.lldp)
                else:
                    p, q, ll = poll(t.db, self.problems.about(who), lldp=self.cfg.lldp)
                nports, nqueues = len(p), len(q)
        except SwitchDown as e:
            # one line when it goes down and one when it answers again, not every poll
            self.problems.add("switch_down", who, str(e), log=False)
            if (t.switch, t.asic) not in self._down:
                self._down.add((t.switch, t.asic))
                log.warning("switch %s: down: %s", who, e)
            return (
                {"up": 0, "poll_duration_seconds": time.perf_counter() - t0, "error": str(e)},
                [], [], [],
            )  # fmt: skip
        except Exception as e:  # one switch's surprise must not stop the others' poll
            self.problems.add("poll_failed", who, f"{type(e).__name__}: {e}")
            log.debug("switch %s: poll failed", who, exc_info=True)
            return (
                {"up": 0, "poll_duration_seconds": time.perf_counter() - t0, "error": f"{type(e).__name__}: {e}"},
                [], [], [],
            )  # fmt: skip
        if (t.switch, t.asic) in self._down:
            self._down.discard((t.switch, t.asic))
            log.warning("switch %s: answering again", who)
        unserved = getattr(t.db, "unserved", None)  # gNMI: the paths the switch did not serve
        st = {
            "up": 1,
            "poll_duration_seconds": time.perf_counter() - t0,
            "ports": nports,
            "queues": nqueues,
            "error": unserved() if unserved is not None else "",
        }
        return st, p, [] if isinstance(p, tuple) else q, ll

    def _rates(
        self,
        key: tuple[str, str, str],
        ts: int,
        rx: int | None,
        tx: int | None,
        rxr: float | None,
        txr: float | None,
        speed: float | None,
    ) -> tuple[float | None, float | None, float | None]:
        """(rx, tx bytes/s, tx utilization): the switch's RATES where it has them, else derived
        from the previous poll; a counter that went backwards (reset/wrap) gives no rate for
        this interval, never a negative one."""
        prev = self._prev.get(key)
        self._prev[key] = (ts / 1000, rx, tx)
        out = [rxr, txr]
        for i, cur in enumerate((rx, tx)):
            if out[i] is not None or prev is None or cur is None:
                continue
            old, dt = prev[i + 1], ts / 1000 - prev[0]
            if old is None or dt <= 0:
                continue
            if cur < old:
                self.resets += 1
                self.stats.extra["counter_resets"] = float(self.resets)
                continue
            out[i] = (cur - old) / dt
        util = out[1] * 8 / speed if speed and out[1] is not None else None
        return out[0], out[1], util

    def _ecmp_rows(
        self, batches: list[Batch], lldp: list[dict[str, Any]], lldp_tables: list[pa.Table],
        ts: int,
    ) -> list[dict[str, Any]]:  # fmt: skip
        groups = dict(self.cfg.ecmp_groups)
        if self.cfg.uplink_neighbor:
            lldp = lldp + [r for tb in lldp_tables for r in tb.to_pylist()]
            groups = ecmp.merge_groups(
                groups, ecmp.groups_from_lldp(lldp, self.cfg.uplink_neighbor)
            )
        if not groups:
            return []
        rates: dict[str, dict[str, float | None]] = {}
        speeds: dict[str, dict[str, float | None]] = {}
        cols = ("switch", "port", "tx_bytes_per_second", "speed_bps")
        for b in batches:
            if b.kind.name != "switch_port_sample":
                continue
            for sw, port, txr, speed in zip(
                *(b.table.column(c).to_pylist() for c in cols), strict=True
            ):
                rates.setdefault(sw, {})[port] = txr
                speeds.setdefault(sw, {})[port] = speed
        out = []
        for sw, gs in groups.items():
            for g, members in gs.items():
                s = ecmp.spread(rates.get(sw, {}), speeds.get(sw, {}), members)
                if s is not None:
                    out.append({"ts": ts, "switch": sw, "group": g, **s})
        return out

    def close(self) -> None:
        for t in self.targets:
            t.db.close()
        if self._gnmi_loop is not None:
            self._gnmi_loop.close()


class _PrevColumns:
    """A switch's counters at its previous poll, as columns (`SwitchSource._column_rates`)."""

    __slots__ = ("names", "rx", "rx_known", "secs", "tx", "tx_known")

    def __init__(
        self, names: list[str], secs: Any, rx: Any, rx_known: Any, tx: Any, tx_known: Any
    ) -> None:
        self.names, self.secs = names, secs
        self.rx, self.rx_known, self.tx, self.tx_known = rx, rx_known, tx, tx_known


_KINDS = ("switch_port_sample", "switch_priority_sample", "switch_queue_sample", "lldp_link")


def _table(
    kind: RecordKind,
    parts: list[tuple[dict[str, Any], dict[str, Any]]],
    arrays_of: dict[int, tuple[list[Any], pa.Array]] | None = None,
    seen: dict[int, tuple[list[Any], pa.Array]] | None = None,
) -> pa.Table:
    """One table of `kind` from many switches' columns: each part is (columns: lists or arrays
    of equal length, values the same on each of its rows); absent fields are null, an absent
    label ''. A field that is an array in every part becomes one array (no Python objects).
    `arrays_of`: Arrow arrays of lists converted before (by the list itself, which must not
    have changed since; lists are never edited in place here); `seen` gets those of this
    table's lists."""
    arrays_of = {} if arrays_of is None else arrays_of
    seen = {} if seen is None else seen
    ns = [len(next(iter(c.values()))) for c, _ in parts]
    n = sum(ns)
    for c, const in parts:
        unknown = (set(c) | set(const)) - set(kind.by_name)
        if unknown:
            raise ValueError(f"{kind.name}: unknown field(s) {sorted(unknown)}")
    which: Any = None  # the part of each row, where constants differ between parts
    arrays = []
    for f in kind.fields:
        if f.name in parts[0][1]:
            vals = [const[f.name] for _, const in parts]
            if vals.count(vals[0]) == len(vals):
                arrays.append(pa.repeat(pa.scalar(vals[0], f.arrow_type), n))
            else:
                if which is None:
                    which = pa.array(np.repeat(np.arange(len(parts)), ns))
                arrays.append(pa.array(vals, f.arrow_type).take(which))
            continue
        chunks = [c.get(f.name) for c, _ in parts]
        if all(isinstance(v, pa.Array) for v in chunks):  # made by the source (rates)
            arrays.append(pa.concat_arrays(chunks) if len(chunks) > 1 else chunks[0])
            continue
        chunks = [v.to_pylist() if isinstance(v, pa.Array) else v for v in chunks]
        arrs = [v for v in chunks if isinstance(v, np.ndarray)]
        if len(arrs) == len(chunks) and len({v.dtype for v in arrs}) == 1:
            arrays.append(pa.array(arrs[0] if len(arrs) == 1 else np.concatenate(arrs),
                                   f.arrow_type))  # fmt: skip
            continue
        if all(v is None or (isinstance(v, list) and v.count(None) == len(v)) for v in chunks):
            arrays.append(
                pa.nulls(n, f.arrow_type)
                if f.nullable
                else pa.repeat(pa.scalar("", f.arrow_type), n)
            )
            continue
        lists: list[list[Any]] = [v for v in chunks if type(v) is list]
        if len(lists) == len(chunks) and (
            f.nullable or not any(None in lst for lst in lists)
        ):  # each part's list as an array (converted once while the list is the same), joined
            got = []
            for lst in lists:
                hit = arrays_of.get(id(lst))
                if hit is None or hit[0] is not lst:
                    hit = (lst, pa.array(lst, f.arrow_type))
                seen[id(lst)] = hit
                got.append(hit[1])
            arrays.append(pa.concat_arrays(got) if len(got) > 1 else got[0])
            continue
        flat: list[Any] = []
        fill = None if f.nullable else ""  # a part without the field, as a table of its own
        for v, k in zip(chunks, ns, strict=True):
            if isinstance(v, np.ndarray):
                flat.extend(v.tolist())
            elif v is None or v.count(None) == k:
                flat.extend([fill] * k)
            else:
                flat.extend(v)
        arrays.append(pa.array(flat, f.arrow_type))
    return pa.Table.from_arrays(arrays, schema=kind.arrow_schema)


__all__ = ["SwitchSource"]
