"""Shared helpers for the node exporter tests: fixture paths and a copy of a sysfs tree to mutate."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.sysfs_fixture import node8

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
PROCFS = FIXTURES / "sysfs" / "procfs"
NODE8 = node8()


class Problems:
    """Collects (reason, message) reported by a collector."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def __call__(self, reason: str, message: str) -> None:
        self.items.append((reason, message))

    @property
    def reasons(self) -> list[str]:
        return [r for r, _ in self.items]


@pytest.fixture
def problems() -> Problems:
    return Problems()


@pytest.fixture
def procfs_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "procfs"
    shutil.copytree(PROCFS, dst, symlinks=True)
    return dst


@pytest.fixture
def node8_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "node8"
    shutil.copytree(NODE8, dst, symlinks=True)
    return dst
