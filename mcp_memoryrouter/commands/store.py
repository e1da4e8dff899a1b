"""What ``keys create | list | revoke`` and ``migrate`` do: the configured store, opened in
this process beside the data. Their options and help are in :mod:`.keys` and the package."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

import click

from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.errors import NotFound, StartupError, StoreUnavailable
from mcp_memoryrouter.limits import MAX_ID_CHARS
from mcp_memoryrouter.schemas import hidden
from mcp_memoryrouter.vault.app import build_service, migrate_store
from mcp_memoryrouter.vault.http import render
from mcp_memoryrouter.vault.memory_keys import MemoryKeys
from mcp_memoryrouter.vault.service import VaultService


def _keyring() -> tuple[VaultService, MemoryKeys]:
    try:
        service, _ = build_service(Settings(), start_worker=False)
    except (StoreUnavailable, StartupError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    return service, service.keys


def key_name(name: str) -> str:
    """The name ``keys create`` gives a key: the rule ``POST /v1/keys`` applies."""
    problem = next((f"U+{ord(c):04X}" for c in name if hidden(c)), None)
    if problem is not None:
        raise click.BadParameter(
            f"holds {problem}, a control or formatting character (a terminal would act on "
            "it when the name is listed): use letters, digits, spaces and punctuation",
            param_hint="'--name'",
        )
    if not 1 <= len(name) <= MAX_ID_CHARS:
        raise click.BadParameter(
            f"give a name of 1 to {MAX_ID_CHARS} characters", param_hint="'--name'"
        )
    return name


def visible(text: str) -> str:
    """``text`` for a terminal: each control or formatting character shown as <U+001B>, never
    sent raw (names stored before they were checked may hold escape sequences)."""
    return "".join(f"<U+{ord(c):04X}>" if hidden(c) else c for c in text)


def create_key(read_only: bool, name: str | None, vault_ref: str | None, as_json: bool) -> None:
    """A key of a new vault (named ``default`` unless ``name``), or of the vault
    ``vault_ref`` (named after its keys unless ``name``: :func:`next_key_name`)."""
    service, keyring = _keyring()
    try:
        if vault_ref is None:
            key, ref = keyring.create_vault(name=name or "default", read_only=read_only)
            key_id = keyring.vault_keys(keyring.vault_id(ref))[0].id
        else:
            if name is None:
                held = keyring.vault_keys(keyring.vault_id(vault_ref))
                name = next_key_name([k.name for k in held])
            key, record = keyring.add_to_vault(vault_ref, name, read_only)
            ref, key_id = record.vault_ref, record.id
    except NotFound as exc:
        raise click.ClickException(
            f"{exc.message}: `mcp-memoryrouter keys list` shows them"
        ) from exc
    finally:
        service.close()
    if as_json:
        click.echo(json.dumps({"key": key, "vault": ref, "id": key_id}))
    else:
        click.echo(f"vault {ref}\nkey   {key}\nid    {key_id}")
    sys.stdout.flush()


def next_key_name(names: Sequence[str]) -> str:
    """``key N``, N one past the number of keys the vault holds, raised past any name one
    of them already has: a key added without a name is told apart in ``keys list``."""
    number = len(names) + 1
    while f"key {number}" in names:
        number += 1
    return f"key {number}"


def list_keys(vault_ref: str | None, as_json: bool) -> None:
    service, keyring = _keyring()
    try:
        vaults = keyring.vaults()
        if vault_ref is not None:
            vaults = [(vault_id, ref) for vault_id, ref in vaults if ref == vault_ref]
            if not vaults:
                raise click.ClickException(f"no vault {vault_ref} here")
        listed = [(ref, [render.key(k) for k in keyring.vault_keys(v)]) for v, ref in vaults]
    finally:
        service.close()
    if as_json:
        body = [{"vault": ref, "keys": [k.model_dump() for k in ks]} for ref, ks in listed]
        click.echo(json.dumps({"vaults": body}))
        return
    for ref, ks in listed:
        click.echo(f"vault {ref}")
        for k in ks:
            mode = "read-only" if k.read_only else "read-write"
            click.echo(
                f"  {k.id}  {k.prefix or '?':<8}…  {mode:<10}  created {k.created_at}  "
                f"last used {k.last_used_at or 'never'}  {visible(k.name)}"
            )


def revoke_key(key_id: str) -> None:
    service, keyring = _keyring()
    try:
        record = keyring.revoke_any(key_id)
        left = keyring.vault_keys(keyring.vault_id(record.vault_ref))
    except NotFound as exc:
        raise click.ClickException(f"no key {key_id} here: `mcp-memoryrouter keys list`") from exc
    finally:
        service.close()
    click.echo(f"revoked {record.id} ({visible(record.name)}) of vault {record.vault_ref}")
    if not any(not k.read_only for k in left):
        click.echo(
            f"warning: vault {record.vault_ref} has no read-write key left; make one with "
            f"`mcp-memoryrouter keys create --vault {record.vault_ref}`",
            err=True,
        )


STATE_NAMES = {"oauth": "authorization server", "ui": "explorer"}


def migrate(as_json: bool) -> None:
    from mcp_memoryrouter.app import migrate_state  # the state's parts, as the server has them

    settings = Settings()
    try:
        kind, version = migrate_store(settings)
        state = migrate_state(settings)
    except (StoreUnavailable, StartupError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps({"store": kind, "schema_version": version, "state": state}))
        return
    click.echo(f"{kind} schema at version {version}")
    for name, at in state.items():
        click.echo(f"{STATE_NAMES[name]} tables at version {at}")
