"""Which vault a SQL statement reaches: a small tokenizer, a reader of the statement forms the
store writes, and the rule the vault-filter test holds every statement to.

**The rule.** Every mention of a table that holds vault data must be *pinned* to one vault,
and every pinned mention in one statement to the same vault. A column is pinned to a value
when a condition every row of its table must meet says so:

- ``m.vault_id = ?`` in a ``WHERE`` (or in the ``ON`` of an inner join) pins ``m.vault_id``;
- ``p.vault_id = m.vault_id`` passes ``m``'s pin on to ``p`` (and back: an inner condition
  filters both sides; a ``LEFT JOIN``'s ``ON`` filters only the table it joins);
- ``x.col IN (SELECT y.col ...)`` passes ``y.col``'s pin on to ``x.col``;
- an ``INSERT`` pins the columns it writes to the values (or selected columns) it writes;
- a condition under a top-level ``OR`` pins nothing, nor does one on another scope's table.

A table carries its vault in its vault column (:data:`VAULT_COLUMN`). Three tables of vault
data carry none yet (:data:`BELONGS_TO`): a mention of one is pinned when the key naming its
parent row takes its values from a pinned mention of the parent (``v.seq = m.seq`` with ``m``
pinned); a distributed schema needs them to carry the column (docs/deploy.md). Tables that
hold no vault's rows are :data:`NOT_VAULT_DATA`.

The reader knows the forms the store uses (``SELECT`` with joins, derived tables and
subqueries, ``WITH``, ``INSERT ... VALUES | SELECT``, ``UPDATE ... FROM``, ``DELETE``), not all
of SQL: what it cannot read it reports as a problem rather than passing it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

# Tables of vault data, and the column holding each row's vault.
VAULT_COLUMN = {
    "vaults": "id",
    "keys": "vault_id",
    "memories": "vault_id",
    "batches": "vault_id",
    "lineage": "vault_id",
    "usage_events": "vault_id",
    "postings": "vault_id",
    "reflector_runs": "vault_id",
    "batch_related": "vault_id",
    "evidence": "vault_id",
}
# Tables only the PostgreSQL store has (SQLite's BM25 index lives in memory, over FTS5).
POSTGRES_ONLY = {"postings"}
# Tables of vault data without a vault column: (column, parent table, parent key) pairs, each
# naming the row (of a table in VAULT_COLUMN) whose vault a row belongs to.
BELONGS_TO = {
    "vectors": (("seq", "memories", "seq"),),
    "embed_queue": (("seq", "memories", "seq"),),
    "batch_sources": (("batch_id", "batches", "id"), ("memory_id", "memories", "id")),
}
# Tables (and views) that hold no vault's rows, and why.
NOT_VAULT_DATA = {
    "schema_migrations": "PostgreSQL's record of the vault's migrations applied",
    "oauth_schema_migrations": "PostgreSQL's record of the authorization server's migrations",
    "ui_schema_migrations": "PostgreSQL's record of the explorer's migrations",
    "memories_fts": "SQLite's FTS5 index, kept by triggers on the memories it indexes",
    "memories_fts_data": "a shadow table of SQLite's FTS5 index",
    "memories_fts_idx": "a shadow table of SQLite's FTS5 index",
    "memories_fts_docsize": "a shadow table of SQLite's FTS5 index",
    "memories_fts_config": "a shadow table of SQLite's FTS5 index",
    "memories_vocab": "a view of SQLite's FTS5 index (fts5vocab)",
    "memories_instances": "a temporary view of SQLite's FTS5 index the BM25 index loads from",
    "lexical_log": "a temporary table of the SQLite writer: rows its last commit changed",
    "rate_buckets": "PostgreSQL's shared rate-limit budgets, one per caller (a key, an address)",
    "pg_index": "PostgreSQL's catalogue: whether a model's HNSW index is valid yet",
    "pg_class": "PostgreSQL's catalogue: the name of a model's HNSW index",
    "pg_stat_progress_create_index": "PostgreSQL's view of index builds under way: whether one is",
    # The authorization server's and the explorer's state, in the same database on
    # PostgreSQL (auth/state/store.py, auth/server/signing_keys.py, ui/sessions.py): the store
    # never reads them; a grant, an identity or a session names its vault by reference (vault_ref).
    **{
        f"oauth_{name}": "the embedded authorization server's state (not the store's)"
        for name in (
            "clients",
            "requests",
            "sessions",
            "grants",
            "codes",
            "refresh_tokens",
            "signing_keys",
            "oidc_logins",
            "identities",
            "grant_uses",
        )
    },
    "ui_sessions": "the explorer's browser sessions (not the store's)",
    "ui_corrections": "the explorer's links from a memory to its correction, by vault_ref",
}
VAULT_DATA = set(VAULT_COLUMN) | set(BELONGS_TO)

# --- tokens ------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|--[^\n]*)
  | (?P<string>'(?:[^']|'')*')
  | (?P<quoted>"(?:[^"]|"")*")
  | (?P<number>\d+(?:\.\d+)?)
  | (?P<param>\?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_$]*(?:\.(?:[A-Za-z_][A-Za-z0-9_$]*|\*))*)
  | (?P<op>::|<=>|<=|>=|<>|!=|\|\||@@|[-+*/%=<>(),;.\[\]:])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class Token:
    kind: str  # name, quoted, string, number, param, op
    text: str
    param: int = -1  # for a ``?``: its position among the statement's parameters

    def kw(self, *words: str) -> bool:
        """Whether this is one of the keywords ``words`` (upper case)."""
        return self.kind == "name" and self.text.upper() in words

    @property
    def value(self) -> bool:
        return self.kind in ("string", "number", "param")


def tokens(sql: str) -> list[Token]:
    """The statement's tokens, comments and white space left out; ``?`` numbered in order."""
    out: list[Token] = []
    params = 0
    pos = 0
    while pos < len(sql):
        match = _TOKEN.match(sql, pos)
        if match is None:
            raise ValueError(f"cannot read SQL at {sql[pos : pos + 20]!r}")
        pos = match.end()
        kind = match.lastgroup or ""
        if kind == "space":
            continue
        if kind == "param":
            out.append(Token(kind, "?", params))
            params += 1
        else:
            out.append(Token(kind, match.group()))
    return out


def _closing(toks: Sequence[Token]) -> dict[int, int]:
    """Each ``(``'s position -> its ``)``'s position."""
    found: dict[int, int] = {}
    opened: list[int] = []
    for i, tok in enumerate(toks):
        if tok.text == "(":
            opened.append(i)
        elif tok.text == ")":
            if not opened:
                raise ValueError("unbalanced parentheses")
            found[opened.pop()] = i
    if opened:
        raise ValueError("unbalanced parentheses")
    return found


# --- statement shapes ----------------------------------------------------------------------

_LOCKS = ("FOR UPDATE SKIP LOCKED", "FOR UPDATE OF", "FOR UPDATE", "FOR SHARE")


def shape(sql: str) -> str:
    """The statement with what differs between calls and dialects taken out: every value a
    ``?``, membership (``IN (?, ?)``, ``= ANY(?)``) ``IN (?)``, row locks, ``COLLATE "C"`` and
    ``CROSS`` dropped. Two executions of one statement of the store have one shape, on either
    database when the statement is written once for both."""
    toks = tokens(sql)
    words: list[str] = []
    i = 0
    while i < len(toks):
        tok = toks[i]
        ahead = " ".join(t.text.upper() for t in toks[i : i + 4])
        lock = next((lk for lk in _LOCKS if ahead.startswith(lk)), None)
        if lock is not None:
            i += len(lock.split()) + (1 if lock.endswith(" OF") else 0)
        elif tok.kw("COLLATE"):
            i += 2
        elif tok.kw("CROSS") and i + 1 < len(toks) and toks[i + 1].kw("JOIN"):
            i += 1
        elif (member := _membership(toks, i)) is not None:
            words.append("IN (?)")
            i = member
        else:
            words.append("?" if tok.value else tok.text)
            i += 1
    return _render(words)


_SPACED = {"IN", "VALUES", "AS", "ON", "JOIN", "FROM", "AND", "OR", "NOT", "EXISTS", "INTO"}


def _render(words: Sequence[str]) -> str:
    """Words joined as one writes SQL: ``count(*)``, ``(a, b)``, ``+m.vault_id``, ``?::text``."""
    text = ""
    for i, word in enumerate(words):
        before = words[i - 1] if i else ""
        tight = (
            not text
            or word in (")", ",", "::")
            or before in ("(", "::")
            or (word == "(" and before[-1:].isalnum() and before.upper() not in _SPACED)
            or (before == "+" and i > 1 and (words[i - 2] == "(" or words[i - 2].isupper()))
        )
        text += word if tight else " " + word
    return text


def _membership(toks: Sequence[Token], i: int) -> int | None:
    """Where a membership test starting at ``i`` ends (``IN (values)`` or ``= ANY(value)``)."""
    if toks[i].kw("IN") and i + 1 < len(toks) and toks[i + 1].text == "(":
        j = i + 2
        while j < len(toks) and toks[j].value:
            if toks[j + 1].text == ")":
                return j + 2
            if toks[j + 1].text != ",":
                return None
            j += 2
        return None
    texts = [t.text.upper() for t in toks[i : i + 5]]
    if texts[:3] == ["=", "ANY", "("] and len(texts) == 5 and texts[4] == ")":
        return i + 5 if toks[i + 3].value else None
    return None


# --- the reader ----------------------------------------------------------------------------

_CLAUSES = ("WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET", "FOR", "RETURNING", "UNION")
_JOINS = ("JOIN", "LEFT", "INNER", "CROSS", "OUTER")
_NOT_READ = ("RIGHT", "FULL", "NATURAL", "USING")  # joins the reader refuses
_NOT_ALIASES = {*_CLAUSES, *_JOINS, *_NOT_READ, "ON", "SET", "AS", "VALUES", "SELECT", "FROM"}
VAULT = "<vault>"  # the pseudo-column of a BELONGS_TO mention: the vault it belongs to

Node = tuple[int, str]  # (mention number, column)
Operand = Node | Token | None  # a column, a value, or something else
Source: TypeAlias = "Scope | int | None"  # a derived table: a CTE, a subquery's "(", a function
Condition = tuple[int, int, "Mention | None"]  # a token range, and the one mention it filters


@dataclass
class Mention:
    """One mention of a table in a statement (``memories m``)."""

    number: int
    table: str
    alias: str

    @property
    def vault_node(self) -> Node:
        return (self.number, VAULT_COLUMN.get(self.table, VAULT))

    @property
    def name(self) -> str:
        return self.table if self.alias in ("", self.table) else f"{self.table} {self.alias}"


@dataclass
class Scope:
    """One ``SELECT``, ``INSERT``, ``UPDATE`` or ``DELETE``: the tables it names."""

    parent: Scope | None
    ctes: set[str]  # the names of the CTEs it may read
    # what its FROM names besides tables: a CTE (its scope), a subquery (its "(" position),
    # a function (None)
    derived: dict[str, Source] = field(default_factory=dict)
    mentions: list[Mention] = field(default_factory=list)
    items: list[Operand] = field(default_factory=list)  # its select list
    outputs: dict[str, Operand] = field(default_factory=dict)  # its result's named columns


@dataclass
class Reading:
    """What one statement says about vaults: the tables it mentions, the values conditions
    pin columns to, and the columns that pass their pins on to others."""

    mentions: list[Mention] = field(default_factory=list)
    pins: dict[Node, set[Any]] = field(default_factory=dict)
    flows: dict[Node, set[Node]] = field(default_factory=dict)  # column -> columns it pins
    problems: list[str] = field(default_factory=list)

    def flow(self, source: Node, target: Node) -> None:
        self.flows.setdefault(source, set()).add(target)


class Reader:
    """Reads one statement into a :class:`Reading`; ``params`` are the values of its ``?``."""

    def __init__(self, sql: str, params: Sequence[Any] | None) -> None:
        self.t = tokens(sql)
        if self.t and self.t[-1].text == ";":
            self.t.pop()
        self.closing = _closing(self.t)
        self.params = params
        self.reading = Reading()
        self.subqueries: dict[int, Scope] = {}  # "(" position -> the scope inside
        self.ctes: dict[str, Scope] = {}  # a CTE's name -> its scope

    # -- positions --

    def find(self, lo: int, hi: int, *words: str) -> int:
        """The first depth-0 position in [lo, hi) holding one of ``words`` (keywords, or
        operators such as ``=``); ``hi`` if none."""
        i = lo
        while i < hi:
            if self.t[i].text == "(":
                i = self.closing[i] + 1
                continue
            if self.t[i].kw(*words) or (self.t[i].kind == "op" and self.t[i].text in words):
                return i
            i += 1
        return hi

    def split(self, lo: int, hi: int, sep: str) -> list[tuple[int, int]]:
        """[lo, hi) split at the depth-0 ``sep`` (``,`` or ``AND``, not a ``BETWEEN``'s)."""
        parts = []
        start = i = lo
        between = False
        while i < hi:
            tok = self.t[i]
            if tok.text == "(":
                i = self.closing[i] + 1
                continue
            if tok.kw("BETWEEN"):
                between = True
            elif (tok.text == sep or tok.kw(sep)) and not (sep == "AND" and between):
                parts.append((start, i))
                start = i + 1
            elif tok.kw("AND"):
                between = False
            i += 1
        parts.append((start, hi))
        return [(a, b) for a, b in parts if a < b]

    # -- statements --

    def statement(self, lo: int, hi: int, parent: Scope | None, names: set[str]) -> Scope:
        """Read the statement in [lo, hi); ``names`` are the CTEs it may name."""
        scope = Scope(parent, set(names))
        first = self.t[lo]
        if first.kw("WITH"):
            return self.with_(lo + 1, hi, parent, names)
        if first.kw("SELECT"):
            self.select(lo, hi, scope)
        elif first.kw("INSERT"):
            self.insert(lo, hi, scope)
        elif first.kw("UPDATE"):
            self.update(lo, hi, scope)
        elif first.kw("DELETE"):
            self.delete(lo, hi, scope)
        else:
            self.reading.problems.append(f"the reader does not know a {first.text} statement")
        return scope

    def with_(self, lo: int, hi: int, parent: Scope | None, names: set[str]) -> Scope:
        i, ctes = lo, set(names)
        while self.t[i].kind == "name" and self.t[i + 1].kw("AS"):
            opened = i + 2
            self.ctes[self.t[i].text] = self.statement(
                opened + 1, self.closing[opened], parent, ctes
            )
            ctes.add(self.t[i].text)
            i = self.closing[opened] + 1
            if self.t[i].text != ",":
                break
            i += 1
        return self.statement(i, hi, parent, ctes)

    def select(self, lo: int, hi: int, scope: Scope) -> None:
        start = lo + 2 if self.t[lo + 1].kw("DISTINCT") else lo + 1
        from_at = self.find(start, hi, "FROM")
        end = self.find(from_at, hi, *_CLAUSES)
        conditions = self.from_list(from_at + 1, end, scope) if from_at < hi else []
        self.nested(lo, hi, scope)
        for a, b in self.split(start, from_at, ","):
            name, operand = self.item(a, b, scope)
            scope.items.append(operand)
            if name:
                scope.outputs[name] = operand
        where = self.find(end, hi, "WHERE")
        if where < hi:
            conditions.append((where + 1, self.find(where + 1, hi, *_CLAUSES), None))
        self.conditions(conditions, scope)

    def insert(self, lo: int, hi: int, scope: Scope) -> None:
        into = self.find(lo, hi, "INTO")
        aliased = self.t[into + 2].kw("AS")  # INSERT INTO rate_buckets AS b (...)
        alias = self.t[into + 3].text if aliased else ""
        target = self.mention(scope, self.t[into + 1].text, alias)
        opened = into + (4 if aliased else 2)
        columns = [self.t[a].text for a, _ in self.split(opened + 1, self.closing[opened], ",")]
        body = self.closing[opened] + 1
        self.returning(lo, hi, scope)
        if self.t[body].kw("VALUES"):
            self.values(body + 1, hi, target, columns)
            return
        end = next(
            (i for i in range(body, hi - 1) if self.t[i].kw("ON") and self.t[i + 1].kw("CONFLICT")),
            self.find(body, hi, "RETURNING"),
        )
        selected = self.statement(body, end, None, scope.ctes)
        for column, item in zip(columns, selected.items, strict=True):
            if isinstance(item, Token):
                self.pin((target.number, column), item)
            elif item is not None:
                self.reading.flow(item, (target.number, column))

    def values(self, i: int, hi: int, target: Mention, columns: list[str]) -> None:
        """``VALUES (...), ...``: each value written to a column pins it."""
        while i < hi and self.t[i].text == "(":
            row = self.split(i + 1, self.closing[i], ",")
            for column, (a, b) in zip(columns, row, strict=True):
                value = self.operand(a, b, Scope(None, set()))
                if isinstance(value, Token):
                    self.pin((target.number, column), value)
            i = self.closing[i] + 1
            if i < hi and self.t[i].text == ",":
                i += 1

    def update(self, lo: int, hi: int, scope: Scope) -> None:
        set_at = self.find(lo, hi, "SET")
        alias = self.t[lo + 2].text if set_at > lo + 2 else ""
        target = self.mention(scope, self.t[lo + 1].text, alias)
        end = self.find(set_at, hi, "FROM", "WHERE", "RETURNING")
        keys = (target.vault_node[1], *(c for c, _, _ in BELONGS_TO.get(target.table, ())))
        for a, _ in self.split(set_at + 1, end, ","):
            if self.t[a].text in keys:
                self.reading.problems.append(f"moves rows of {target.table} between vaults")
        conditions: list[Condition] = []
        if end < hi and self.t[end].kw("FROM"):
            conditions = self.from_list(end + 1, self.find(end, hi, "WHERE", "RETURNING"), scope)
        self.where(lo, hi, scope, conditions)

    def delete(self, lo: int, hi: int, scope: Scope) -> None:
        from_at = self.find(lo, hi, "FROM")
        after = self.t[from_at + 2] if from_at + 2 < hi else None
        alias = after.text if after is not None and not after.kw(*_NOT_ALIASES) else ""
        self.mention(scope, self.t[from_at + 1].text, alias)
        self.where(lo, hi, scope, [])

    def where(self, lo: int, hi: int, scope: Scope, conditions: list[Condition]) -> None:
        self.nested(lo, hi, scope)
        where = self.find(lo, hi, "WHERE")
        if where < hi:
            conditions.append((where + 1, self.find(where + 1, hi, "RETURNING"), None))
        self.conditions(conditions, scope)
        self.returning(lo, hi, scope)

    def returning(self, lo: int, hi: int, scope: Scope) -> None:
        """A ``RETURNING`` list: the named columns of the statement's result."""
        at = self.find(lo, hi, "RETURNING")
        for a, b in self.split(at + 1, hi, ",") if at < hi else []:
            name, operand = self.item(a, b, scope)
            if name:
                scope.outputs[name] = operand

    # -- FROM --

    def from_list(self, lo: int, hi: int, scope: Scope) -> list[Condition]:
        """Mention the FROM list's tables; the join conditions to read, each with the one
        mention it filters (a LEFT JOIN's table) or None (every mention of the scope)."""
        conditions: list[Condition] = []
        i = lo
        while i < hi:
            left = False
            while i < hi and (self.t[i].kw(*_JOINS) or self.t[i].text == ","):
                left = left or self.t[i].kw("LEFT")
                i += 1
            if self.t[i].kw(*_NOT_READ):
                raise ValueError(f"a {self.t[i].text} join")
            joined, i = self.from_item(i, hi, scope)
            if i < hi and self.t[i].kw(*_NOT_READ):
                raise ValueError(f"a {self.t[i].text} join")
            if i < hi and self.t[i].kw("ON"):
                stop = i + 1
                ends = (*_JOINS, *_NOT_READ)
                while stop < hi and not (self.t[stop].kw(*ends) or self.t[stop].text == ","):
                    stop = self.closing.get(stop, stop) + 1
                if not (left and joined is None):  # a LEFT JOIN's ON filters only its table
                    conditions.append((i + 1, stop, joined if left else None))
                i = stop
        return conditions

    def from_item(self, i: int, hi: int, scope: Scope) -> tuple[Mention | None, int]:
        """One FROM item at ``i``: a table (its mention), or a subquery, a function or a CTE
        (None); and where the item ends."""
        tok = self.t[i]
        source: Source = None
        if tok.text == "(":  # a subquery
            derived, source, after = True, i, self.closing[i] + 1
        elif i + 1 < hi and self.t[i + 1].text == "(":  # a function
            derived, after = True, self.closing[i + 1] + 1
            if after + 1 < hi and self.t[after].kw("WITH") and self.t[after + 1].kw("ORDINALITY"):
                after += 2
        else:
            derived, after = tok.text in scope.ctes, i + 1
            source = self.ctes.get(tok.text)
        if after < hi and self.t[after].kw("AS"):
            after += 1
        alias = ""
        if after < hi and self.t[after].kind == "name" and not self.t[after].kw(*_NOT_ALIASES):
            alias, after = self.t[after].text, after + 1
        if derived and after < hi and self.t[after].text == "(":  # AS t(a, b): renamed
            source, after = None, self.closing[after] + 1
        if derived:
            scope.derived[alias or tok.text] = source
            return None, after
        return self.mention(scope, tok.text, alias), after

    def column(self, scope: Scope, name: str) -> Node | None:
        """The (mention, column) a column reference names, when the reader can tell: one
        qualified by a table's alias (here or in an enclosing scope), a derived table's column
        that is a table's column, or an unqualified one in a scope of one table."""
        if "." not in name:
            if len(scope.mentions) == 1 and not scope.derived:
                return (scope.mentions[0].number, name)
            if not scope.mentions and len(scope.derived) == 1:
                return self.output(next(iter(scope.derived.values())), name)
            return None
        qualifier, column = name.rsplit(".", 1)
        qualifier = qualifier.rsplit(".", 1)[-1]
        found: Scope | None = scope
        while found is not None:
            if qualifier in found.derived:
                return self.output(found.derived[qualifier], column)
            for mention in found.mentions:
                if qualifier in (mention.alias, mention.table):
                    return (mention.number, column)
            found = found.parent
        return None

    def output(self, source: Source, column: str) -> Node | None:
        """The table column a derived table's ``column`` is, if it is one."""
        scope = self.subqueries.get(source) if isinstance(source, int) else source
        value = scope.outputs.get(column) if isinstance(scope, Scope) else None
        return value if isinstance(value, tuple) else None

    def mention(self, scope: Scope, name: str, alias: str) -> Mention:
        table = name.rsplit(".", 1)[-1]  # temp.lexical_log
        found = Mention(len(self.reading.mentions), table, alias or table)
        self.reading.mentions.append(found)
        scope.mentions.append(found)
        return found

    # -- conditions --

    def conditions(self, conditions: list[Condition], scope: Scope) -> None:
        for lo, hi, only in conditions:
            filtered = {m.number for m in ([only] if only is not None else scope.mentions)}
            self.condition(lo, hi, scope, filtered)

    def condition(self, lo: int, hi: int, scope: Scope, filtered: set[int]) -> None:
        """Pins and flows of a condition on the mentions numbered ``filtered``."""
        if self.find(lo, hi, "OR") < hi:
            return  # a disjunction guarantees none of its parts
        for a, b in self.split(lo, hi, "AND"):
            if self.t[a].text == "(" and self.closing[a] == b - 1:
                self.condition(a + 1, b - 1, scope, filtered)
            else:
                self.conjunct(a, b, scope, filtered)

    def conjunct(self, lo: int, hi: int, scope: Scope, filtered: set[int]) -> None:
        """``a = b`` (each a column or a value), or ``column IN (SELECT column ...)``."""
        in_at = self.find(lo, hi, "IN")
        if in_at < hi:
            column = self.operand(lo, in_at, scope)
            inner = self.subqueries.get(in_at + 1)
            selected = inner.items if inner is not None else []
            source = selected[0] if len(selected) == 1 else None
            if isinstance(column, tuple) and column[0] in filtered and isinstance(source, tuple):
                self.reading.flow(source, column)
            return
        eq = self.find(lo, hi, "=")
        if eq == hi:
            return
        left, right = self.operand(lo, eq, scope), self.operand(eq + 1, hi, scope)
        for here, there in ((left, right), (right, left)):
            if isinstance(here, tuple) and here[0] in filtered:
                if isinstance(there, Token):
                    self.pin(here, there)
                elif isinstance(there, tuple):
                    self.reading.flow(there, here)

    def operand(self, lo: int, hi: int, scope: Scope) -> Operand:
        """A column (``m.vault_id``; SQLite's ``+m.vault_id``) or a value (``?``, ``'x'``,
        ``?::text``) making up [lo, hi); None for anything else."""
        if hi - lo == 2 and self.t[lo].text == "+":
            lo += 1
        tok = self.t[lo]
        if tok.value and (hi - lo == 1 or self.t[lo + 1].text == "::"):
            return tok
        if hi - lo == 1 and tok.kind == "name" and not tok.kw("NULL", "TRUE", "FALSE"):
            return self.column(scope, tok.text)
        return None

    def item(self, lo: int, hi: int, scope: Scope) -> tuple[str | None, Operand]:
        """A select-list (or RETURNING) item: its name, and the column or value it is
        (``m.seq``, ``?``, either ``AS`` a name; None for an expression)."""
        name = None
        if hi - lo > 2 and self.t[hi - 2].kw("AS"):
            name, hi = self.t[hi - 1].text, hi - 2
        elif hi - lo == 1 and self.t[lo].kind == "name":
            name = self.t[lo].text.rsplit(".", 1)[-1]
        return name, self.operand(lo, hi, scope)

    def pin(self, node: Node, tok: Token) -> None:
        value: Any = tok.text.strip("'")
        if tok.kind == "param":
            known = self.params is not None and tok.param < len(self.params)
            value = self.params[tok.param] if self.params and known else ("?", tok.param)
        self.reading.pins.setdefault(node, set()).add(_hashable(value))

    # -- subqueries --

    def nested(self, lo: int, hi: int, scope: Scope) -> None:
        """Read every subquery directly inside [lo, hi) as a scope within ``scope``."""
        i = lo + 1
        while i < hi:
            if self.t[i].text == "(" and self.t[i + 1].kw("SELECT", "WITH"):
                end = self.closing[i]
                if i not in self.subqueries:
                    self.subqueries[i] = self.statement(i + 1, end, scope, scope.ctes)
                i = end + 1
                continue
            i += 1


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def read(sql: str, params: Sequence[Any] | None = None) -> Reading:
    """The :class:`Reading` of one data statement."""
    reader = Reader(sql, params)
    if any(t.text == ";" for t in reader.t):
        reader.reading.problems.append("several statements in one")
    elif reader.t:
        reader.statement(0, len(reader.t), None, set())
    return reader.reading


def pinned(reading: Reading) -> dict[Node, set[Any]]:
    """The values each column is pinned to once pins have flowed along every condition; a
    BELONGS_TO mention takes the vault of the parent row its key takes its values from."""
    flows = {source: set(targets) for source, targets in reading.flows.items()}

    def reach(start: Node) -> set[Node]:
        seen, todo = {start}, [start]
        while todo:
            for target in flows.get(todo.pop(), ()):
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        return seen

    for child in reading.mentions:
        for column, table, key in BELONGS_TO.get(child.table, ()):
            for parent in reading.mentions:
                if parent.table == table and (child.number, column) in reach((parent.number, key)):
                    flows.setdefault(parent.vault_node, set()).add(child.vault_node)
    found: dict[Node, set[Any]] = {}
    for node, values in reading.pins.items():
        for reached in reach(node):
            found.setdefault(reached, set()).update(values)
    return found


# Statements that read or write no rows, by their first word, and why none names a vault: the
# checker leaves them alone (a statement of another kind must be a data statement it reads).
NOT_DATA = {
    "CREATE": "schema: migrations, a model's HNSW index, SQLite's temporary change log",
    "ALTER": "schema: migrations",
    "DROP": "schema: migrations",
    "PRAGMA": "SQLite's settings and schema version",
    "BEGIN": "transaction control",
    "COMMIT": "transaction control",
    "ROLLBACK": "transaction control",
    "SET": "PostgreSQL settings of one transaction (SET LOCAL, its isolation level)",
}
DATA = ("SELECT", "WITH", "INSERT", "UPDATE", "DELETE")


def kind(sql: str) -> str:
    """The statement's first word, upper case ("" for an empty statement)."""
    toks = tokens(sql)
    return toks[0].text.upper() if toks else ""


def problems(sql: str, params: Sequence[Any] | None = None) -> list[str]:
    """Why a data statement breaks the rule (the module's docstring); empty when it keeps it.
    With ``params`` (the values of its ``?``) the vaults it is pinned to are compared too."""
    try:
        reading = read(sql, params)
    except (ValueError, KeyError, IndexError) as exc:
        return [f"the reader cannot read it ({exc})"]
    found = list(reading.problems)
    values = pinned(reading)
    vaults: set[Any] = set()
    for mention in reading.mentions:
        if mention.table not in VAULT_DATA:
            continue
        pins = values.get(mention.vault_node, set())
        if not pins:
            found.append(f"{mention.name}: not pinned to a vault")
        vaults |= pins
    if params is not None and len(vaults) > 1:
        found.append(f"pinned to {len(vaults)} different vaults")
    return found
