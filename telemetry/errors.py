"""Errors a user can act on. The CLI prints them as one line and exits 2 (no traceback). And
EngineError, a ClickHouse exception as the embedded engine raises it (code, name, message)."""

from __future__ import annotations

import re

# ClickHouse's trailer on every exception text; chdb leaves it off (and sometimes nests it)
_CODE = re.compile(r"Code: (\d+)\. ")
_NAME = re.compile(r"\(([A-Z][A-Z0-9_]+)\)\s*$")


class UserError(Exception):
    """Bad input from the operator: config, flags, DSN, files."""


class ConfigError(UserError):
    """The configuration is invalid; the message names the key."""


class StoreUnavailable(UserError):
    """The ClickHouse store cannot be reached or opened."""


class NotBuilt(UserError):
    """A command or feature that is planned but not built yet."""


class EngineError(Exception):
    """A ClickHouse exception: `code`, `name` and the message without the `Code: N.` prefix."""

    def __init__(self, code: int, message: str, name: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.name = name

    @classmethod
    def from_engine(cls, e: BaseException) -> EngineError:
        text = str(e).strip()
        m = _CODE.search(text)
        code = int(m[1]) if m else 1001
        # chdb nests re-thrown exceptions: "Code: 73. DB::Exception: Code: 73. DB::Exception: X
        # (version ...). (NAME)"; keep the innermost message once
        inner = text.rsplit("DB::Exception: ", 1)[-1]
        inner = inner.split(" (version ", 1)[0].strip()
        n = _NAME.search(inner)
        if n:
            inner = inner[: n.start()].rstrip()
        else:
            n = _NAME.search(text)
        return cls(code, inner, n[1] if n else "")
