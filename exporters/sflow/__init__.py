"""sFlow v5: the `sflow` source (`source.py`), its config section (`config.py`), the datagram
decoder (`decode`: `scan` on the collector's path) and encoder (`encode`), decoded datagrams ->
batches (`ingest`) and a pcap reader/writer."""

from exporters.sflow.config import SflowConfig
from exporters.sflow.decode import Decoded, DecodeError, decode, scan
from exporters.sflow.ingest import SflowIngest
from exporters.sflow.source import SflowSource

__all__ = ["DecodeError", "Decoded", "SflowConfig", "SflowIngest", "SflowSource", "decode", "scan"]
