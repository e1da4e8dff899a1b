"""Memory keys: hashed at rest, with an optional mode suffix that narrows what they do.

``mk_…:read`` retrieves but never stores, ``mk_…:write`` stores but never retrieves,
``mk_…:off`` does neither. The suffix is stripped before lookup.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from mcp_memoryrouter.abilities import abilities
from mcp_memoryrouter.errors import Forbidden, Unauthorized
from mcp_memoryrouter.vault.rules.domain import KeyRecord, WriteMode, Writer

Mode = Literal["full", "read", "write", "off"]
_SUFFIXES: dict[str, Mode] = {"read": "read", "write": "write", "off": "off"}


TOUCH_EVERY_MS = 60_000  # "last used" moves at most once a minute per key, not on every request


def hash_key(key: str) -> str:
    """Keys carry ~256 random bits, so one SHA-256 is enough to make the stored form useless."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def split_mode(presented: str) -> tuple[str, Mode]:
    key, sep, suffix = presented.strip().rpartition(":")
    if sep and suffix in _SUFFIXES:
        return key, _SUFFIXES[suffix]
    return presented.strip(), "full"


def looks_like_key(key: str) -> bool:
    return key.startswith(("mk_", "mk-")) and 20 <= len(key) <= 200 and key.isascii()


@dataclass(frozen=True)
class Access:
    """What one request may do in one vault."""

    vault_id: str
    vault_ref: str
    read_only: bool
    mode: Mode
    key_id: str = ""  # the public id of the presented key
    key_name: str | None = None  # its name
    # the surface the call came through and the client it names (the caller's labels,
    # checked against schemas.SURFACES at the door; docs/api.md)
    surface: str = "rest"
    client: str | None = None

    @property
    def can_read(self) -> bool:
        return abilities(self.read_only, self.mode).reads

    @property
    def can_write(self) -> bool:
        return abilities(self.read_only, self.mode).writes

    def require_read(self) -> None:
        if not self.can_read:
            raise Forbidden(f"this key's mode ({self.mode}) does not allow retrieval")

    def require_write(self) -> None:
        if self.read_only:
            raise Forbidden("read-only keys cannot write to the vault")
        if not self.can_write:
            raise Forbidden(f"this key's mode ({self.mode}) does not allow writes")

    @property
    def writer(self) -> Writer:
        """Who stores what this request writes, as the memories record it."""
        mode: WriteMode = "write" if self.mode == "write" else "full"
        return Writer(self.key_id, mode, self.key_name, self.surface, self.client)

    def require_full(self) -> None:
        """Checkout returns texts and leads to writes: it needs both."""
        self.require_write()
        self.require_read()


def missing_key() -> Unauthorized:
    return Unauthorized(
        "missing memory key: send it as X-Memory-Key, Authorization: Bearer, or x-api-key"
    )


def touch_due(last_used_ms: int | None, now_ms: int) -> bool:
    """Whether a request at ``now_ms`` should record itself as the key's last use."""
    return last_used_ms is None or now_ms - last_used_ms >= TOUCH_EVERY_MS


def leaves_no_writer(keys: Sequence[KeyRecord], key_id: str) -> bool:
    """Whether revoking ``key_id`` would leave the vault without a read-write key (and so
    without any key that can mint another, list or revoke)."""
    writers = [k for k in keys if not k.read_only]
    return [k.id for k in writers] == [key_id]
