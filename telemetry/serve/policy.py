"""What a `railscope serve` user may ask the embedded engine: the lists, as data, and the checks of
settings against them.

The embedded engine runs every statement as its one `default` user with every grant, and
clickhouse-local does not confine `file()` to `user_files_path`: whatever reaches the host or the
network is refused here, for every user, unless the user's `allow` names it. Never runs SQL and
never parses it (guard.py asks the engine to).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from telemetry.serve.engine import EngineError
from telemetry.text import parse_size

# -- table functions and table engines ----------------------------------------------------------
# Those any user may call: they read nothing outside the store (numbers, literals, a subquery).
TABLE_FUNCTIONS_READ = frozenset(
    {
        "numbers",
        "numbers_mt",
        "zeros",
        "zeros_mt",
        "primes",
        "generate_series",
        "generateseries",
        "values",
        "sqlstandardvalues",
        "view",
        "viewifpermitted",
        "viewexplain",
        "null",
        "generaterandom",
        "format",  # parses a literal it is given
    }
)
# ... and those only a user who may write (readonly 0) may call: they read tables of the store by
# name or pattern, system tables included (merge('system', ...)), or their parts.
TABLE_FUNCTIONS_ADMIN = frozenset(
    {
        "merge",
        "loop",
        "dictionary",
        "mergetreeindex",
        "mergetreeanalyzeindexes",
        "mergetreeanalyzeindexesuuid",
        "mergetreeprojection",
        "mergetreetextindex",
        "mergetreecodecblockcounts",
        "timeseriesdata",
        "timeseriestags",
        "timeseriesmetrics",
        "timeseriessamples",
        "timeseriesmetricfamilies",
        "timeseriesselector",
        "prometheusquery",
        "prometheusqueryrange",
    }
)
# Table (and database) engines a table may be created with: data in the store's own directory, or
# a view of it.
ENGINES = frozenset(
    {
        "mergetree",
        "replacingmergetree",
        "summingmergetree",
        "aggregatingmergetree",
        "collapsingmergetree",
        "versionedcollapsingmergetree",
        "coalescingmergetree",
        "graphitemergetree",
        "memory",
        "log",
        "tinylog",
        "stripelog",
        "null",
        "set",
        "join",
        "buffer",
        "merge",
        "view",
        "materializedview",
        "generaterandom",
        "dictionary",
        "alias",
        "timeseries",
        # database engines: the store's own directory
        "atomic",
        "ordinary",
        "lazy",
    }
)
# Functions (not table functions) that reach the host: a file's contents, the server's log, code
# addresses; `disk(...)` defines a disk on any path (a MergeTree `SETTINGS disk = disk(...)`).
HOST_FUNCTIONS = frozenset(
    {
        "file",
        "disk",
        "logtrace",
        "addresstoline",
        "addresstolinewithinlines",
        "addresstosymbol",
        "demangle",
        "catboostevaluate",
    }
)
# Table functions and engines the engine has that reach the host or the network, named in the
# errors and docs; anything the engine lists that is in neither list above is refused too (a newer
# engine's new table function is refused until someone reads what it does).
HOST_TABLE_FUNCTIONS = frozenset(
    {
        "file",
        "filecluster",
        "filesystem",
        "url",
        "urlcluster",
        "executable",
        "executablepool",
        "remote",
        "remotesecure",
        "cluster",
        "clusterallreplicas",
        "s3",
        "s3cluster",
        "gcs",
        "oss",
        "cosn",
        "azureblobstorage",
        "azureblobstoragecluster",
        "hdfs",
        "hdfscluster",
        "mysql",
        "postgresql",
        "mongodb",
        "redis",
        "sqlite",
        "jdbc",
        "odbc",
        "input",
        "python",
        "eval",
        "arrowstream",
        "bigquery",
        "ytsaurus",
    }
)

# What a user's `allow` may name besides a table function, engine or function: statement kinds
# and clauses refused by default.
FEATURES = frozenset(
    {
        "into_outfile",  # SELECT ... INTO OUTFILE: writes a file on serve's host
        "from_infile",  # INSERT ... FROM INFILE: reads one
        "system",  # SYSTEM ... statements
        "attach",  # ATTACH / DETACH
        "backup",  # BACKUP / RESTORE
        "dictionary_source",  # CREATE DICTIONARY with a source other than a table of the store
        "named_collection",  # CREATE/ALTER/DROP NAMED COLLECTION
        "kill_mutation",  # KILL MUTATION / TRANSACTION / PART_MOVE_TO_SHARD
        "system_tables",  # a read-only user reads every system table (processes, query logs)
    }
)

# -- statements ----------------------------------------------------------------------------------
# The root node of `EXPLAIN AST` of statements that only read (or change nothing that stays).
READ_ROOTS = frozenset(
    {
        "SelectWithUnionQuery",
        "SelectIntersectExceptQuery",
        "SelectQuery",
        "Explain",
        "DescribeQuery",
        "CheckQuery",
        "Set",
        "UseQuery",
    }
)
READ_ROOT_PREFIXES = ("Show", "Exists")
# ... and of those that write the store (a user with readonly 0, on a POST)
WRITE_ROOTS = frozenset(
    {
        "InsertQuery",
        "CreateQuery",
        "DropQuery",
        "TruncateQuery",
        "AlterQuery",
        "Rename",  # RENAME / EXCHANGE
        "OptimizeQuery",
        "DeleteQuery",
        "UpdateQuery",
        "CreateSQLFunctionQuery",  # a SQL function (its body is judged like any statement)
        "DropFunctionQuery",
        "UndropQuery",
        "CreateIndexQuery",
        "DropIndexQuery",
    }
)
# ... and those refused unless the user's `allow` names the feature
FEATURE_ROOTS = {
    "SYSTEM": "system",
    "AttachQuery": "attach",
    "DetachQuery": "attach",
    "BackupQuery": "backup",
    "CreateNamedCollectionQuery": "named_collection",
    "AlterNamedCollectionQuery": "named_collection",
    "DropNamedCollectionQuery": "named_collection",
}

# -- system tables -------------------------------------------------------------------------------
# What a read-only user may read of `system`: the store's shape and the engine's counters. Not the
# tables that show other sessions' statements (processes, the query logs, the query cache, errors,
# mutations' commands, stack traces) or secrets (named collections).
SYSTEM_READABLE = frozenset(
    {
        "one",
        "numbers",
        "numbers_mt",
        "zeros",
        "zeros_mt",
        "primes",
        "databases",
        "tables",
        "columns",
        "functions",
        "aggregate_function_combinators",
        "table_functions",
        "table_engines",
        "database_engines",
        "formats",
        "data_type_families",
        "time_zones",
        "collations",
        "keywords",
        "build_options",
        "contributors",
        "licenses",
        "settings",
        "merge_tree_settings",
        "settings_changes",
        "server_settings",
        "parts",
        "parts_columns",
        "projection_parts",
        "projection_parts_columns",
        "projections",
        "detached_parts",
        "data_skipping_indices",
        "constraints",
        "merges",
        "moves",
        "disks",
        "storage_policies",
        "metrics",
        "events",
        "asynchronous_metrics",
        "dimensional_metrics",
        "histogram_metrics",
        "codecs",
        "macros",
        "clusters",
        "replicas",
        "current_roles",
        "enabled_roles",
        "documentation",
        "completions",
    }
)

# -- settings ------------------------------------------------------------------------------------
# Refused for every user unless `allow` names them: they reach the host or the network, show
# secrets, change what other sessions (the collectors, the engine's ticks) may do, or are
# serve's own (log_comment tags each query so serve can cancel it).
_DENIED_SETTINGS = frozenset(
    {
        "readonly",  # checked on its own: never lowered
        "log_comment",
        "replace_running_query",
        "allow_introspection_functions",
        "send_logs_level",
        "send_logs_source_regexp",
        "format_schema",
        "output_format_schema",
        "format_template_resultset",
        "format_template_row",
        "input_format_record_errors_file_path",
        "rename_files_after_processing",
        "default_table_engine",
        "default_temporary_table_engine",
        "format_display_secrets_in_show_and_select",
        "display_secrets_in_show_and_select",
        "query_cache_share_between_users",
        "os_thread_priority",
        "storage_policy",
        "disk",
        "table_disk",
    }
)
_DENIED_SETTING = re.compile(
    r"(?:_for_user|_for_all_users)$"  # limits of the engine's one user: every session's
    r"|^(?:s3|azure|hdfs|gcs|engine_file_|engine_url_|filesystem_cache|enable_filesystem_cache"
    r"|opentelemetry_|external_storage_|remote_filesystem_|http_|mysql_|postgresql_|odbc_"
    r"|kafka_|rabbitmq_|nats_|iceberg_|delta_lake_|hudi_|paimon_|memory_overcommit_)",
)
# What a readonly 2 user may set: the query's own limits, formats and interpretation.
_READONLY2_SETTINGS = frozenset(
    {
        "max_execution_time",
        "timeout_overflow_mode",
        "max_result_rows",
        "max_result_bytes",
        "result_overflow_mode",
        "max_rows_to_read",
        "max_bytes_to_read",
        "read_overflow_mode",
        "max_rows_to_group_by",
        "group_by_overflow_mode",
        "max_rows_to_sort",
        "max_bytes_to_sort",
        "sort_overflow_mode",
        "max_rows_in_join",
        "max_bytes_in_join",
        "join_overflow_mode",
        "max_rows_in_distinct",
        "max_bytes_in_distinct",
        "distinct_overflow_mode",
        "max_block_size",
        "max_threads",
        "max_memory_usage",
        "max_query_size",
        "max_ast_depth",
        "max_ast_elements",
        "join_use_nulls",
        "session_timezone",
        "extremes",
        "totals_mode",
        "totals_auto_threshold",
        "enable_analyzer",
        "allow_experimental_analyzer",
        "prefer_column_name_to_alias",
        "final",
        "cast_keep_nullable",
        "aggregate_functions_null_for_empty",
        "use_skip_indexes",
        "optimize_read_in_order",
        "date_time_input_format",
        "date_time_output_format",
        "date_time_overflow_behavior",
        "interval_output_format",
        "precise_float_parsing",
        "cancel_http_readonly_queries_on_client_close",
        "limit",
        "offset",
    }
)
_READONLY2_PREFIXES = ("output_format_", "input_format_", "format_csv_", "format_tsv_")


@dataclass(frozen=True)
class Limits:
    """One user's limits: the engine enforces them as the query's settings; a user may lower
    them, never raise them (0 = no limit)."""

    max_execution_time: float
    max_memory_usage: int
    max_result_rows: int
    max_result_bytes: int
    max_concurrent_queries: int

    def settings(self) -> dict[str, str]:
        """What serve SETs on each query's session before the user's own settings."""
        return {
            "max_execution_time": f"{self.max_execution_time:g}",
            "max_memory_usage": str(self.max_memory_usage),
            "max_result_rows": str(self.max_result_rows),
            "max_result_bytes": str(self.max_result_bytes),
        }


def _caps(limits: Limits) -> dict[str, float]:
    return {
        "max_execution_time": limits.max_execution_time,
        "max_memory_usage": limits.max_memory_usage,
        "max_result_rows": limits.max_result_rows,
        "max_result_bytes": limits.max_result_bytes,
    }


class Refused(EngineError):
    """A statement or setting this policy refuses, as ClickHouse's exception (code, message,
    name)."""


def denied(user: str, what: str, why: str) -> Refused:
    return Refused(
        497,
        f"{user}: Not enough privileges: {what} {why}; serve refuses it unless serve.users[].allow "
        "names it (docs/security.md)",
        "ACCESS_DENIED",
    )


def _number(value: str) -> float | None:
    v = value.replace(" ", "").strip("'")
    try:
        return float(v)
    except ValueError:
        pass
    try:
        return float(parse_size(v))
    except (ValueError, TypeError):
        return None


def check_setting(
    user: str,
    readonly: int,
    allow: frozenset[str],
    limits: Limits,
    name: str,
    value: str,
) -> None:
    """Raise Refused unless this user may set `name` to `value` on a query (URL parameter,
    SETTINGS clause or SET). readonly 1: no setting at all (ClickHouse's own rule, and error)."""
    low = name.lower()
    if low == "readonly":
        if readonly:
            raise Refused(164, "Cannot modify 'readonly' setting in readonly mode", "READONLY")
        if _number(value) not in (0.0, 1.0, 2.0):
            raise Refused(36, f"readonly = {value}: expected 0, 1 or 2", "BAD_ARGUMENTS")
        return
    if readonly == 1:
        raise Refused(164, f"Cannot modify '{name}' setting in readonly mode", "READONLY")
    if low not in allow and (low in _DENIED_SETTINGS or _DENIED_SETTING.search(low)):
        raise denied(
            user,
            f"setting {name}",
            "reaches the host, the engine's other sessions or serve's own bookkeeping",
        )
    if (
        readonly == 2
        and low not in allow
        and low not in _READONLY2_SETTINGS
        and not low.startswith(_READONLY2_PREFIXES)
    ):
        raise Refused(
            164,
            f"Cannot modify '{name}' setting in readonly mode: a readonly 2 user of railscope "
            "serve may change the query's limits and formats only",
            "READONLY",
        )
    cap = _caps(limits).get(low)
    if cap:  # 0: no limit to keep
        got = _number(value)
        if got is None or got == 0 or got > cap:
            raise Refused(
                452,
                f"Setting {name} shouldn't be greater than {cap:g} (serve.users[].limits)",
                "SETTING_CONSTRAINT_VIOLATION",
            )


def check_settings(
    user: str,
    readonly: int,
    allow: frozenset[str],
    limits: Limits,
    settings: Mapping[str, str],
) -> None:
    for k, v in settings.items():
        check_setting(user, readonly, allow, limits, k, v)
