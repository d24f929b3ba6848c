"""sFlow v5: the `sflow` source (`source.py`), its config section (`config.py`), the datagram
decoder (`decode`) and encoder (`encode`), datagrams -> rows (`ingest`) and a pcap reader/writer."""

from exporters.sflow.config import SflowConfig
from exporters.sflow.decode import DecodeError, decode
from exporters.sflow.ingest import SflowIngest
from exporters.sflow.source import SflowSource

__all__ = ["DecodeError", "SflowConfig", "SflowIngest", "SflowSource", "decode"]
