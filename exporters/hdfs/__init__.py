"""HDFS across IDCs: the `hdfs` source (`source.py`), its config section (`config.py`) and its
pure parsers (jmx, clienttrace, fsck, webhdfs, topology, placement, dci)."""

from exporters.hdfs.config import HdfsConfig
from exporters.hdfs.source import HdfsSource

__all__ = ["HdfsConfig", "HdfsSource"]
