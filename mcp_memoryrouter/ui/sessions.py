"""The explorer's server-side sessions, in their own SQLite file in the data directory (0600).

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
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

from mcp_memoryrouter.auth.sealing import Sealer
from mcp_memoryrouter.private import new_private_dir, private_database

UI_DB_FILE = "ui.sqlite3"
IDLE_SECONDS = 8 * 3600
LIFETIME_SECONDS = 7 * 86_400
# last_seen is written at most this often, so reading pages is not a write per request
TOUCH_SECONDS = 60

SCHEMA = """
CREATE TABLE IF NOT EXISTS ui_sessions (
    digest TEXT PRIMARY KEY,
    vault_ref TEXT NOT NULL,
    sealed_key TEXT NOT NULL,
    read_only INTEGER NOT NULL,
    csrf TEXT NOT NULL,
    created_at REAL NOT NULL,
    last_seen REAL NOT NULL,
    shown_once TEXT
);
"""


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
    """One connection behind a lock: sign-ins are rare and rows are tiny."""

    def __init__(self, path: Path, sealer: Sealer) -> None:
        new_private_dir(path.parent)
        private_database(path)  # before connecting: the WAL takes the file's mode
        self._sealer = sealer
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(SCHEMA)

    @classmethod
    def in_dir(cls, data_dir: Path) -> UiSessions:
        return cls(data_dir / UI_DB_FILE, Sealer.in_dir(data_dir))

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def start(self, vault_ref: str, key: str, read_only: bool, now: float) -> UiSession:
        secret, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        with self._lock:
            self._db.execute(
                "DELETE FROM ui_sessions WHERE last_seen <= ? OR created_at <= ?",
                (now - IDLE_SECONDS, now - LIFETIME_SECONDS),
            )
            self._db.execute(
                "INSERT INTO ui_sessions (digest, vault_ref, sealed_key, read_only, csrf, "
                "created_at, last_seen) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    _digest(secret),
                    vault_ref,
                    self._sealer.seal(key),
                    int(read_only),
                    csrf,
                    now,
                    now,
                ),
            )
        return UiSession(secret, vault_ref, key, read_only, csrf)

    def find(self, secret: str, now: float) -> UiSession | None:
        """The live session this secret opens (its idle clock restarted), else None."""
        digest = _digest(secret)
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM ui_sessions WHERE digest = ?", (digest,)
            ).fetchone()
            if row is None:
                return None
            if (
                row["last_seen"] <= now - IDLE_SECONDS
                or row["created_at"] <= now - LIFETIME_SECONDS
            ):
                self._db.execute("DELETE FROM ui_sessions WHERE digest = ?", (digest,))
                return None
            if now - row["last_seen"] >= TOUCH_SECONDS:
                self._db.execute(
                    "UPDATE ui_sessions SET last_seen = ? WHERE digest = ?", (now, digest)
                )
        key = self._sealer.unseal(row["sealed_key"])
        if key is None:  # sealed under a key this server no longer has
            self.end(secret)
            return None
        return UiSession(secret, row["vault_ref"], key, bool(row["read_only"]), row["csrf"])

    def show_once(self, secret: str, text: str) -> None:
        """Keep ``text`` (sealed) for the session's next page, which takes it: a new key is
        shown after the redirect that follows its form, so reloading sends nothing again."""
        with self._lock:
            self._db.execute(
                "UPDATE ui_sessions SET shown_once = ? WHERE digest = ?",
                (self._sealer.seal(text), _digest(secret)),
            )

    def take_shown_once(self, secret: str) -> str | None:
        digest = _digest(secret)
        with self._lock:
            row = self._db.execute(
                "SELECT shown_once FROM ui_sessions WHERE digest = ?", (digest,)
            ).fetchone()
            if row is None or row["shown_once"] is None:
                return None
            self._db.execute("UPDATE ui_sessions SET shown_once = NULL WHERE digest = ?", (digest,))
        return self._sealer.unseal(row["shown_once"])

    def end(self, secret: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM ui_sessions WHERE digest = ?", (_digest(secret),))
