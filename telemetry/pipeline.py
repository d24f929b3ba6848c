"""The pipeline: sources -> transforms -> sinks (contracts.py), and the driver that runs them.

A source's `collect()` returns record batches; transforms enrich batches in order (a failing
transform is logged by name and the batch goes on unchanged); every sink gets every batch through
`export()`, and the driver never runs two exports of the same sink at once. Every component keeps
`ComponentStats` so railscope reports on itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from telemetry.contracts import (
    Batch,
    ComponentStats,
    Sink,
    Source,
    Transform,
    self_report,
)
from telemetry.problems import Problems

log = logging.getLogger(__name__)


# A source's flags that set keys of its config section: {flag: (key, metavar)} (BaseSource).
ConfigFlags = Mapping[str, tuple[str, str | None]]


# --- sources ---------------------------------------------------------------------------------
class BaseSource:
    """Convenience base: stats plus a timed `collect()` around `_collect()`.

    "Nothing here on this host" should return [] (a quiet success), not raise.
    """

    name: str = "source"
    # What `received` counts for this source (the `unit` label of
    # railscope_component_received_total): datagrams, objects, entries, records ...
    unit: ClassVar[str] = "records"
    # The source's bounded problem reasons: the `reason` label values of railscope_component_failed.
    reasons: ClassVar[tuple[str, ...]] = ()
    interval_seconds: float = 10.0  # set by telemetry.registry.build_source from the config

    def __init__(self, config: Any = None, from_path: str | None = None) -> None:
        """`config`: the source's section (its `Config` model; the defaults when None);
        `from_path`: --from FILE|DIR, replay instead of live (None)."""
        model = getattr(self, "Config", None)
        if model is not None:
            self.cfg = config if config is not None else model()
        self.from_path = Path(from_path) if from_path else None
        self.stats = ComponentStats(f"source:{self.name}", unit=self.unit)
        self.problems = Problems(
            self.stats, self.name, self.reasons, logger=logging.getLogger(type(self).__module__)
        )

    def _collect(self) -> list[Batch]:
        raise NotImplementedError

    # Flags that set a key of the source's config section (`Config`, its pydantic model):
    # {flag: (key, metavar)}, the key dotted for a nested section. add_config_flags declares them
    # (type, choices and help from the model), fold_config_flags lays them over the section.
    config_flags: ClassVar[ConfigFlags] = {}

    @classmethod
    def add_config_flags(cls, p: Any) -> Any:
        """Declares `config_flags` in the group "NAME options" of the source's parser `p` and
        returns the group, for the source's other flags."""
        from telemetry.config import flag_options

        group = p.add_argument_group(f"{cls.name} options")
        for flag, (key, metavar) in cls.config_flags.items():
            kw = flag_options(cls.Config, key)  # type: ignore[attr-defined]
            group.add_argument(flag, **kw, **({"metavar": metavar} if metavar else {}))
        return group

    @classmethod
    def fold_config_flags(cls, args: Any, section: Mapping[str, Any]) -> dict[str, Any]:
        dests = {f.lstrip("-").replace("-", "_"): key for f, (key, _) in cls.config_flags.items()}
        return cls.flags_onto(section, args, dests)

    @staticmethod
    def flags_onto(
        section: Mapping[str, Any], args: Any, keys: Mapping[str, str] | Iterable[str]
    ) -> dict[str, Any]:
        """For `fold_args`: the config `section` with the flags given on this command line on
        top. `keys` maps a flag's argparse dest to the section key it sets, dotted for a nested
        section (or lists dests that are their own key); a flag left unset (None, or an empty
        default) changes nothing. The section itself is not changed."""
        pairs = keys.items() if isinstance(keys, Mapping) else ((k, k) for k in keys)
        out = dict(section)
        for dest, key in pairs:
            value = getattr(args, dest, None)
            if value is None or value == "":
                continue
            *parents, leaf = key.split(".")
            at = out
            for name in parents:  # copy each nested section on the way: the input stays as is
                at[name] = dict(at.get(name) or {})
                at = at[name]
            at[leaf] = value
        return out

    def collect(self) -> list[Batch]:
        t = time.perf_counter()
        try:
            batches = self._collect()
        except Exception as e:
            self.stats.last_success = False
            self.stats.last_error = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
            self.problems.exception(e, log=False)  # the caller logs it
            raise  # the caller says so, once: logged by a pipeline that goes on, printed by a CLI
        finally:
            self.stats.last_duration_seconds = time.perf_counter() - t
        self.stats.last_success = True
        self.stats.last_error = ""
        self.stats.sent += sum(b.num_rows for b in batches)
        return batches


# --- the driver ------------------------------------------------------------------------------
def _handed_over(batches: list[Batch]) -> Iterator[Batch]:
    """Yield a cycle's batches, dropping the driver's reference to each once the sinks have it: a
    sink that seals and spools a batch is then the only holder of its rows (the spool file is
    the copy that waits for the store), not the driver's list of the whole cycle."""
    batches.reverse()
    while batches:
        yield batches.pop()


class Pipeline:
    """Runs sources -> transforms -> sinks. `run_once()` for one cycle, `run()` on an interval."""

    def __init__(
        self,
        sources: Sequence[Source],
        sinks: Sequence[Sink],
        transforms: Sequence[Transform] = (),
        *,
        report_host: str | None = None,
        admit: Callable[[list[Batch]], None] | None = None,
    ) -> None:
        """`report_host`: when set, every cycle also stores a component_stat row per component.
        `admit`: sees each source's whole cycle before any of it is published, and raises to
        refuse it (a replay whose rows the store's TTL would drop: nothing of it is stored)."""
        self.report_host = report_host
        self.admit = admit
        self.sources = list(sources)
        self.transforms = list(transforms)
        self.sinks = list(sinks)
        self._sink_locks = {id(s): threading.Lock() for s in self.sinks}
        self.transform_stats = {
            t.name: ComponentStats(f"transform:{t.name}") for t in self.transforms
        }
        self._transform_problems = {
            name: Problems(st, name, (), logger=log) for name, st in self.transform_stats.items()
        }
        self._stop = threading.Event()
        self.restarts = 0  # times run_supervised restarted a crashed run()
        self._crashed: str | None = None  # why the last run() died, while waiting to restart

    def apply_transforms(self, batch: Batch) -> Batch:
        for t in self.transforms:
            st = self.transform_stats[t.name]
            st.received += batch.num_rows
            try:
                batch = t.process(batch)
                st.sent += batch.num_rows
                st.last_success = True
            except Exception as e:  # a failing transform must not stop the pipeline
                st.last_success = False
                self._transform_problems[t.name].exception(e, log=False)
                log.error("transform %s failed on %s batch: %s", t.name, batch.kind.name, e)
        return batch

    def publish(self, batches: Iterable[Batch]) -> int:
        """Push batches through the transforms into every sink. Returns rows published."""
        n = 0
        for batch in batches:
            if batch.num_rows == 0:
                continue
            batch = self.apply_transforms(batch)
            for sink in self.sinks:
                with self._sink_locks[id(sink)]:
                    sink.export(batch)
            n += batch.num_rows
        return n

    def run_once(self) -> int:
        n = 0
        for src in self.sources:
            try:
                batches = list(src.collect())
            except Exception as e:  # counted by the source; the others keep going
                log.error("source %s: collection failed: %s", src.name, e)
                continue
            if self.admit is not None:
                self.admit(batches)
            n += self.publish(_handed_over(batches))
        if self.report_host is not None:
            self.publish([self.self_report()])
        self.flush()
        return n

    def self_report(self) -> Batch:
        """One component_stat row per component: how railscope itself is doing."""
        return self_report(self.report_host, self.components())

    def flush(self) -> None:
        for sink in self.sinks:
            with self._sink_locks[id(sink)]:
                sink.flush()

    def run(self, interval: float, *, cycles: int | None = None) -> None:
        """Collect every `interval` seconds until `stop()` (or `cycles` cycles)."""
        done = 0
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.run_once()
            done += 1
            if cycles is not None and done >= cycles:
                break
            next_at += interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def run_supervised(
        self, interval: float, *, backoff_initial: float = 1.0, backoff_max: float = 60.0
    ) -> None:
        """`run()` until `stop()`; a run that dies (a sink raising, a bug) is logged, counted in
        `restarts` (the `restarts` gauge of each source) and started again after a backoff that
        doubles up to `backoff_max` and resets once a run has lasted longer than that."""
        backoff = backoff_initial
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.run(interval)
                return
            except Exception as e:
                self.restarts += 1
                self._crashed = f"{type(e).__name__}: {e}"
                for src in self.sources:
                    with src.stats.lock:
                        src.stats.extra["restarts"] = float(self.restarts)
                if time.monotonic() - started > backoff_max:
                    backoff = backoff_initial
                log.exception("pipeline died (restart %d in %.0fs)", self.restarts, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff_max, backoff * 2)
                self._crashed = None

    def health(self) -> list[str]:
        """What is wrong right now, one line each: a crashed run waiting for its restart, or a
        source whose own thread died (its `health()`). Empty when healthy."""
        out = [f"pipeline restarting after: {self._crashed}"] if self._crashed else []
        for src in self.sources:
            check = getattr(src, "health", None)
            problem = check() if check is not None else None
            if problem:
                out.append(f"{src.name}: {problem}")
        return out

    def stop(self) -> None:
        self._stop.set()

    def shutdown(self, grace_seconds: float) -> bool:
        """Graceful stop (SIGTERM): stop intake, publish what the sources still hold, then flush
        every sink to the store or its spool — all within `grace_seconds`. Returns False when the
        grace ran out first (the spool keeps what was sealed; it replays on the next start)."""
        deadline = time.monotonic() + grace_seconds
        self.stop()
        for src in self.sources:
            stopper = getattr(src, "stop_intake", None)
            if stopper is not None:
                stopper()
        done = threading.Event()

        def finish() -> None:
            try:
                for src in self.sources:  # what arrived since the last cycle (sflow's buffer)
                    try:
                        self.publish(src.collect())
                    except Exception as e:
                        log.error("source %s: last collection failed: %s", src.name, e)
                self.close()
            finally:
                done.set()

        threading.Thread(target=finish, name="railscope-shutdown", daemon=True).start()
        if not done.wait(max(0.0, deadline - time.monotonic())):
            log.error(
                "shutdown: grace of %.0fs ran out before every sink was flushed; "
                "what was spooled replays on the next start",
                grace_seconds,
            )
            return False
        return True

    def close(self) -> None:
        for sink in self.sinks:
            with self._sink_locks[id(sink)]:
                sink.close()
        for src in self.sources:  # sources holding files, sockets or threads release them
            closer = getattr(src, "close", None)
            if closer is not None:
                closer()

    def components(self) -> list[ComponentStats]:
        out = [s.stats for s in self.sources]
        out += list(self.transform_stats.values())
        out += [s.stats for s in self.sinks]
        return out


__all__ = ["BaseSource", "ConfigFlags", "Pipeline"]
