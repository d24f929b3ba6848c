"""The gateway's memory of tokens: pending ones are never forgotten, done ones for a window that
restarts with the process, on disk across restarts, the file compacted as tokens expire."""

from __future__ import annotations

from pathlib import Path

from telemetry.ingest.tokens import DONE_FILE, SeenTokens


class Clock:
    t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_token_is_taken_once_until_its_window_ends(tmp_path: Path) -> None:
    clock = Clock()
    seen = SeenTokens(tmp_path, 60, clock=clock, fsync=False)
    assert seen.claim("a") and not seen.claim("a")
    clock.t += 3600  # pending: the batch still waits for the store, whatever its age
    assert not seen.claim("a")
    seen.done(["a"])
    clock.t += 59
    assert not seen.claim("a")
    clock.t += 2
    assert seen.counts() == (0, 0)
    assert seen.claim("a")  # past the window: a new batch


def test_a_failed_commit_releases_the_claim(tmp_path: Path) -> None:
    seen = SeenTokens(tmp_path, 60, fsync=False)
    assert seen.claim("b")
    seen.release(["b"])
    assert seen.claim("b")


def test_done_tokens_survive_a_restart_and_their_window_restarts(tmp_path: Path) -> None:
    clock = Clock()
    seen = SeenTokens(tmp_path, 60, clock=clock, fsync=False)
    for t in ("x", "y"):
        seen.claim(t)
    seen.done(["x", "y"])
    clock.t += 50
    again = SeenTokens(tmp_path, 60, clock=clock, fsync=False)  # a new process, 50 s later
    clock.t += 50  # 100 s after they were done, 50 s after the start
    assert not again.claim("x") and not again.claim("y")
    assert again.counts() == (0, 2)


def test_the_file_is_compacted_to_the_tokens_in_the_window(tmp_path: Path) -> None:
    clock = Clock()
    seen = SeenTokens(tmp_path, 10, clock=clock, fsync=False)
    for i in range(30_000):
        seen.claim(f"t{i}")
    seen.done([f"t{i}" for i in range(30_000)])
    clock.t += 11
    seen.claim("last")
    seen.done(["last"])  # the 30,000 expired: the file is rewritten with what is left
    assert (tmp_path / DONE_FILE).read_text() == "last\n"
