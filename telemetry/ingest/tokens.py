"""The deduplication tokens the gateway has taken: those of batches still in its write-ahead log
(pending, never forgotten while their batch waits) and those whose rows reached the store
(done, remembered for a window and kept in an append-only file across restarts).

An agent retries a batch with the token it was born with; the gateway answers a token it knows
with success and stores nothing, as ClickHouse does for a deduplicated insert. The window counts
from the later of the rows reaching the store and this process starting: an agent retries when it
can reach the gateway again, which after a restart is soon after the start. Never reads batches.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path

DONE_FILE = "tokens.done"


class SeenTokens:
    def __init__(
        self,
        directory: str | os.PathLike[str],
        window_seconds: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        fsync: bool = True,
    ) -> None:
        self.path = Path(directory) / DONE_FILE
        self.window = window_seconds
        self.clock = clock
        self.fsync = fsync
        self._lock = threading.Lock()
        self._pending: set[str] = set()
        self._done: OrderedDict[str, float] = OrderedDict()  # token -> when, oldest first
        self._lines = 0  # lines in the file (compacted when it holds many expired ones)
        self._load()

    def _load(self) -> None:
        now = self.clock()
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return
        for line in text.splitlines():
            tok = line.strip()
            if tok:
                self._done[tok] = now  # the window restarts with the process
                self._done.move_to_end(tok)
                self._lines += 1

    def add_pending(self, tokens: Iterable[str]) -> None:
        """Tokens of batches found in the write-ahead log at start (or put back by a person)."""
        with self._lock:
            self._pending.update(tokens)

    def claim(self, token: str) -> bool:
        """True: a token not seen (now pending); False: a batch this gateway already holds or
        stored, within the window."""
        with self._lock:
            if token in self._pending or token in self._done:
                return False
            self._pending.add(token)
            return True

    def release(self, tokens: Iterable[str]) -> None:
        """Claims whose batch was not written after all (the commit failed): the agent retries."""
        with self._lock:
            self._pending.difference_update(tokens)

    def done(self, tokens: list[str]) -> None:
        """The rows of these pending tokens are in the store: remember them for the window, on
        disk first (a restart must still know them)."""
        if not tokens:
            return
        with self._lock:
            with open(self.path, "a") as f:
                f.write("".join(t + "\n" for t in tokens))
                f.flush()
                if self.fsync:
                    os.fsync(f.fileno())
            self._lines += len(tokens)
            now = self.clock()
            for t in tokens:
                self._pending.discard(t)
                self._done[t] = now
                self._done.move_to_end(t)
            self._expire(now)

    def _expire(self, now: float) -> None:
        cut = now - self.window
        while self._done:
            tok, when = next(iter(self._done.items()))
            if when > cut:
                break
            del self._done[tok]
        if self._lines > 2 * len(self._done) + 10_000:
            self._compact()

    def _compact(self) -> None:
        """Rewrite the file with the tokens still in the window (a new file, then the rename)."""
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write("".join(t + "\n" for t in self._done))
            f.flush()
            if self.fsync:
                os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self._lines = len(self._done)

    def counts(self) -> tuple[int, int]:
        """(pending, done) tokens held."""
        with self._lock:
            self._expire(self.clock())
            return len(self._pending), len(self._done)
