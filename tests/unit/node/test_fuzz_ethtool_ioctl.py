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
    MAX_STATS,
    EthtoolError,
    IoctlEthtool,
)
from tests.fuzz import FUZZ, SEED

pytestmark = pytest.mark.slow
PER_EXAMPLE = 190  # stats() calls; ~1.38 replies each: ~105,000 replies in all
NEEDED = 100_000
NAMES = [b"rx_packets", b"tx_packets", b"rx_prio3_pause", b"rx_vport_rdma_unicast_bytes"]


def _name_pool() -> bytes:
    """MAX_STATS + 1024 GSTRINGS slots, 4 in 5 a real counter name, 1 in 5 random bytes: a reply
    of n names is a slice of it at a random offset (generating each name per reply made the fake
    kernel cost 3x the decoder it feeds on the ~65,536-name replies)."""
    rnd = random.Random(0)
    block = b"".join(
        rnd.choice(NAMES).ljust(ETH_GSTRING_LEN, b"\0")
        if rnd.random() < 0.8
        else rnd.randbytes(ETH_GSTRING_LEN)
        for _ in range(4099)  # prime: tiles never line up with a power-of-two count
    )
    return block * ((MAX_STATS + 1024) // 4099 + 1)


POOL = _name_pool()


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
            at = rnd.randrange(1024) * ETH_GSTRING_LEN
            names = POOL[at : at + n * ETH_GSTRING_LEN]
            reply = struct.pack("III", cmd, 1, n) + names
        else:
            assert cmd == ETHTOOL_GSTATS
            n = (size - 8) // 8
            got = rnd.choice([n, 0, n + 1, rnd.randrange(1 << 32)])
            reply = struct.pack("II", cmd, got) + rnd.randbytes(8 * n)
        self.replies += 1
        reply = _mutate(rnd, reply)[:size]  # the kernel never writes past the caller's buffer
        if cmd == ETHTOOL_GSSET_INFO and len(reply) >= 20 and rnd.random() < 0.9:
            # a mutated count of 4,097..MAX_STATS makes the decoder walk up to 65,536 names
            # (~30 ms): 1 in 10 of them is kept, the rest get the count before mutation back
            got = struct.unpack_from("I", reply, 16)[0]
            if 4096 < got <= MAX_STATS:
                reply = reply[:16] + struct.pack("I", n) + reply[20:]
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
