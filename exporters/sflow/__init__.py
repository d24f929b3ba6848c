"""sFlow v5: the datagram decoder (`decode`), a pcap reader and the `railscope sflow` source."""

from exporters.sflow.collector import SflowIngest, SflowSource
from exporters.sflow.decode import DecodeError, decode

__all__ = ["DecodeError", "SflowIngest", "SflowSource", "decode"]
