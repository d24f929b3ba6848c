"""Fuzzing the ethtool ioctl replies (GSSET_INFO count, GSTRINGS names, GSTATS values) that
`IoctlEthtool` decodes, with a fake kernel that answers each ioctl with a mutated reply: only
EthtoolError escapes (the rdma collector counts it by reason), whatever count, names or values
come back. >= 100,000 replies; marked slow."""

from __future__ import annotations

import ctypes
import random
import struct

import pytest
from hypothesis import given

from exporters.node.ethtool import (
    ETH_GSTRING_LEN,
    ETHTOOL_GSSET_INFO,
    ETHTOOL_GSTATS,
    ETHTOOL_GSTRINGS,
    EthtoolError,
    IoctlEthtool,
)
from tests.fuzz import FUZZ, SEED

pytestmark = pytest.mark.slow
PER_EXAMPLE = 250
NEEDED = 100_000
NAMES = [b"rx_packets", b"tx_packets", b"rx_prio3_pause", b"rx_vport_rdma_unicast_bytes"]


def _mutate(rnd: random.Random, b: bytes) -> bytes:
    out = bytearray(b)
    for _ in range(rnd.randint(0, 3)):
        if out and rnd.random() < 0.7:
            out[rnd.randrange(len(out))] = rnd.randrange(256)
        else:
            out[rnd.randrange(len(out) + 1) :] = rnd.randbytes(rnd.randint(0, 8))
    return bytes(out)


class FakeKernel(IoctlEthtool):
    """Answers SIOCETHTOOL from a seeded generator: a plausible reply, then mutated."""

    def __init__(self, rnd: random.Random) -> None:
        super().__init__()
        self.rnd = rnd
        self.replies = 0

    def _ioctl(self, netdev: str, buf: ctypes.Array[ctypes.c_char]) -> None:
        rnd, size = self.rnd, len(buf)
        cmd = struct.unpack_from("I", buf.raw)[0]
        if cmd == ETHTOOL_GSSET_INFO:
            n = rnd.choice([0, 1, 4, 64, rnd.randrange(1 << 32)])
            reply = struct.pack("IIQI", cmd, 0, rnd.choice([2, 0, rnd.randrange(1 << 64)]), n)
        elif cmd == ETHTOOL_GSTRINGS:
            n = (size - 12) // ETH_GSTRING_LEN
            names = b"".join(
                rnd.choice(NAMES).ljust(ETH_GSTRING_LEN, b"\0")
                if rnd.random() < 0.8
                else rnd.randbytes(ETH_GSTRING_LEN)
                for _ in range(n)
            )
            reply = struct.pack("III", cmd, 1, n) + names
        else:
            assert cmd == ETHTOOL_GSTATS
            n = (size - 8) // 8
            got = rnd.choice([n, 0, n + 1, rnd.randrange(1 << 32)])
            reply = struct.pack("II", cmd, got) + rnd.randbytes(8 * n)
        self.replies += 1
        reply = _mutate(rnd, reply)[:size]  # the kernel never writes past the caller's buffer
        ctypes.memmove(buf, reply, len(reply))


def test_ioctl_replies_let_only_ethtool_error_out() -> None:
    fed = [0]

    @FUZZ
    @given(SEED)
    def run(seed: int) -> None:
        kernel = FakeKernel(random.Random(seed))
        for _ in range(PER_EXAMPLE):
            kernel._names.clear()
            try:
                stats = kernel.stats("eth0")
            except EthtoolError:
                continue
            assert all(isinstance(k, str) and 0 <= v < 1 << 64 for k, v in stats.items())
        fed[0] += kernel.replies

    run()
    assert fed[0] >= NEEDED
