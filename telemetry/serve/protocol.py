"""ClickHouse's HTTP protocol, as words: the URL parameters that are transport (never settings),
the HTTP status a ClickHouse server answers each exception with, and the Content-Type of each
output format. Data only: never reads a request.
"""

from __future__ import annotations

from telemetry.errors import EngineError

# URL parameters that shape the HTTP exchange, not the query: consumed here or ignored, never SET.
# Sessions are not kept (every request is its own session), so session_* are accepted and ignored.
TRANSPORT_PARAMS = frozenset(
    {
        "query",
        "database",
        "default_format",
        "user",
        "password",
        "query_id",
        "session_id",
        "session_timeout",
        "session_check",
        "quota_key",
        "buffer_size",
        "wait_end_of_query",
        "client_protocol_version",
        "role",
        "send_progress_in_http_headers",
        "http_headers_progress_interval_ms",
        "enable_http_compression",
        "http_zlib_compression_level",
        "http_native_compression_disable_checksumming_on_decompress",
        "add_http_cors_header",
        "compress",
        "decompress",
        "extremes",  # the engine's own default; clients send it as 0
    }
)

# ClickHouse's exceptionCodeToHTTPStatus (src/Server/HTTP/exceptionCodeToHTTPStatus.cpp), by name
_STATUS_BY_NAME = {
    **dict.fromkeys(("REQUIRED_PASSWORD",), 401),
    **dict.fromkeys(
        (
            "UNKNOWN_USER",
            "WRONG_PASSWORD",
            "AUTHENTICATION_FAILED",
            "SET_NON_GRANTED_ROLE",
            "ACCESS_DENIED",
        ),
        403,
    ),
    **dict.fromkeys(
        (
            "BAD_ARGUMENTS",
            "CANNOT_COMPILE_REGEXP",
            "CANNOT_PARSE_TEXT",
            "CANNOT_PARSE_ESCAPE_SEQUENCE",
            "CANNOT_PARSE_QUOTED_STRING",
            "CANNOT_PARSE_DATE",
            "CANNOT_PARSE_DATETIME",
            "CANNOT_PARSE_NUMBER",
            "CANNOT_PARSE_DOMAIN_VALUE_FROM_STRING",
            "CANNOT_PARSE_IPV4",
            "CANNOT_PARSE_IPV6",
            "CANNOT_PARSE_INPUT_ASSERTION_FAILED",
            "CANNOT_PARSE_UUID",
            "DUPLICATE_COLUMN",
            "ILLEGAL_COLUMN",
            "UNKNOWN_ELEMENT_IN_AST",
            "UNKNOWN_TYPE_OF_AST_NODE",
            "THERE_IS_NO_COLUMN",
            "TOO_DEEP_AST",
            "TOO_BIG_AST",
            "UNEXPECTED_AST_STRUCTURE",
            "SYNTAX_ERROR",
            "INCORRECT_DATA",
            "TYPE_MISMATCH",
            "VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE",
        ),
        400,
    ),
    **dict.fromkeys(
        (
            "UNKNOWN_TABLE",
            "UNKNOWN_FUNCTION",
            "UNKNOWN_IDENTIFIER",
            "UNKNOWN_TYPE",
            "UNKNOWN_STORAGE",
            "UNKNOWN_DATABASE",
            "UNKNOWN_SETTING",
            "UNKNOWN_DIRECTION_OF_SORTING",
            "UNKNOWN_AGGREGATE_FUNCTION",
            "UNKNOWN_FORMAT",
            "UNKNOWN_DATABASE_ENGINE",
            "UNKNOWN_TYPE_OF_QUERY",
            "UNKNOWN_ROLE",
        ),
        404,
    ),
    "QUERY_IS_TOO_LARGE": 413,
    "NOT_IMPLEMENTED": 501,
    "SOCKET_TIMEOUT": 503,
    "CANNOT_OPEN_FILE": 503,
    "CANNOT_SCHEDULE_TASK": 503,
    "HTTP_LENGTH_REQUIRED": 411,
    "TIMEOUT_EXCEEDED": 408,
    "TOO_MANY_SIMULTANEOUS_QUERIES": 503,
    "UNSUPPORTED_MEDIA_TYPE": 415,
}


def http_status(e: EngineError) -> int:
    """The HTTP status a ClickHouse server answers this exception with; 500 for the rest."""
    return _STATUS_BY_NAME.get(e.name, 500)


def content_type(fmt: str) -> str:
    f = fmt.lower()
    if f.startswith("json") and ("eachrow" in f or "lines" in f or f == "jsonl"):
        return "application/x-ndjson; charset=UTF-8"
    if f.startswith("json"):
        return "application/json; charset=UTF-8"
    if f.startswith(("tabseparated", "tsv")):
        return "text/tab-separated-values; charset=UTF-8"
    if f.startswith("csv"):
        return "text/csv; charset=UTF-8; header=" + ("present" if "withnames" in f else "absent")
    if f.startswith(("pretty", "vertical", "markdown", "values", "xml", "template", "raw")):
        return "text/plain; charset=UTF-8"
    return "application/octet-stream"
