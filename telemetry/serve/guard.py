"""Judge one statement before serve runs it: the engine parses it, serve reads what it parsed.

The engine turns the request's text into exactly one statement (`formatQuery`: a second statement
is a syntax error, as on a ClickHouse server) and that canonical text is what runs; `EXPLAIN AST`
of it names every function, table function, engine and table, and the canonical text's tokens name
what the AST dump leaves out (SETTINGS, INTO OUTFILE, dictionary sources). Never runs the
statement itself, never matches SQL with a regular expression, and answers with ClickHouse's error
(policy.Refused) for whatever policy.py refuses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from telemetry.errors import EngineError
from telemetry.serve import sqltext as S
from telemetry.serve.plan import Plan
from telemetry.serve.policy import (
    ENGINES,
    FEATURE_ROOTS,
    HOST_FUNCTIONS,
    HOST_TABLE_FUNCTIONS,
    READ_ROOT_PREFIXES,
    READ_ROOTS,
    SERVER_FUNCTIONS,
    SYSTEM_READABLE,
    TABLE_FUNCTIONS_ADMIN,
    TABLE_FUNCTIONS_READ,
    WRITE_ROOTS,
    Limits,
    Refused,
    check_setting,
    denied,
)

# a line of EXPLAIN AST: indentation, node type (one or two words), the rest
_NODE = re.compile(r"^( *)(Storage definition|Columns definition|Dictionary definition|\S+) ?(.*)$")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,254}$")


@dataclass(frozen=True)
class Node:
    depth: int
    kind: str
    name: str


def parse_ast(dump: str) -> list[Node]:
    out = []
    for line in dump.splitlines():
        if not line.strip():
            continue
        m = _NODE.match(line)
        if m is None:
            continue
        out.append(Node(len(m[1]), m[2], _without_tail(m[3])))
    return out


def _without_tail(rest: str) -> str:
    """A dump line's text without its trailing `(alias a)` and `(children n)`, read from the
    end: a literal's line is as long as the literal (a 240 KB `IN (...)` list is one 1.2 MB line),
    and a regular expression tried at each of its positions held the interpreter for 0.12 s.
    Where the tail reads two ways (`(alias (children 1)`), the longer tail is cut, as the first
    match of the grammar's regular expression would (tests/unit/serve/test_sqltext.py)."""
    s = rest.rstrip()
    cuts = [_alias_at_end(s)]
    c = s.rfind("(children ")
    if s.endswith(")") and c >= 0 and s[c + 10 : -1].isdecimal():
        cuts += [c, _alias_at_end(s[:c].rstrip())]
    cut = min((i for i in cuts if i >= 0), default=len(s))
    return s[:cut].strip()


def _alias_at_end(s: str) -> int:
    """Where an `(alias a)` ending `s` starts, -1 if none: the first `(alias ` after the last
    other `)` (an alias holds no `)`)."""
    if not s.endswith(")"):
        return -1
    return s.find("(alias ", s.rfind(")", 0, len(s) - 1) + 1)


@dataclass
class Who:
    """The user a statement is judged for."""

    name: str
    readonly: int  # the engine's level for this request: the user's, or 2 for a GET (never writes)
    level: int  # the user's own readonly level: what settings it may change
    allow: frozenset[str]
    limits: Limits
    get: bool = False  # the request is a GET (or HEAD): it never runs KILL

    @property
    def admin(self) -> bool:
        """readonly 0: may write (on a POST), call the admin table functions, read every system
        table."""
        return self.level == 0


class Parser(Protocol):
    """What the guard asks the engine (engine.Engine): canonical text, and the AST dump of it."""

    def canonical(self, text: str) -> str: ...

    def explain_ast(self, sql: str, params: Mapping[str, str]) -> str: ...

    def table_functions(self) -> frozenset[str]: ...

    def engines(self) -> frozenset[str]: ...


def judge(
    parser: Parser,
    who: Who,
    text: str,
    *,
    params: Mapping[str, str],
    database: str | None,
    insert_fmt: str | None = None,
    values_data: str | None = None,
) -> Plan:
    """The plan for one statement `text`, or Refused / the engine's own parse error. With
    `insert_fmt`, `text` is an INSERT's head (`INSERT ... FORMAT X`) whose data the caller holds
    apart (never parsed as SQL as part of the statement); `values_data`: that data, in format
    Values, when it is small enough to be judged as expressions. The plan carries the
    statement's root kind, the tables it names and an INSERT's target, read from its AST."""
    canonical = parser.canonical(text)
    try:
        toks = S.tokens(canonical)
    except S.Unterminated as e:  # the engine's own text: never expected
        raise Refused(62, f"Syntax error: {e}", "SYNTAX_ERROR") from None
    # settings first: EXPLAIN applies a statement's SETTINGS clause while it explains
    changes = _check_settings(who, toks)
    nodes = parse_ast(parser.explain_ast(canonical, params))
    if not nodes:
        raise Refused(62, "Syntax error: empty query", "SYNTAX_ERROR")
    root = nodes[0].kind
    if sum(1 for n in nodes if n.kind == "Set") > changes:
        raise _unreadable_settings(who)
    _check_root(who, root, toks, nodes)
    _check_names(parser, who, toks, nodes)
    _check_files(who, toks, nodes)
    _check_tables(who, nodes, database)
    plan = _plan(who, parser, canonical, toks, nodes, params, insert_fmt, values_data)
    return replace(plan, root=root, tables=_tables(nodes), target=_insert_target(nodes))


def _plan(
    who: Who,
    parser: Parser,
    canonical: str,
    toks: list[S.Token],
    nodes: list[Node],
    params: Mapping[str, str],
    insert_fmt: str | None,
    values_data: str | None,
) -> Plan:
    root = nodes[0].kind
    if root == "KillQueryQuery":
        if who.get:
            raise Refused(
                164, f"{who.name}: KILL is not run by a GET request: send it by POST", "READONLY"
            )
        parts = S.kill_parts(toks, canonical)
        if parts is None or parts[0] != "QUERY":
            if "kill_mutation" not in who.allow:
                raise denied(who.name, "KILL MUTATION / TRANSACTION", "stops the engine's own work")
            return Plan("query", canonical)
        _check_kill_condition(who, nodes)
        return Plan(
            "kill",
            canonical,
            out_fmt=S.format_tail(toks) or "",
            result_set=True,
            kill_condition=parts[1],
            kill_mode=parts[2],
        )
    if insert_fmt is not None:
        if root != "InsertQuery" or S.format_tail(toks) is None:
            raise Refused(62, "Syntax error: cannot find the INSERT's data", "SYNTAX_ERROR")
        plan = Plan("insert", S.strip_format(canonical), fmt=insert_fmt)
        if insert_fmt.lower() == "values" and not _values_judged(parser, who, values_data, params):
            # VALUES expressions may call any function: data the guard could not read as
            # expressions is taken as literals only (INSERT ... SELECT takes any expression)
            plan.settings = {
                "input_format_values_interpret_expressions": "0",
                "input_format_values_deduce_templates_of_expressions": "0",
            }
        return plan
    result_set = root not in WRITE_ROOTS and root not in ("Set", "UseQuery")
    return Plan("query", canonical, out_fmt=S.format_tail(toks) or "", result_set=result_set)


# What a KILL QUERY condition may name: the user's own queries' id, user and text, compared with
# literals (query parameters are literals by now). No subquery, no table, no function that runs
# anything: the condition is evaluated by the engine, under the user's limits, over serve's list of
# that user's queries (running.py).
KILL_CONDITION_COLUMNS = frozenset({"query_id", "user", "query"})
KILL_CONDITION_FUNCTIONS = frozenset(
    {
        "equals", "notequals", "in", "notin", "and", "or", "not", "like", "notlike", "ilike",
        "notilike", "startswith", "endswith", "lower", "upper", "position",
        "positioncaseinsensitive", "tuple", "empty", "notempty",
    }
)  # fmt: skip


def _check_kill_condition(who: Who, nodes: list[Node]) -> None:
    """Refused unless the KILL QUERY condition (the root's first child) is made of
    KILL_CONDITION_COLUMNS, KILL_CONDITION_FUNCTIONS and literals."""
    children = [i for i, n in enumerate(nodes) if n.depth == 1]
    if not children:
        raise Refused(62, "Syntax error: KILL QUERY without a condition", "SYNTAX_ERROR")
    end = children[1] if len(children) > 1 else len(nodes)
    for n in nodes[children[0] : end]:
        if n.kind == "Literal" or n.kind == "ExpressionList":
            continue
        if n.kind == "Identifier" and n.name.lower() in KILL_CONDITION_COLUMNS:
            continue
        if n.kind == "Function" and n.name.lower() in KILL_CONDITION_FUNCTIONS:
            continue
        what = f"{n.kind} {n.name}".strip()
        raise denied(
            who.name,
            f"a KILL QUERY condition with {what[:80]}",
            "is not a comparison of query_id, user or query with literals",
        )


def _values_judged(parser: Parser, who: Who, data: str | None, params: Mapping[str, str]) -> bool:
    """True where VALUES data, read by the engine as the select list `SELECT <data>` (the same
    expression parser the Values format uses), calls nothing the user may not call in a
    SELECT; Refused where it calls something refused; False where it does not read as one
    (the data is then taken as literals only)."""
    if data is None or len(data) > VALUES_JUDGED_CHARS:
        return False
    body = data.strip().rstrip(";").strip()
    if not body:
        return False
    reader = Who(who.name, max(who.readonly, 2), who.level, who.allow, who.limits)
    try:
        judge(parser, reader, "SELECT " + body, params=params, database=None)
    except Refused as e:
        if e.code == 62:
            return False
        raise
    except EngineError:  # not SQL expressions (a syntax error): literals only
        return False
    return True


# VALUES data up to this size is judged as expressions (ClickHouse's max_query_size is 256 KiB);
# a larger VALUES body is read as literals only
VALUES_JUDGED_CHARS = 200_000


def _is_read(root: str) -> bool:
    return root in READ_ROOTS or root.startswith(READ_ROOT_PREFIXES)


def _check_root(who: Who, root: str, toks: list[S.Token], nodes: list[Node]) -> None:
    feature = FEATURE_ROOTS.get(root)
    if feature is not None:
        if feature not in who.allow:
            raise denied(
                who.name,
                f"{S.first_word(toks)} statements",
                "reach the host's files or the engine's own state",
            )
        return
    if root == "KillQueryQuery" or _is_read(root):
        if root == "ShowProcesslistQuery" and not who.admin and "system_tables" not in who.allow:
            raise denied(who.name, "SHOW PROCESSLIST", "shows other sessions' statements")
        return
    if root in WRITE_ROOTS:
        if who.readonly:
            raise Refused(164, f"{who.name}: Cannot execute query in readonly mode", "READONLY")
        src = _dictionary_source(toks, nodes)
        if src and "dictionary_source" not in who.allow:
            raise denied(
                who.name, f"a dictionary with source {src}", "reads from outside the store"
            )
        return
    raise denied(
        who.name, f"{S.first_word(toks) or root} statements", "are not served by railscope serve"
    )


def _dictionary_source(toks: list[S.Token], nodes: list[Node]) -> str:
    """What a CREATE DICTIONARY reads that is not a table of the store ("" where nothing): its
    source kind, or the CLICKHOUSE source's keys that reach another server or run a query."""
    if not any(n.kind == "Dictionary definition" for n in nodes):
        return ""
    kinds = [n.name.lower() for n in nodes if n.kind == "FunctionWithKeyValueArguments"]
    kind = kinds[0] if kinds else "(unknown)"
    if kind == "null":
        return ""
    if kind != "clickhouse":
        return kind.upper()
    for i, t in enumerate(toks):
        if t.upper == "SOURCE" and i + 3 < len(toks) and toks[i + 1].text == "(":
            inner = toks[i + 3].depth  # inside CLICKHOUSE( ... )
            keys = {x.upper for x in toks[i + 4 :] if x.kind == "word" and x.depth == inner + 1}
            keys = {k for k in keys if k in _CLICKHOUSE_SOURCE_KEYS}
            extra = keys - {"DB", "TABLE", "NAME"}
            return f"CLICKHOUSE({', '.join(sorted(extra))})" if extra else ""
    return "CLICKHOUSE(?)"


# the keys of a CLICKHOUSE dictionary source (docs: dictionary sources); all but DB/TABLE/NAME
# reach another server or run a query of their own
_CLICKHOUSE_SOURCE_KEYS = frozenset(
    {"HOST", "PORT", "USER", "PASSWORD", "DB", "TABLE", "NAME", "QUERY", "WHERE",
     "INVALIDATE_QUERY", "UPDATE_FIELD", "UPDATE_LAG", "SECURE", "QUOTA_KEY"}
)  # fmt: skip


def _check_names(parser: Parser, who: Who, toks: list[S.Token], nodes: list[Node]) -> None:
    """Every function, table function and engine the statement names: AST Function nodes and,
    for what the dump leaves out (SETTINGS values, dictionary sources), every `name(` of the
    canonical text."""
    names = {
        n.name.lower() for n in nodes if n.kind in ("Function", "FunctionWithKeyValueArguments")
    }
    names |= S.called_names(toks)
    table_functions, engines = parser.table_functions(), parser.engines()
    tf_ok = TABLE_FUNCTIONS_READ | (TABLE_FUNCTIONS_ADMIN if who.admin else frozenset())
    for name in sorted(names):
        if name in who.allow:
            continue
        if name in HOST_FUNCTIONS or name in HOST_TABLE_FUNCTIONS:
            raise denied(who.name, f"{name}()", "reaches serve's host or the network")
        if name in table_functions and name not in tf_ok:
            if name in TABLE_FUNCTIONS_ADMIN:
                raise denied(
                    who.name,
                    f"table function {name}()",
                    "reads tables by name or pattern, system ones included",
                )
            raise denied(who.name, f"table function {name}()", "reaches outside the store")
        if name not in table_functions and name in engines and name not in ENGINES:
            raise denied(who.name, f"engine {name}", "keeps or reads data outside the store")


def _check_files(who: Who, toks: list[S.Token], nodes: list[Node]) -> None:
    """INTO OUTFILE (every form: APPEND, TRUNCATE, AND STDOUT) and FROM INFILE."""
    outfile = S.has_sequence(toks, "INTO", "OUTFILE") or any(
        n.depth == 1 and n.kind == "Literal" for n in nodes if nodes[0].kind.startswith("Select")
    )
    if outfile and "into_outfile" not in who.allow:
        raise denied(who.name, "INTO OUTFILE", "writes a file on serve's host")
    infile = S.has_sequence(toks, "FROM", "INFILE") or any(
        n.depth == 1 and n.kind == "Literal" for n in nodes if nodes[0].kind == "InsertQuery"
    )
    if infile and "from_infile" not in who.allow:
        raise denied(who.name, "FROM INFILE", "reads a file on serve's host")


# functions whose right-hand argument, a bare name, is a table (`'x' IN processes`)
_IN_FUNCTIONS = frozenset(
    {"in", "notin", "globalin", "globalnotin", "nullin", "notnullin", "globalnullin",
     "globalnotnullin"}
)  # fmt: skip


def _in_tables(nodes: list[Node]) -> set[int]:
    """Indexes of the Identifier nodes that name a table as the right side of IN."""
    out = set()
    for i, n in enumerate(nodes):
        if n.kind != "Function" or n.name.lower() not in _IN_FUNCTIONS:
            continue
        args: list[int] = []
        for j in range(i + 1, len(nodes)):  # its subtree, up to its second argument
            if nodes[j].depth <= n.depth:
                break
            if nodes[j].depth == n.depth + 2:
                args.append(j)
                if len(args) == 2:
                    break
        if len(args) == 2 and nodes[args[1]].kind == "Identifier":
            out.add(args[1])
    return out


def _insert_target(nodes: list[Node]) -> tuple[str, str] | None:
    """An INSERT's (database or "", table): the root's leading Identifier children (EXPLAIN AST
    writes `INSERT INTO db.t` as two, `INSERT INTO t` as one); None for any other statement and
    for INSERT INTO TABLE FUNCTION."""
    if nodes[0].kind != "InsertQuery":
        return None
    names: list[str] = []
    for n in nodes[1:]:
        if n.depth != 1:
            continue
        if n.kind != "Identifier" or len(names) == 2:
            break
        names.append(n.name)
    if not names:
        return None
    return ("", names[0]) if len(names) == 1 else (names[0], names[1])


def _tables(nodes: list[Node]) -> tuple[str, ...]:
    """Every table the statement reads or writes by name, as EXPLAIN AST writes it (`db.t` or
    `t`), in order, each once."""
    names = [n.name.split(" ", 1)[0] for n in nodes if n.kind == "TableIdentifier"]
    target = _insert_target(nodes)
    if target is not None:
        names.insert(0, ".".join(x for x in target if x))
    return tuple(dict.fromkeys(names))


def _check_tables(who: Who, nodes: list[Node], database: str | None) -> None:
    """A read-only user reads only the system tables that show no other session's statements or
    the server's own configuration, and no information_schema (policy.SYSTEM_READABLE)."""
    if who.admin or "system_tables" in who.allow:
        return
    current = (database or "default").lower()
    as_table = _in_tables(nodes)
    for i, n in enumerate(nodes):
        if n.kind == "Function" and n.name.lower() in SERVER_FUNCTIONS:
            raise denied(who.name, f"{n.name}()", "shows the server's own configuration")
        if n.kind not in ("TableIdentifier", "Identifier"):
            continue
        name = n.name.split(" ", 1)[0]
        db, dot, table = name.partition(".")
        if not dot:
            if n.kind == "Identifier" and i not in as_table:
                continue
            db, table = current, name
        db = db.lower()
        if db == "information_schema":
            raise denied(who.name, f"information_schema.{table}", "shows the server's catalog")
        if db == "system" and table not in SYSTEM_READABLE:
            raise denied(
                who.name,
                f"system.{table}",
                "shows other sessions' statements or the engine's secrets",
            )


def _unreadable_settings(who: Who) -> Refused:
    return Refused(
        497,
        f"{who.name}: Not enough privileges: serve cannot read every SETTINGS clause of this "
        "statement (give settings as URL parameters)",
        "ACCESS_DENIED",
    )


def _check_settings(who: Who, toks: list[S.Token]) -> int:
    """The statement's SETTINGS / SET / MODIFY SETTING clauses, each setting as policy.py says (a
    table's own settings too: `disk`, `storage_policy` are refused there). Returns how many
    clauses there are."""
    if not any(t.upper in ("SETTINGS", "SET", "SETTING") for t in toks):
        return 0
    got = S.setting_changes(toks)
    if got is None:
        raise _unreadable_settings(who)
    changes, clauses = got
    for c in changes:
        check_setting(who.name, who.level, who.allow, who.limits, c.name, c.value)
    return clauses


def check_url_settings(who: Who, settings: Mapping[str, str]) -> None:
    """The settings a request gives as URL parameters (not transport ones), as policy.py says."""
    for k, v in settings.items():
        check_setting(who.name, who.level, who.allow, who.limits, k, v)


def valid_database(name: str) -> str:
    """`database` (URL parameter or X-ClickHouse-Database) as an identifier, or BAD_ARGUMENTS."""
    if not _IDENT.match(name):
        raise Refused(
            36,
            "database must be an identifier (letters, digits and _, not starting with a digit)",
            "BAD_ARGUMENTS",
        )
    return name
