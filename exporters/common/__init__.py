"""Utilities shared by exporters (file tailing)."""
