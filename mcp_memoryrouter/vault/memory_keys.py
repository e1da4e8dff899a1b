"""Memory keys as use cases: authenticate, mint, list, revoke; and the operator's recovery
path (a new key for an existing vault, named by its public reference).

Revocation deletes the key's row, so the key's next request is 401 wherever it is presented
(nothing here caches a key). "Last used" is written at most once a minute per key.
"""

from __future__ import annotations

from collections.abc import Callable

from mcp_memoryrouter.errors import Conflict, NotFound, Unauthorized
from mcp_memoryrouter.vault.rules.access import (
    TOUCH_EVERY_MS,
    Access,
    hash_key,
    leaves_no_writer,
    looks_like_key,
    missing_key,
    split_mode,
    touch_due,
)
from mcp_memoryrouter.vault.rules.domain import (
    KeyRecord,
    key_prefix,
    new_key_id,
    new_memory_key,
    new_vault_id,
    new_vault_ref,
)
from mcp_memoryrouter.vault.store import Store


class MemoryKeys:
    def __init__(self, store: Store, clock: Callable[[], int]) -> None:
        self._store = store
        self._clock = clock

    def authenticate(self, presented: str | None) -> Access:
        if not presented:
            raise missing_key()
        key, mode = split_mode(presented)
        key_hash = hash_key(key)
        record = self._store.find_key(key_hash) if looks_like_key(key) else None
        if record is None:
            raise Unauthorized("invalid or unknown memory key")
        now = self._clock()
        if touch_due(record.last_used_ms, now):
            self._store.touch_key(record.vault_id, key_hash, now, now - TOUCH_EVERY_MS + 1)
        return Access(
            record.vault_id, record.vault_ref, record.read_only, mode, record.id, record.name
        )

    def create_vault(self, *, name: str = "default", read_only: bool = False) -> tuple[str, str]:
        """Create a vault and its first key: (key, vault reference). The key is shown once."""
        vault_id, ref = new_vault_id(), new_vault_ref()
        self._store.create_vault(vault_id, ref, self._clock())
        key, _ = self._add_key(vault_id, ref, name, read_only)
        return key, ref

    def mint(self, access: Access, name: str | None, read_only: bool) -> tuple[str, KeyRecord]:
        access.require_write()
        access.require_read()
        return self._add_key(access.vault_id, access.vault_ref, name or "New Key", read_only)

    def _add_key(
        self, vault_id: str, ref: str, name: str, read_only: bool
    ) -> tuple[str, KeyRecord]:
        key = new_memory_key()
        record = KeyRecord(
            vault_id, ref, name, read_only, self._clock(), new_key_id(), key_prefix(key)
        )
        self._store.add_key(record, hash_key(key))
        return key, record

    def list_keys(self, access: Access) -> list[KeyRecord]:
        """The vault's keys (never a secret): for a read-write key of the vault."""
        access.require_full()
        return self._store.list_keys(access.vault_id)

    def revoke_key(self, access: Access, key_id: str) -> KeyRecord:
        """Revoke one of the vault's keys (the presenting one too), but never its last
        read-write key: that would leave nobody able to mint, list or revoke."""
        access.require_full()
        keys = self._store.list_keys(access.vault_id)
        record = next((k for k in keys if k.id == key_id), None)
        if record is None:
            raise NotFound("unknown key id", {"key_id": key_id})
        if leaves_no_writer(keys, key_id):
            raise Conflict(
                "this is the vault's last read-write key: mint another first (POST /v1/keys), "
                "or revoke it with `mcp-memoryrouter keys revoke` beside the data",
                {"key_id": key_id},
            )
        self._store.revoke_key(access.vault_id, key_id)
        return record

    # --- for the operator beside the data (the CLI) -----------------------------------

    def vaults(self) -> list[tuple[str, str]]:
        """Every vault as (id, public reference)."""
        return self._store.vaults()

    def vault_keys(self, vault_id: str) -> list[KeyRecord]:
        return self._store.list_keys(vault_id)

    def add_to_vault(self, ref: str, name: str, read_only: bool) -> tuple[str, KeyRecord]:
        """A new key for an existing vault, named by its public reference (recovery)."""
        vault_id = self.vault_id(ref)
        return self._add_key(vault_id, ref, name, read_only)

    def revoke_any(self, key_id: str) -> KeyRecord:
        """Revoke a key of any vault, even its last one (the operator can mint another)."""
        for vault_id, _ in self._store.vaults():
            for record in self._store.list_keys(vault_id):
                if record.id == key_id:
                    self._store.revoke_key(vault_id, key_id)
                    return record
        raise NotFound("unknown key id", {"key_id": key_id})

    def vault_id(self, ref: str) -> str:
        for vault_id, known in self._store.vaults():
            if known == ref:
                return vault_id
        raise NotFound(f"no vault {ref} here", {"vault": ref})
