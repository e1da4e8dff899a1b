"""Every SQL statement a store runs, recorded at the seam where it reaches its database.

Nothing in the store changes: while a recording is on, the store's connections are observed
from outside, and its statements arrive as it wrote them (``?`` placeholders, the values of
each execution beside them).

- **SQLite.** The store opens every connection (its writer, each thread's reader, an
  export's) through ``connect`` (:mod:`mcp_memoryrouter.db.sqlite`'s, as
  :mod:`mcp_memoryrouter.vault.store.sqlite.store` imports it);
  :func:`recording_sqlite` puts a recording proxy around each one. Statements run by the
  database's own triggers are not statements of the store, and are not seen.
- **PostgreSQL.** Statements reach psycopg through its cursors (``Connection.execute`` makes
  one), whether the store wrote them through its ``Tx`` or on the raw connection (search,
  vectors, the embedding queue, migrations); :func:`recording_postgres` wraps the cursors'
  ``execute`` and ``executemany`` for connections to one database, and turns psycopg's
  ``%s`` back into the ``?`` the store writes.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, cast
from unittest.mock import patch

import psycopg
from psycopg import sql as pgsql
from psycopg.conninfo import conninfo_to_dict

from mcp_memoryrouter.db import sqlite as db_sqlite
from mcp_memoryrouter.vault.store.sqlite import store as sqlite_store

Params = Sequence[Any]


@dataclass(frozen=True)
class Executed:
    """One execution: the statement, the values of its ``?`` (one row per execution for an
    ``executemany``), and the call of the workload that ran it."""

    sql: str
    rows: tuple[Params, ...]
    call: str
    script: bool = False  # several statements in one text (executescript, a migration)


class Recording:
    def __init__(self) -> None:
        self.executed: list[Executed] = []
        self.call = "opening the store"
        self._lock = threading.Lock()

    def add(self, sql: str, rows: Sequence[Params], script: bool = False) -> None:
        if sql.strip():
            with self._lock:
                self.executed.append(Executed(sql, tuple(rows), self.call, script))

    @contextmanager
    def during(self, call: str) -> Iterator[list[Executed]]:
        """Name the statements run meanwhile ``call``; yields the list they are added to
        (filled when the block ends)."""
        before = len(self.executed)
        self.call = call
        found: list[Executed] = []
        try:
            yield found
        finally:
            self.call = "between calls"
            found.extend(self.executed[before:])


# --- SQLite ------------------------------------------------------------------------------


class _RecordingCursor:
    def __init__(self, cursor: sqlite3.Cursor, recording: Recording) -> None:
        self._cursor = cursor
        self._recording = recording

    def execute(self, sql: str, params: Params = ()) -> sqlite3.Cursor:
        self._recording.add(sql, [params])
        return self._cursor.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


class _RecordingConnection:
    """A ``sqlite3.Connection`` that records what runs through it."""

    def __init__(self, conn: sqlite3.Connection, recording: Recording) -> None:
        self._conn = conn
        self._recording = recording

    def execute(self, sql: str, params: Params = ()) -> sqlite3.Cursor:
        self._recording.add(sql, [params])
        return self._conn.execute(sql, params)

    def executemany(self, sql: str, rows: Sequence[Params]) -> sqlite3.Cursor:
        rows = list(rows)
        self._recording.add(sql, rows)
        return self._conn.executemany(sql, rows)

    def executescript(self, script: str) -> sqlite3.Cursor:
        self._recording.add(script, [()], script=True)
        return self._conn.executescript(script)

    def cursor(self) -> _RecordingCursor:
        return _RecordingCursor(self._conn.cursor(), self._recording)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


@contextmanager
def recording_sqlite(recording: Recording) -> Iterator[None]:
    """Record every statement of the SQLite stores opened meanwhile (and of their
    connections, for as long as they live)."""
    original: Callable[[str], sqlite3.Connection] = db_sqlite.connect

    def connect(path: str) -> sqlite3.Connection:
        return cast(sqlite3.Connection, _RecordingConnection(original(path), recording))

    with patch.object(sqlite_store, "connect", connect):
        yield


# --- PostgreSQL --------------------------------------------------------------------------


def _question_marks(text: str) -> str:
    """psycopg's ``%s`` as the store writes it (``?``), and ``%%`` as ``%``."""
    out, i = [], 0
    while i < len(text):
        pair = text[i : i + 2]
        if pair in ("%s", "%%"):
            out.append("?" if pair == "%s" else "%")
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _text(query: Any, conn: Any) -> str:
    if isinstance(query, pgsql.Composable):
        return query.as_string(conn)
    return query.decode() if isinstance(query, bytes) else str(query)


@contextmanager
def recording_postgres(recording: Recording, url: str) -> Iterator[None]:
    """Record every statement sent meanwhile to the database ``url`` names."""
    dbname = conninfo_to_dict(url)["dbname"]
    cursor, server = psycopg.Cursor, psycopg.ServerCursor
    originals = (cursor.execute, cursor.executemany, server.execute)

    def ours(conn: Any) -> bool:
        return bool(conn.info.dbname == dbname)

    def execute(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
        if ours(self.connection):
            recording.add(_question_marks(_text(query, self.connection)), [params or ()])
        return originals[0](self, query, params, **kw)

    def executemany(self: Any, query: Any, rows: Any, **kw: Any) -> Any:
        rows = list(rows)
        if ours(self.connection):
            recording.add(_question_marks(_text(query, self.connection)), rows)
        return originals[1](self, query, rows, **kw)

    def server_execute(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
        if ours(self.connection):
            recording.add(_question_marks(_text(query, self.connection)), [params or ()])
        return originals[2](self, query, params, **kw)

    with ExitStack() as patched:
        patched.enter_context(patch.object(cursor, "execute", execute))
        patched.enter_context(patch.object(cursor, "executemany", executemany))
        patched.enter_context(patch.object(server, "execute", server_execute))
        yield
