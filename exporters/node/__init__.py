"""The `node` source: GPU, RDMA NIC, ethtool, PCIe and pod-resources collectors on one GPU server.
The source class is in `source.py`, its config section in `config.py`, one collector per module."""

from exporters.node.config import NodeConfig
from exporters.node.source import NodeSource

__all__ = ["NodeConfig", "NodeSource"]
