"""HDFS across IDCs: the `hdfs` source and its pure parsers (jmx, clienttrace, fsck, webhdfs,
topology, placement, dci). Importing the package registers the source."""

from exporters.hdfs.source import HdfsConfig, HdfsSource

__all__ = ["HdfsConfig", "HdfsSource"]
