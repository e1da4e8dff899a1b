"""The state the authorization server and the explorer keep beside the vault: the two
databases (SQLite files or the shared PostgreSQL), the authorization server's store, the
sealing of keys at rest and the secrets kept in the data directory.

The entry is :class:`State` (the pool and the sealing key both sides share), with
:func:`request_state_key` for what the MCP server seals between the rounds of a call."""

from __future__ import annotations

import base64
import secrets
from pathlib import Path

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from mcp_memoryrouter.auth.state.database import PostgresPool
from mcp_memoryrouter.auth.state.keyfiles import read_or_create
from mcp_memoryrouter.auth.state.sealing import Sealer
from mcp_memoryrouter.errors import ConfigError

__all__ = ["REQUEST_STATE_KEY_FILE", "State", "request_state_key"]

REQUEST_STATE_KEY_FILE = "mcp-request-state.key"
# Domain separation: the derived key is never the sealing key, nor usable as it.
_REQUEST_STATE_INFO = b"mcp-memoryrouter mcp request state v1"


class State:
    """What the authorization server and the explorer keep beyond the vault: the sealing key
    (a value or a file replicas share, else the data directory's), and on PostgreSQL a small
    pool to the database their tables live in (else SQLite files in the data directory)."""

    def __init__(
        self, data_dir: Path, *, pool: PostgresPool | None = None, shared_key: bytes | None = None
    ) -> None:
        self.data_dir = data_dir
        self.pool = pool
        self._shared_key = shared_key
        self._sealer: Sealer | None = None

    @classmethod
    def open(
        cls,
        data_dir: Path,
        *,
        database_url: str | None = None,
        sealing_key: str | None = None,
        sealing_key_file: Path | None = None,
    ) -> State:
        """``database_url``: the PostgreSQL the state lives in (None: SQLite files)."""
        shared = shared_sealing_key(sealing_key, sealing_key_file)
        pool = None if database_url is None else PostgresPool(database_url)
        return cls(data_dir, pool=pool, shared_key=shared)

    @property
    def sealer(self) -> Sealer:
        """Read (or made in the data directory) when first needed, by the authorization
        server or the explorer only."""
        if self._sealer is None:
            shared = self._shared_key
            self._sealer = Sealer.in_dir(self.data_dir) if shared is None else Sealer(shared)
        return self._sealer

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()


def shared_sealing_key(value: str | None, file: Path | None) -> bytes | None:
    """The sealing key every replica is given (MEMORYROUTER_SEALING_KEY, or the file
    MEMORYROUTER_SEALING_KEY_FILE names), checked; None when neither is set."""
    if value:
        key, where = value.strip().encode(), "MEMORYROUTER_SEALING_KEY"
    elif file:
        try:
            key = file.read_bytes().strip()
        except OSError as exc:
            raise ConfigError(
                f"MEMORYROUTER_SEALING_KEY_FILE {file}: not a readable Fernet key ({exc})"
            ) from exc
        where = f"MEMORYROUTER_SEALING_KEY_FILE {file}"
    else:
        return None
    try:
        Sealer(key)
    except ValueError as exc:
        raise ConfigError(
            f"{where} is not a Fernet key (32 url-safe base64-encoded bytes)"
        ) from exc
    return key


def request_state_key(
    data_dir: Path, *, sealing_key: str | None = None, sealing_key_file: Path | None = None
) -> bytes:
    """The key sealing what a multi-round MCP call keeps between rounds: derived from the
    sealing key replicas share when one is given (so any replica carries any round, with no
    second secret to distribute), else kept in the data directory (0600). Either way a
    restart keeps calls in flight going."""
    shared = shared_sealing_key(sealing_key, sealing_key_file)
    if shared is not None:
        derived = HKDF(hashes.SHA256(), 32, salt=None, info=_REQUEST_STATE_INFO).derive(shared)
        return base64.urlsafe_b64encode(derived)
    return read_or_create(data_dir / REQUEST_STATE_KEY_FILE, _new_secret).strip()


def _new_secret() -> bytes:
    return secrets.token_urlsafe(32).encode()
