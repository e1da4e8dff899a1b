"""What the explorer and the authorization server's sign-in hand each other when people
sign in with an identity provider: the explorer offers the providers, and a sign-in made for
it comes back as the person's vault and key."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.responses import Response


@dataclass(frozen=True)
class IdentitySignedIn:
    """A person the provider signed in for the explorer: their vault and its key."""

    vault_ref: str
    key: str
    read_only: bool
    next_path: str


@dataclass(frozen=True)
class ExplorerIdentity:
    """What the explorer's sign-in page offers: each provider's key and name, and the start
    of a sign-in with one of them (by key) that comes back to ``next_path``."""

    providers: tuple[tuple[str, str], ...]
    start: Callable[[str, str], Awaitable[Response]]
