"""The kernel ethtool ioctl reader against the `ethtool -S` binary on this machine's netdevs."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from exporters.node.ethtool import EthtoolError, IoctlEthtool, parse_ethtool_s


def netdevs_with_stats() -> list[str]:
    out = []
    for n in sorted(os.listdir("/sys/class/net")):
        r = subprocess.run(["ethtool", "-S", n], capture_output=True, text=True)
        if r.returncode == 0 and parse_ethtool_s(r.stdout):
            out.append(n)
    return out


@pytest.mark.skipif(
    shutil.which("ethtool") is None,
    reason="ethtool binary not installed (Debian package `ethtool`)",
)
def test_ioctl_matches_ethtool_binary() -> None:
    devs = netdevs_with_stats()
    if not devs:
        pytest.skip("no netdev on this machine exposes ethtool statistics")
    reader = IoctlEthtool()
    try:
        for dev in devs:
            before = parse_ethtool_s(
                subprocess.run(["ethtool", "-S", dev], capture_output=True, text=True).stdout
            )
            got = reader.stats(dev)
            after = parse_ethtool_s(
                subprocess.run(["ethtool", "-S", dev], capture_output=True, text=True).stdout
            )
            assert list(got) == list(before), dev  # same names, same order
            for k, v in got.items():
                # read between two ethtool runs: equal for idle counters, bracketed for live ones
                assert min(before[k], after[k]) <= v <= max(before[k], after[k]), (dev, k)
    finally:
        reader.close()


def test_missing_netdev_and_no_stats() -> None:
    reader = IoctlEthtool()
    try:
        with pytest.raises(EthtoolError) as e:
            reader.stats("nosuchdev0")
        assert e.value.reason == "missing_device"
        assert reader.stats("lo") == {}  # loopback has no ethtool statistics: nothing, not an error
    finally:
        reader.close()
