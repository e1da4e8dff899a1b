"""The memory key a grant is bound to, encrypted at rest (Fernet: AES-128-CBC + HMAC-SHA256)."""

from __future__ import annotations

from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

from mcp_memoryrouter.auth.state.keyfiles import read_or_create

SEALING_KEY_FILE = "oauth-sealing.key"


class SealedElsewhere(RuntimeError):
    """Something this server must open was sealed under another sealing key: the replicas
    do not share one (a server error to fix, never a reason to revoke or delete)."""

    def __init__(self) -> None:
        super().__init__(
            "a stored secret was sealed under another sealing key: give every replica the "
            "same MEMORYROUTER_SEALING_KEY_FILE (or MEMORYROUTER_SEALING_KEY)"
        )


class Sealer:
    def __init__(self, key: bytes) -> None:
        self._fernet = Fernet(key)

    @classmethod
    def in_dir(cls, data_dir: Path) -> Sealer:
        return cls(read_or_create(data_dir / SEALING_KEY_FILE, Fernet.generate_key).strip())

    def seal(self, secret: str) -> str:
        return self._fernet.encrypt(secret.encode()).decode()

    def unseal(self, sealed: str) -> str | None:
        """The secret, or None when ``sealed`` was not made with this key."""
        try:
            return self._fernet.decrypt(sealed.encode()).decode()
        except InvalidToken:
            return None
