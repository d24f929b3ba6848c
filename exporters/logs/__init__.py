"""The `logs` source: pods' CRI logs and the kernel log as typed events (docs/logs.md)."""

from exporters.logs.config import LogsConfig
from exporters.logs.source import LogsSource

__all__ = ["LogsConfig", "LogsSource"]
