"""Persistent state of the embedded authorization server: tables named ``oauth_…`` in its own
SQLite file in the data directory, or in the shared PostgreSQL (``auth/state/database.py``:
the same SQL on both; the tables are made by ``auth/state/migrations``).

Tables: registered clients, pending authorization requests (between /authorize and the
consent), browser sign-in sessions, authorization codes, grants (what a user consented to,
bound to a sealed memory key), refresh tokens, and when each grant last got tokens (the
explorer's list of connected apps). Codes, refresh tokens and session secrets
are stored as SHA-256 digests only; a pending request's id is the digest of the secret its
browser holds in a cookie.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mcp_memoryrouter.auth.state.database import AUTH_MIGRATIONS, Database, PostgresPool, Row

AUTH_DB_FILE = "auth.sqlite3"


Spent = Literal["code", "refresh"]
# Spending a one-time secret: one UPDATE whose row count decides (see the module's doc)
_SPEND: dict[Spent, str] = {
    "code": "UPDATE oauth_codes SET used = 1 WHERE digest = ? AND used = 0",
    "refresh": "UPDATE oauth_refresh_tokens SET used = 1 WHERE digest = ? AND used = 0",
}
_SAVE_REFRESH = "INSERT INTO oauth_refresh_tokens VALUES (?, ?, ?, ?, 0)"
_NOTE_USE = (
    "INSERT INTO oauth_grant_uses VALUES (?, ?) ON CONFLICT (grant_id) DO UPDATE "
    "SET used_at = excluded.used_at"
)


@dataclass(frozen=True)
class Issued:
    """A refresh token issued for a grant (kept by its digest), and when."""

    token: str
    grant_id: str
    scopes: list[str]
    exp: float
    now: float


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class PendingRequest:
    id: str
    client_id: str
    params: dict[str, Any]
    csrf: str
    sealed_key: str | None
    vault_ref: str | None
    allowed: list[str]  # the scopes the signed-in key may grant
    expires_at: float


@dataclass(frozen=True)
class Session:
    """A browser that signed in with a memory key: it is not asked for the key again."""

    vault_ref: str
    sealed_key: str
    allowed: list[str]  # the scopes the key may grant
    expires_at: float


@dataclass(frozen=True)
class Grant:
    id: str
    client_id: str
    vault_ref: str
    sealed_key: str
    scopes: list[str]
    resource: str
    revoked: bool


@dataclass(frozen=True)
class Connection:
    """An app connected to a vault: its grants that can still get tokens, taken together."""

    client_id: str
    client_name: str | None  # as the app registered it (None: a client ID metadata document)
    redirect_uris: tuple[str, ...]
    scopes: tuple[str, ...]  # what its grants allow, together
    connected_at: float  # its first grant
    last_used_at: float  # when it last got tokens (else when it was connected)


@dataclass(frozen=True)
class CodeRow:
    grant: Grant
    redirect_uri: str
    explicit: bool
    code_challenge: str
    expires_at: float
    used: bool


@dataclass(frozen=True)
class RefreshRow:
    grant: Grant
    scopes: list[str]
    expires_at: float
    used: bool


class AuthStore:
    """Every method is one statement (or a few independent ones), so replicas sharing the
    PostgreSQL tables need no coordination beyond the database's own row locks."""

    def __init__(self, db: Database, close: Callable[[], None] = lambda: None) -> None:
        self._db = db
        self._close = close

    @classmethod
    def sqlite(cls, path: Path) -> AuthStore:
        """The tables in a file of their own, migrated."""
        db = Database.sqlite(path, AUTH_MIGRATIONS)
        return cls(db, db.close)

    @classmethod
    def postgres(cls, pool: PostgresPool) -> AuthStore:
        """The tables in the shared database, migrated; the pool stays its owner's to
        close."""
        return cls(pool.database(AUTH_MIGRATIONS))

    def close(self) -> None:
        self._close()

    @property
    def remote(self) -> bool:
        """Whether calls wait on another machine: run them with ``off_loop``."""
        return self._db.remote

    def _one(self, sql: str, *args: Any) -> Row | None:
        return self._db.one(sql, *args)

    def _run(self, sql: str, *args: Any) -> int:
        return self._db.run(sql, *args)

    # clients ------------------------------------------------------------------------------

    def save_client(self, client_id: str, info: dict[str, Any], now: float) -> None:
        self._run(
            "INSERT INTO oauth_clients VALUES (?, ?, ?) ON CONFLICT (client_id) DO UPDATE "
            "SET info = excluded.info, created_at = excluded.created_at",
            client_id,
            json.dumps(info),
            now,
        )

    def client(self, client_id: str) -> dict[str, Any] | None:
        row = self._one("SELECT info FROM oauth_clients WHERE client_id = ?", client_id)
        return None if row is None else dict(json.loads(row["info"]))

    def forget_unused_clients(self, registered_before: float) -> None:
        """Delete registrations older than this that no grant was ever made for."""
        self._run(
            "DELETE FROM oauth_clients WHERE created_at <= ? AND NOT EXISTS "
            "(SELECT 1 FROM oauth_grants WHERE oauth_grants.client_id = oauth_clients.client_id)",
            registered_before,
        )

    def delete_client(self, client_id: str) -> None:
        self._run("DELETE FROM oauth_clients WHERE client_id = ?", client_id)
        self._run("UPDATE oauth_grants SET revoked = 1 WHERE client_id = ?", client_id)

    # pending authorization requests -------------------------------------------------------

    def save_request(self, request: PendingRequest) -> None:
        self._run(
            "INSERT INTO oauth_requests VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE "
            "SET client_id = excluded.client_id, params = excluded.params, csrf = excluded.csrf, "
            "sealed_key = excluded.sealed_key, vault_ref = excluded.vault_ref, "
            "allowed = excluded.allowed, expires_at = excluded.expires_at",
            request.id,
            request.client_id,
            json.dumps(request.params),
            request.csrf,
            request.sealed_key,
            request.vault_ref,
            json.dumps(request.allowed),
            request.expires_at,
        )

    def request(self, request_id: str, now: float) -> PendingRequest | None:
        row = self._one(
            "SELECT * FROM oauth_requests WHERE id = ? AND expires_at > ?", request_id, now
        )
        if row is None:
            return None
        return PendingRequest(
            row["id"],
            row["client_id"],
            json.loads(row["params"]),
            row["csrf"],
            row["sealed_key"],
            row["vault_ref"],
            json.loads(row["allowed"] or "[]"),
            row["expires_at"],
        )

    def delete_request(self, request_id: str, now: float) -> None:
        self._run("DELETE FROM oauth_requests WHERE id = ? OR expires_at <= ?", request_id, now)

    def sweep(self, now: float) -> None:
        """Forget what can no longer be used: expired requests, codes and refresh tokens."""
        self._run("DELETE FROM oauth_requests WHERE expires_at <= ?", now)
        self._run("DELETE FROM oauth_codes WHERE expires_at <= ?", now)
        self._run("DELETE FROM oauth_refresh_tokens WHERE expires_at <= ?", now)
        self._run("DELETE FROM oauth_sessions WHERE expires_at <= ?", now)
        self._run("DELETE FROM oauth_oidc_logins WHERE expires_at <= ?", now)

    # browser sessions ---------------------------------------------------------------------

    def save_session(self, secret: str, session: Session) -> None:
        self._run(
            "INSERT INTO oauth_sessions VALUES (?, ?, ?, ?, ?) ON CONFLICT (digest) DO UPDATE "
            "SET vault_ref = excluded.vault_ref, sealed_key = excluded.sealed_key, "
            "allowed = excluded.allowed, expires_at = excluded.expires_at",
            digest(secret),
            session.vault_ref,
            session.sealed_key,
            json.dumps(session.allowed),
            session.expires_at,
        )

    def session(self, secret: str, now: float) -> Session | None:
        row = self._one(
            "SELECT * FROM oauth_sessions WHERE digest = ? AND expires_at > ?", digest(secret), now
        )
        if row is None:
            return None
        return Session(
            row["vault_ref"], row["sealed_key"], json.loads(row["allowed"]), row["expires_at"]
        )

    def end_session(self, secret: str) -> None:
        self._run("DELETE FROM oauth_sessions WHERE digest = ?", digest(secret))

    # grants, codes, refresh tokens --------------------------------------------------------

    def save_grant(self, grant: Grant, now: float) -> None:
        self._run(
            "INSERT INTO oauth_grants VALUES (?, ?, ?, ?, ?, ?, ?, 0)",
            grant.id,
            grant.client_id,
            grant.vault_ref,
            grant.sealed_key,
            " ".join(grant.scopes),
            grant.resource,
            now,
        )

    def grant(self, grant_id: str) -> Grant | None:
        row = self._one("SELECT * FROM oauth_grants WHERE id = ?", grant_id)
        return None if row is None else _grant(row)

    def granted(self, client_id: str, vault_ref: str) -> set[str]:
        """Every scope a grant not revoked gives ``client_id`` in ``vault_ref``: what the
        person allowed this app before (a step-up asks for more)."""
        rows = self._db.all(
            "SELECT scopes FROM oauth_grants WHERE client_id = ? AND vault_ref = ? AND revoked = 0",
            client_id,
            vault_ref,
        )
        return {scope for row in rows for scope in str(row["scopes"]).split()}

    def revoke_grant(self, grant_id: str) -> None:
        """Revoke a grant and with it every token issued from it (the refresh-token family)."""
        self._run("UPDATE oauth_grants SET revoked = 1 WHERE id = ?", grant_id)

    def note_use(self, grant_id: str, now: float) -> None:
        """The grant got tokens (a code exchanged, a refresh): its app was in use now."""
        self._run(_NOTE_USE, grant_id, now)

    def connections(self, vault_ref: str, now: float) -> list[Connection]:
        """The apps connected to this vault, and to no other: each client whose unrevoked
        grants of this vault can still get tokens (an unused code or refresh token left),
        oldest connection first."""
        rows = self._db.all(
            "SELECT g.client_id, g.scopes, g.created_at, u.used_at, c.info FROM oauth_grants g "
            "LEFT JOIN oauth_grant_uses u ON u.grant_id = g.id "
            "LEFT JOIN oauth_clients c ON c.client_id = g.client_id "
            "WHERE g.vault_ref = ? AND g.revoked = 0 AND ("
            "EXISTS (SELECT 1 FROM oauth_refresh_tokens r WHERE r.grant_id = g.id "
            "AND r.used = 0 AND r.expires_at > ?) OR "
            "EXISTS (SELECT 1 FROM oauth_codes k WHERE k.grant_id = g.id "
            "AND k.used = 0 AND k.expires_at > ?)) ORDER BY g.created_at",
            vault_ref,
            now,
            now,
        )
        by_client: dict[str, Connection] = {}
        for row in rows:
            by_client[row["client_id"]] = _joined(by_client.get(row["client_id"]), row)
        return list(by_client.values())

    def disconnect(self, vault_ref: str, client_id: str) -> int:
        """Revoke every grant this client holds on this vault (and only on it): its tokens
        stop at their next use. How many grants were revoked."""
        return self._run(
            "UPDATE oauth_grants SET revoked = 1 WHERE vault_ref = ? AND client_id = ? "
            "AND revoked = 0",
            vault_ref,
            client_id,
        )

    def save_code(
        self,
        code: str,
        grant_id: str,
        redirect_uri: str,
        explicit: bool,
        challenge: str,
        exp: float,
    ) -> None:
        self._run(
            "INSERT INTO oauth_codes VALUES (?, ?, ?, ?, ?, ?, 0)",
            digest(code),
            grant_id,
            redirect_uri,
            int(explicit),
            challenge,
            exp,
        )

    def code(self, code: str) -> CodeRow | None:
        row = self._one(
            "SELECT c.redirect_uri, c.explicit, c.code_challenge, c.expires_at AS code_exp, "
            "c.used, g.* FROM oauth_codes c JOIN oauth_grants g ON g.id = c.grant_id "
            "WHERE c.digest = ?",
            digest(code),
        )
        if row is None:
            return None
        return CodeRow(
            _grant(row),
            row["redirect_uri"],
            bool(row["explicit"]),
            row["code_challenge"],
            row["code_exp"],
            bool(row["used"]),
        )

    def use_code(self, code: str) -> bool:
        """Mark a code used; False when it already was (a replay)."""
        return self._run(_SPEND["code"], digest(code)) == 1

    def save_refresh(self, token: str, grant_id: str, scopes: list[str], exp: float) -> None:
        self._run(_SAVE_REFRESH, digest(token), grant_id, " ".join(scopes), exp)

    def spend_for(self, spent: Spent, secret: str, issued: Issued) -> bool:
        """Spend a code or a refresh token and keep the refresh token issued for it, in one
        transaction: a database that fails between the two leaves the old one unspent (the
        client tries it again), never spent with nothing kept in its place, which the retry
        would take for a reuse and revoke the grant. False when it was spent already."""
        with self._db.atomic() as tx:
            if tx.run(_SPEND[spent], digest(secret)) != 1:
                return False
            scopes = " ".join(issued.scopes)
            tx.run(_SAVE_REFRESH, digest(issued.token), issued.grant_id, scopes, issued.exp)
            tx.run(_NOTE_USE, issued.grant_id, issued.now)
        return True

    def refresh(self, token: str) -> RefreshRow | None:
        row = self._one(
            "SELECT r.scopes AS token_scopes, r.expires_at AS token_exp, r.used, g.* "
            "FROM oauth_refresh_tokens r JOIN oauth_grants g ON g.id = r.grant_id "
            "WHERE r.digest = ?",
            digest(token),
        )
        if row is None:
            return None
        return RefreshRow(
            _grant(row), row["token_scopes"].split(), row["token_exp"], bool(row["used"])
        )

    def use_refresh(self, token: str) -> bool:
        """Mark a refresh token used (rotation); False when it already was (a reuse)."""
        return self._run(_SPEND["refresh"], digest(token)) == 1

    # sign-in with an identity provider -----------------------------------------------------

    def save_oidc_login(self, state: str, login: OidcLogin) -> None:
        self._run(
            "INSERT INTO oauth_oidc_logins VALUES (?, ?, ?, ?, ?)",
            digest(state),
            login.request_id,
            login.nonce,
            login.verifier,
            login.expires_at,
        )

    def take_oidc_login(self, state: str, now: float) -> OidcLogin | None:
        """The sign-in this ``state`` names, once: a second callback with it finds nothing."""
        key = digest(state)
        with self._db.atomic() as tx:
            row = tx.one("SELECT * FROM oauth_oidc_logins WHERE state = ?", key)
            if row is None or tx.run("DELETE FROM oauth_oidc_logins WHERE state = ?", key) != 1:
                return None
        if row["expires_at"] <= now:
            return None
        return OidcLogin(row["request_id"], row["nonce"], row["verifier"], row["expires_at"])

    def identity(self, issuer: str, subject: str) -> IdentityRow | None:
        row = self._one(
            "SELECT vault_ref, sealed_key FROM oauth_identities WHERE issuer = ? AND subject = ?",
            issuer,
            subject,
        )
        return None if row is None else IdentityRow(row["vault_ref"], row["sealed_key"])

    def save_identity(
        self,
        issuer: str,
        subject: str,
        found: IdentityRow,
        email: str | None,
        now: float,
    ) -> IdentityRow:
        """Bind the person to their vault; when two first sign-ins race (two replicas), the
        first binding stands and is the one answered."""
        self._run(
            "INSERT INTO oauth_identities VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (issuer, subject) DO NOTHING",
            issuer,
            subject,
            found.vault_ref,
            found.sealed_key,
            email,
            now,
        )
        stored = self.identity(issuer, subject)
        assert stored is not None
        return stored


@dataclass(frozen=True)
class OidcLogin:
    """A sign-in sent to the identity provider: the pending request it is for, and the
    nonce and PKCE verifier it must come back with."""

    request_id: str
    nonce: str
    verifier: str
    expires_at: float


@dataclass(frozen=True)
class IdentityRow:
    vault_ref: str
    sealed_key: str  # the key of the vault made for this person at their first sign-in


def _joined(known: Connection | None, row: Row) -> Connection:
    """``known`` (the client's connection so far) with one more of its grants."""
    used = row["used_at"] or row["created_at"]
    scopes = tuple(row["scopes"].split())
    if known is not None:
        return Connection(
            known.client_id,
            known.client_name,
            known.redirect_uris,
            tuple(dict.fromkeys([*known.scopes, *scopes])),
            known.connected_at,
            max(known.last_used_at, used),
        )
    info = json.loads(row["info"]) if row["info"] else {}
    name = info.get("client_name")
    return Connection(
        row["client_id"],
        name if isinstance(name, str) else None,
        tuple(str(uri) for uri in info.get("redirect_uris") or ()),
        scopes,
        row["created_at"],
        used,
    )


def _grant(row: Row) -> Grant:
    return Grant(
        row["id"],
        row["client_id"],
        row["vault_ref"],
        row["sealed_key"],
        row["scopes"].split(),
        row["resource"],
        bool(row["revoked"]),
    )
