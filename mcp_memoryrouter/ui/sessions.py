"""The explorer's server-side sessions, in their own SQLite file in the data directory (0600),
or in the table ``ui_sessions`` of the shared PostgreSQL when replicas serve the explorer (a
session made on one works on every other; ``auth/state/database.py``). The tables are made
by ``ui/migrations``.

A person signs in with a memory key once; the browser then holds only a random secret in an
HttpOnly, SameSite=Strict cookie. The server keeps the secret's SHA-256 digest, the vault it
is bound to, whether the key is read-only, the session's CSRF token and the key sealed
(Fernet, with the data directory's sealing key). The key itself is never in a URL, a page or
the browser's storage, and it is checked by the vault on every call the session makes, so
revoking the key ends the session at its next request.

A session ends after :data:`IDLE_SECONDS` without a request, :data:`LIFETIME_SECONDS` after
sign-in whatever happens, or at sign-out.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mcp_memoryrouter.auth.state.database import Database, PostgresPool
from mcp_memoryrouter.auth.state.sealing import SealedElsewhere, Sealer
from mcp_memoryrouter.db.migrations import Migrations
from mcp_memoryrouter.ui.corrections import Corrections

UI_DB_FILE = "ui.sqlite3"
IDLE_SECONDS = 8 * 3600
LIFETIME_SECONDS = 7 * 86_400
# last_seen is written at most this often, so reading pages is not a write per request
TOUCH_SECONDS = 60

# the sessions, and the links the explorer keeps beside them (corrections)
MIGRATIONS = Migrations.of("mcp_memoryrouter.ui.migrations", record="ui_schema_migrations")


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class UiSession:
    secret: str
    vault_ref: str
    key: str
    read_only: bool
    csrf: str


class UiSessions:
    """Sign-ins are rare and rows are tiny: each method is a statement or two."""

    def __init__(
        self,
        path_or_db: Path | Database,
        sealer: Sealer,
        close: Callable[[], None] = lambda: None,
    ) -> None:
        self._sealer = sealer
        if isinstance(path_or_db, Path):
            sqlite = Database.sqlite(path_or_db, MIGRATIONS)
            self._db: Database = sqlite
            self._close = sqlite.close
        else:
            self._db = path_or_db
            self._close = close

    @classmethod
    def in_dir(cls, data_dir: Path, sealer: Sealer | None = None) -> UiSessions:
        return cls(data_dir / UI_DB_FILE, sealer or Sealer.in_dir(data_dir))

    @classmethod
    def postgres(cls, pool: PostgresPool, sealer: Sealer) -> UiSessions:
        """The tables in the shared database, migrated; the pool stays its owner's to
        close."""
        return cls(pool.database(MIGRATIONS), sealer)

    def close(self) -> None:
        self._close()

    def corrections(self) -> Corrections:
        """The corrections' links, in the same database as the sessions."""
        return Corrections(self._db)

    @property
    def remote(self) -> bool:
        """Whether calls wait on another machine: run them with ``off_loop``."""
        return self._db.remote

    def start(self, vault_ref: str, key: str, read_only: bool, now: float) -> UiSession:
        secret, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        self._db.run(
            "DELETE FROM ui_sessions WHERE last_seen <= ? OR created_at <= ?",
            now - IDLE_SECONDS,
            now - LIFETIME_SECONDS,
        )
        self._db.run(
            "INSERT INTO ui_sessions (digest, vault_ref, sealed_key, read_only, csrf, "
            "created_at, last_seen) VALUES (?, ?, ?, ?, ?, ?, ?)",
            _digest(secret),
            vault_ref,
            self._sealer.seal(key),
            int(read_only),
            csrf,
            now,
            now,
        )
        return UiSession(secret, vault_ref, key, read_only, csrf)

    def find(self, secret: str, now: float) -> UiSession | None:
        """The live session this secret opens (its idle clock restarted), else None."""
        digest = _digest(secret)
        row = self._db.one("SELECT * FROM ui_sessions WHERE digest = ?", digest)
        if row is None:
            return None
        if row["last_seen"] <= now - IDLE_SECONDS or row["created_at"] <= now - LIFETIME_SECONDS:
            self._db.run("DELETE FROM ui_sessions WHERE digest = ?", digest)
            return None
        if now - row["last_seen"] >= TOUCH_SECONDS:
            self._db.run("UPDATE ui_sessions SET last_seen = ? WHERE digest = ?", now, digest)
        key = self._sealer.unseal(row["sealed_key"])
        if key is None:  # another replica's sealing key: an error here, the session stays
            raise SealedElsewhere
        return UiSession(secret, row["vault_ref"], key, bool(row["read_only"]), row["csrf"])

    def show_once(self, secret: str, text: str) -> None:
        """Keep ``text`` (sealed) for the session's next page, which takes it: a new key is
        shown after the redirect that follows its form, so reloading sends nothing again."""
        self._db.run(
            "UPDATE ui_sessions SET shown_once = ? WHERE digest = ?",
            self._sealer.seal(text),
            _digest(secret),
        )

    def take_shown_once(self, secret: str) -> str | None:
        """Read and cleared in one transaction: two pages (on two replicas) never both get it."""
        digest = _digest(secret)
        with self._db.atomic() as tx:
            row = tx.one("SELECT shown_once FROM ui_sessions WHERE digest = ?", digest)
            if row is None or row["shown_once"] is None:
                return None
            taken = tx.run(  # only the value read: one written meanwhile stays for later
                "UPDATE ui_sessions SET shown_once = NULL WHERE digest = ? AND shown_once = ?",
                digest,
                row["shown_once"],
            )
            if taken != 1:  # another page took it first (it waited for our row lock)
                return None
        return self._sealer.unseal(row["shown_once"])

    def end(self, secret: str) -> None:
        self._db.run("DELETE FROM ui_sessions WHERE digest = ?", _digest(secret))
