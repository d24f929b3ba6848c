"""Kubernetes/Volcano inventory: the `inventory` source (`source.py`), its config section
(`config.py`), object parsing (`objects`), the fact ledger (`state`), list+watch (`watch`) and
`who` (which pod held an IP at a time)."""

from exporters.inventory.config import InventoryConfig
from exporters.inventory.source import InventorySource

__all__ = ["InventoryConfig", "InventorySource"]
