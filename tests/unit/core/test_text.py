"""split_top_level: the one bracket-aware splitter (gNMI paths, label selectors)."""

from __future__ import annotations

import pytest

from telemetry.text import human_bytes, parse_size, split_top_level


@pytest.mark.parametrize(
    ("text", "sep", "brackets", "parts"),
    [
        ("", "/", "[]", []),
        ("a", "/", "[]", ["a"]),
        (
            "interfaces/interface[name=Ethernet1/1]/state",
            "/",
            "[]",
            ["interfaces", "interface[name=Ethernet1/1]", "state"],
        ),
        ("a[x=[1/2]/3]/b", "/", "[]", ["a[x=[1/2]/3]", "b"]),  # nested brackets
        ("a//b/", "/", "[]", ["a", "", "b"]),  # inner empty part kept, a last one dropped
        ("a=b,c In (x,y),d Exists", ",", "()", ["a=b", "c In (x,y)", "d Exists"]),
        ("k In (x, y) ,z", ",", "()", ["k In (x, y) ", "z"]),  # parts are not stripped
        ("a[b/c", "/", "[]", ["a[b/c"]),  # unclosed: the rest is one part
        ("a,(b", ",", "()", ["a", "(b"]),
    ],
)
def test_split_top_level(text: str, sep: str, brackets: str, parts: list[str]) -> None:
    assert split_top_level(text, sep, brackets[0], brackets[1]) == parts


@pytest.mark.parametrize(
    ("value", "size"),
    [(7, 7), ("512MiB", 512 << 20), ("2gib", 2 << 30), ("1.5 GB", 1_500_000_000), ("64k", 64_000)],
)
def test_parse_size(value: object, size: int) -> None:
    assert parse_size(value) == size


@pytest.mark.parametrize("value", ["1x", "", "MiB", True, "-1MiB"])
def test_parse_size_refuses(value: object) -> None:
    with pytest.raises(ValueError, match="not a size"):
        parse_size(value)


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (512, "512 B"),
        (43_210, "43.2 kB"),  # what a job's few sampled flows add up to: never "0.00 GB"
        (4_096_000, "4.1 MB"),
        (999_600, "1 MB"),
        (1.25e9, "1.25 GB"),
        (2_492_400_000_000, "2.49 TB"),
        (7e15, "7,000 TB"),
    ],
)
def test_human_bytes(n: float, text: str) -> None:
    assert human_bytes(n) == text
