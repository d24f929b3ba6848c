"""A Problems stand-in for the switch counter tests: records (reason, subject) of every problem
the code under test names, so a test can assert which bad values were named."""

from __future__ import annotations


class Seen:
    def __init__(self) -> None:
        self.got: list[tuple[str, str]] = []

    def add(self, reason: str, subject: str = "", detail: str = "", n: int = 1) -> None:
        self.got.append((reason, subject))
