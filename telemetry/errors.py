"""Errors a user can act on. The CLI prints them as one line and exits 2 (no traceback)."""


class UserError(Exception):
    """Bad input from the operator: config, flags, DSN, files."""


class ConfigError(UserError):
    """The configuration is invalid; the message names the key."""


class StoreUnavailable(UserError):
    """The ClickHouse store cannot be reached or opened."""


class NotBuilt(UserError):
    """A command or feature that is planned but not built yet."""
