"""The one asyncio loop of a switch source's gNMI and SNMP switches: closing it twice (a source
closed by the pipeline and again by its owner) is harmless."""

from __future__ import annotations

import time

from exporters.switch.gnmi_stream import GnmiLoop


def test_a_second_close_returns_at_once_and_leaves_no_coroutine_behind() -> None:
    loop = GnmiLoop()
    loop.close()
    assert not loop.thread.is_alive()
    t = time.monotonic()
    loop.close()  # before: a drain coroutine handed to the stopped loop, waited on for 2 s
    assert time.monotonic() - t < 1.5
    assert not loop.loop._ready  # nothing scheduled that will never run (never awaited)
