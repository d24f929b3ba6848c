"""Which ClickHouse server errors the sink retries and which reject a batch: the table is data.

A retryable error is about the server's state (a replica without Keeper, a merge backlog, memory,
time): the batch waits in the spool and replays with backoff, with its deduplication token. A
permanent error is about the batch or the schema (after `railscope db migrate` these mean a bug or
a hand-edited table): the batch goes to `spool/rejected/` once, for `railscope spool
replay-rejected` after the fix. A code in neither table is treated as permanent and logged with
its number, so a new code is added here rather than retried forever.
Codes: ClickHouse src/Common/ErrorCodes.cpp.
"""

from __future__ import annotations

import re

RETRYABLE: dict[int, str] = {
    3: "UNEXPECTED_END_OF_FILE",  # the connection was cut mid-body
    159: "TIMEOUT_EXCEEDED",  # a query/insert timeout: the server is slow, not the batch wrong
    164: "READONLY",  # a user/profile switched to readonly=1 for maintenance
    202: "TOO_MANY_SIMULTANEOUS_QUERIES",  # max_concurrent_queries reached
    203: "NO_FREE_CONNECTION",  # the server's own pool is exhausted
    209: "SOCKET_TIMEOUT",
    210: "NETWORK_ERROR",
    241: "MEMORY_LIMIT_EXCEEDED",  # server or query memory limit: retry once memory is freed
    242: "TABLE_IS_READ_ONLY",  # a replica lost Keeper: writable again when Keeper is back
    252: "TOO_MANY_PARTS",  # merges behind (parts_to_throw_insert): retry after they catch up
    236: "ABORTED",  # the server is shutting down
    319: "UNKNOWN_STATUS_OF_INSERT",  # may or may not be written: the token dedups the retry
    425: "SYSTEM_ERROR",  # an OS-level failure on the server (disk, fd limits)
    999: "KEEPER_EXCEPTION",  # ZooKeeper/Keeper session trouble
    1000: "POCO_EXCEPTION",  # network-level failures reported by the server's libraries
    394: "QUERY_WAS_CANCELLED",  # killed by an operator or the server shutting down
    439: "CANNOT_SCHEDULE_TASK",  # thread pool full
    497: "ACCESS_DENIED",  # grants being changed mid-rollout; the exporter user keeps INSERT
    516: "AUTHENTICATION_FAILED",  # a rotated password not yet picked up everywhere
}

PERMANENT: dict[int, str] = {
    6: "CANNOT_PARSE_TEXT",  # a value the column cannot hold
    16: "NO_SUCH_COLUMN_IN_TABLE",  # the table lacks a column the record kind has (migration?)
    27: "CANNOT_PARSE_INPUT_ASSERTION_FAILED",
    33: "CANNOT_READ_ALL_DATA",  # a truncated spool file
    36: "BAD_ARGUMENTS",
    47: "UNKNOWN_IDENTIFIER",
    53: "TYPE_MISMATCH",  # a column type changed under the record kind
    60: "UNKNOWN_TABLE",  # the table is gone (dropped, or not migrated)
    62: "SYNTAX_ERROR",
    70: "CANNOT_CONVERT_TYPE",
    73: "UNKNOWN_FORMAT",
    81: "UNKNOWN_DATABASE",
    117: "INCORRECT_DATA",  # the body is not valid Arrow
    349: "CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN",
}

_CODE = re.compile(r"(?:\bCode:\s*|error code\s+)(\d+)")


def error_code(exc: BaseException) -> int | None:
    """The ClickHouse error code an exception carries (`code` attribute or the message)."""
    code = getattr(exc, "code", None)
    if isinstance(code, int) and code > 0:
        return code
    m = _CODE.search(str(exc))
    return int(m[1]) if m else None


def code_name(code: int | None) -> str:
    if code is None:
        return "no code"
    return RETRYABLE.get(code) or PERMANENT.get(code) or f"code {code}"


__all__ = ["PERMANENT", "RETRYABLE", "code_name", "error_code"]
