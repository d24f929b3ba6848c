"""What a `railscope serve` user may ask the embedded engine: the lists, as data, and the checks of
settings against them.

The embedded engine runs every statement as its one `default` user with every grant, and
clickhouse-local does not confine `file()` to `user_files_path`: whatever reaches the host or the
network is refused here, for every user, unless the user's `allow` names it. Never runs SQL and
never parses it (guard.py asks the engine to).
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass

from telemetry.errors import EngineError
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

# Engines that keep or read data outside the store (what `allow` may name for CREATE ... ENGINE)
HOST_ENGINES = frozenset(
    {
        "file", "url", "s3", "s3queue", "azureblobstorage", "azurequeue", "hdfs", "filelog",
        "embeddedrocksdb", "executable", "executablepool", "distributed", "keepermap", "kafka",
        "rabbitmq", "nats", "mysql", "postgresql", "materializedpostgresql", "mongodb", "redis",
        "sqlite", "odbc", "jdbc", "hive", "iceberg", "icebergs3", "icebergazure", "iceberghdfs",
        "icebergLocal".lower(), "deltalake", "hudi", "replicated", "materializedmysql",
        "filesystem", "dictionary", "timeseries", "urlcluster", "arrowflight", "ytsaurus",
    }
)  # fmt: skip

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

# Functions that show the server's own configuration (paths, disks, settings of the server, the
# client's headers): a read-only user calls none of them unless `allow` names system_tables
SERVER_FUNCTIONS = frozenset(
    {
        "getserversetting",
        "getmergetreesetting",
        "getmacro",
        "serveruuid",
        "buildid",
        "filesystemavailable",
        "filesystemcapacity",
        "filesystemunreserved",
        "getoskernelversion",
        "tcpport",
        "getclienthttpheader",
        "zookeepersessionuptime",
        "currentprofiles",
        "enabledprofiles",
        "defaultprofiles",
    }
)

# -- settings ------------------------------------------------------------------------------------
# One table of setting rules, in the manner of ClickHouse's settings constraints: every setting a
# user names (URL parameter, SETTINGS clause of the statement or of any subquery, SET) is judged by
# `rule(name)`. A statement's own SETTINGS clause overrides what serve SET on the session, so what
# serve sets itself is const here, and a limit serve sets is bounded by the user's limit.


@dataclass(frozen=True)
class SettingRule:
    """How one setting may be changed.

    kind: "number" (min/max apply; the value must be a number), "bool" (0/1/true/false),
    "text" (any literal); const: no user may change it (`value`: the one value serve sets, which a
    client may repeat); denied: refused unless the user's `allow` names the setting; readonly2: a
    readonly 2 user may change it; cap: the field of the user's Limits that bounds it from above
    (0 refused: no limit)."""

    kind: str = "text"
    min: float | None = 0.0  # a negative number is never a setting's "no limit"
    max: float | None = None
    cap: str = ""
    const: bool = False
    value: str | None = None
    denied: bool = False
    readonly2: bool = False
    why: str = ""


_COUNT = SettingRule("number", readonly2=True)
_FLAG = SettingRule("bool", readonly2=True)
_ENUM = SettingRule("text", readonly2=True)
_REACHES = "reaches the host, the engine's other sessions or serve's own bookkeeping"
_EVALUATES = "makes the engine evaluate what the statement guard never read"
_DENY = SettingRule(denied=True, why=_REACHES)
_CONST_EVAL = SettingRule(const=True, why=_EVALUATES)

SETTING_RULES: dict[str, SettingRule] = {
    # serve's own (readonly is judged on its own: never lowered)
    "log_comment": SettingRule(const=True, why="tags each query so serve can cancel it"),
    "allow_introspection_functions": SettingRule(
        "bool", const=True, value="0", why="reads the server's code and memory addresses"
    ),
    # the user's limits: lowered, never raised or lifted
    "max_execution_time": SettingRule("number", cap="max_execution_time", readonly2=True),
    "max_memory_usage": SettingRule("number", cap="max_memory_usage", readonly2=True),
    "max_result_rows": SettingRule("number", cap="max_result_rows", readonly2=True),
    "max_result_bytes": SettingRule("number", cap="max_result_bytes", readonly2=True),
    "max_rows_to_read": _COUNT,
    "max_bytes_to_read": _COUNT,
    "max_rows_to_group_by": _COUNT,
    "max_rows_to_sort": _COUNT,
    "max_bytes_to_sort": _COUNT,
    "max_rows_in_join": _COUNT,
    "max_bytes_in_join": _COUNT,
    "max_rows_in_distinct": _COUNT,
    "max_bytes_in_distinct": _COUNT,
    "max_block_size": SettingRule("number", min=1, max=1 << 20, readonly2=True),
    "max_threads": SettingRule("number", min=0, max=256, readonly2=True),
    # the statement's size: never past what the guard parses (GUARD_MAX_QUERY_BYTES)
    "max_query_size": SettingRule("number", min=1, max=256 << 10, readonly2=True),
    "max_ast_depth": SettingRule("number", min=1, max=1000, readonly2=True),
    "max_ast_elements": SettingRule("number", min=1, max=50_000, readonly2=True),
    "max_expanded_ast_elements": SettingRule("number", min=1, max=500_000, readonly2=True),
    "max_parser_depth": SettingRule("number", min=1, max=1000, readonly2=True),
    "timeout_overflow_mode": _ENUM,
    "result_overflow_mode": _ENUM,
    "read_overflow_mode": _ENUM,
    "group_by_overflow_mode": _ENUM,
    "sort_overflow_mode": _ENUM,
    "join_overflow_mode": _ENUM,
    "distinct_overflow_mode": _ENUM,
    "join_use_nulls": _FLAG,
    "session_timezone": _ENUM,
    "extremes": _FLAG,
    "totals_mode": _ENUM,
    "totals_auto_threshold": SettingRule("number", max=1, readonly2=True),
    "enable_analyzer": _FLAG,
    "prefer_column_name_to_alias": _FLAG,
    "final": _FLAG,
    "cast_keep_nullable": _FLAG,
    "aggregate_functions_null_for_empty": _FLAG,
    "use_skip_indexes": _FLAG,
    "optimize_read_in_order": _FLAG,
    "date_time_input_format": _ENUM,
    "date_time_output_format": _ENUM,
    "date_time_overflow_behavior": _ENUM,
    "interval_output_format": _ENUM,
    "precise_float_parsing": _FLAG,
    "cancel_http_readonly_queries_on_client_close": _FLAG,
    "limit": _COUNT,
    "offset": _COUNT,
    # what the statement may reach: const for every user, `allow` or not
    "dialect": SettingRule(const=True, value="clickhouse", why="parses the statement another way"),
    "input_format_values_interpret_expressions": _CONST_EVAL,
    "input_format_values_deduce_templates_of_expressions": _CONST_EVAL,
    "additional_table_filters": _CONST_EVAL,
    "additional_result_filter": _CONST_EVAL,
    "readonly": SettingRule(const=True, why="judged on its own"),  # never reached: see check
    # refused unless `allow` names them
    **{
        name: _DENY
        for name in (
            "replace_running_query",
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
        )
    },
}
# Rules by name pattern, first match wins, for the names SETTING_RULES does not list
SETTING_PATTERNS: tuple[tuple[re.Pattern[str], SettingRule], ...] = (
    # allow_*: experimental features, introspection, nondeterministic functions, ...: what a
    # statement may reach is serve's decision, not the client's
    (re.compile(r"^allow_|^enable_.*_functions$|^kql_|^prql_"), _CONST_EVAL),
    # input formats that evaluate what they read (VALUES expressions, templates of them)
    (re.compile(r"^input_format_.*(?:interpret|expression|evaluat)"), _CONST_EVAL),
    # limits of the engine's one user: every session's
    (re.compile(r"(?:_for_user|_for_all_users)$"), _DENY),
    (
        re.compile(
            r"^(?:s3|azure|hdfs|gcs|engine_file_|engine_url_|filesystem_cache"
            r"|enable_filesystem_cache|opentelemetry_|external_storage_|remote_filesystem_|http_"
            r"|mysql_|postgresql_|odbc_|kafka_|rabbitmq_|nats_|iceberg_|delta_lake_|hudi_|paimon_"
            r"|memory_overcommit_)"
        ),
        _DENY,
    ),
    # formats of the answer and of INSERT data: a readonly 2 client's (Grafana's) to choose
    (re.compile(r"^(?:output_format_|input_format_|format_csv_|format_tsv_)"), _ENUM),
)
# Anything else: a readonly 0 user may change it, within the default bounds (no negative number)
_OTHER = SettingRule()

# What serve SETs on every statement's session after the user's limits (SETTING_RULES makes each
# const or bounds it, so no SETTINGS clause undoes it)
SERVE_SETTINGS = {
    name: r.value for name, r in SETTING_RULES.items() if r.const and r.value is not None
}


# Every name a user's `allow` may hold, but the settings SETTING_PATTERNS deny
ALLOWABLE_NAMES = (
    FEATURES
    | HOST_FUNCTIONS
    | HOST_TABLE_FUNCTIONS
    | TABLE_FUNCTIONS_ADMIN
    | HOST_ENGINES
    | frozenset(name for name, r in SETTING_RULES.items() if r.denied)
)


def allowable(name: str) -> bool:
    """True where a user's `allow` may name `name`: a feature, a table function, function or
    engine serve refuses by default, or a denied (not a const) setting. Anything else is a typo
    or a no-op, which config check refuses."""
    low = name.lower()
    return low in ALLOWABLE_NAMES or allowable_setting(low)


def nearest_allowable(name: str) -> str | None:
    """The allowable name `name` is most likely a typo of (None: none is close)."""
    got = difflib.get_close_matches(name.lower(), ALLOWABLE_NAMES, n=1, cutoff=0.75)
    return got[0] if got else None


def setting_rule(name: str) -> SettingRule:
    low = name.lower()
    got = SETTING_RULES.get(low)
    if got is not None:
        return got
    for pattern, r in SETTING_PATTERNS:
        if pattern.search(low):
            return r
    return _OTHER


def allowable_setting(name: str) -> bool:
    """True where a user's `allow` may name the setting `name` (a denied one, not a const one)."""
    return setting_rule(name).denied


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
            **SERVE_SETTINGS,
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


def _literal(value: str) -> str | None:
    """A setting's value as the literal it is, unquoted; None where it is an expression (a
    function call, arithmetic, an array or map): judged values are literals only."""
    v = value.strip()
    if len(v) >= 2 and v[0] == v[-1] == "'" and "'" not in v[1:-1].replace("\\'", ""):
        return v[1:-1]
    compact = v.replace(" ", "")
    # a URL parameter's value is text as it stands (a dedup token `batch-1`, a uuid): '-' and
    # ':' inside it are no arithmetic; a numeric or boolean rule still refuses what is no number
    if re.fullmatch(r"-?[0-9A-Za-z_.+][0-9A-Za-z_.+:\-]*|", compact):
        return compact
    return None


_BOOLS = {"0": "0", "false": "0", "1": "1", "true": "1"}


def _out_of_range(name: str, why: str) -> Refused:
    return Refused(452, f"Setting {name} {why}", "SETTING_CONSTRAINT_VIOLATION")


def check_setting(
    user: str,
    readonly: int,
    allow: frozenset[str],
    limits: Limits,
    name: str,
    value: str,
) -> None:
    """Raise Refused unless this user may set `name` to `value` on a query (URL parameter,
    SETTINGS clause or SET): the rule SETTING_RULES / SETTING_PATTERNS give it. readonly 1: no
    setting at all (ClickHouse's own rule, and error)."""
    low = name.lower()
    if low == "readonly":
        if readonly:
            raise Refused(164, "Cannot modify 'readonly' setting in readonly mode", "READONLY")
        if _number(value) not in (0.0, 1.0, 2.0):
            raise Refused(36, f"readonly = {value}: expected 0, 1 or 2", "BAD_ARGUMENTS")
        return
    if readonly == 1:
        raise Refused(164, f"Cannot modify '{name}' setting in readonly mode", "READONLY")
    r = setting_rule(low)
    literal = _literal(value)
    if r.const:
        same = literal is not None and (
            literal.lower() == r.value
            or (r.kind == "bool" and _BOOLS.get(literal.lower()) == r.value)
        )
        if r.value is not None and same:
            return  # what serve sets anyway (a client repeating the default)
        raise denied(user, f"setting {name}", f"is const for every user of serve: it {r.why}")
    if r.denied and low not in allow:
        raise denied(user, f"setting {name}", r.why)
    if readonly == 2 and low not in allow and not r.readonly2:
        raise Refused(
            164,
            f"Cannot modify '{name}' setting in readonly mode: a readonly 2 user of railscope "
            "serve may change the query's limits and formats only",
            "READONLY",
        )
    if literal is None:
        raise _out_of_range(name, f"= {value[:80]}: expected a literal value")
    got = _number(literal)
    if r.kind == "number" and got is None:
        raise _out_of_range(name, f"= {value[:80]}: expected a number")
    if r.kind == "bool" and literal.lower() not in _BOOLS:
        raise _out_of_range(name, f"= {value[:80]}: expected 0 or 1")
    if got is None:
        return
    if not math.isfinite(got):
        raise _out_of_range(name, f"= {value[:80]}: expected a finite number")
    if r.min is not None and got < r.min:
        raise _out_of_range(name, f"shouldn't be less than {r.min:g}")
    if r.max is not None and got > r.max:
        raise _out_of_range(name, f"shouldn't be greater than {r.max:g}")
    cap = _caps(limits).get(r.cap) if r.cap else None
    if cap and (got == 0 or got > cap):  # cap 0: no limit to keep
        raise _out_of_range(name, f"shouldn't be greater than {cap:g} (serve.users[].limits)")


def setting_rules_markdown() -> str:
    """The setting rules as the table docs/security.md shows (a test keeps the two the same)."""

    def cell(r: SettingRule) -> str:
        bound = lambda v: "—" if v is None else f"{int(v)}" if v == int(v) else f"{v:g}"  # noqa: E731
        top = f"the user's `{r.cap}`" if r.cap else bound(r.max)
        change = (
            f"const (only `{r.value}`)"
            if r.const and r.value is not None
            else "const"
            if r.const
            else "`allow` only"
            if r.denied
            else "readonly 0 and 2"
            if r.readonly2
            else "readonly 0"
        )
        low = "—" if r.const or r.kind == "bool" else bound(r.min)
        return f"{r.kind} | {low} | {top} | {change}"

    groups: dict[str, list[str]] = {}
    for name, r in SETTING_RULES.items():
        if name != "readonly":
            groups.setdefault(cell(r), []).append(f"`{name}`")
    for pattern, r in SETTING_PATTERNS:
        groups.setdefault(cell(r), []).append("`/" + pattern.pattern.replace("|", "\\|") + "/`")
    groups.setdefault(cell(_OTHER), []).append("any other")
    lines = [
        "| settings | type | min | max | who may change it |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {', '.join(names)} | {c} |" for c, names in groups.items()]
    return "\n".join(lines) + "\n"
