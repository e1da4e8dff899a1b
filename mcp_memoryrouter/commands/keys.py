"""``keys create | list | revoke``: what each takes, and its help.

They open the store directly, beside the data; the work (the store, the keyring) is in
:mod:`.store`, imported when a command runs, so that ``keys --help`` loads none of it.
"""

from __future__ import annotations

import click

from mcp_memoryrouter.limits import MAX_ID_CHARS


@click.group()
def keys() -> None:
    """Create, list and revoke memory keys, beside the data.

    These commands open the store directly (MEMORYROUTER_DATA_DIR or
    MEMORYROUTER_DATABASE_URL), so whoever can run them there needs no key: this is how a
    lost key is replaced. Over HTTP, a read-write key uses GET/POST /v1/keys and
    DELETE /v1/keys/{id} instead (see docs/keys.md).
    """


@keys.command("create")
@click.option("--read-only", is_flag=True, help="The key can search and inspect, never write.")
@click.option(
    "--name",
    help=f"A label for the key: up to {MAX_ID_CHARS} characters, no control or formatting "
    "characters. Default: 'default' for a new vault's key; with --vault, 'key 2', 'key 3'… "
    "after the vault's keys, never a name one of them has.",
)
@click.option(
    "--vault",
    "vault_ref",
    metavar="VR_REF",
    help="Add the key to this existing vault (its vr_… reference, as status and `keys list` "
    "show it) instead of creating a new vault.",
)
@click.option("--json", "as_json", is_flag=True, help='Print {"key", "vault", "id"}.')
def keys_create(read_only: bool, name: str | None, vault_ref: str | None, as_json: bool) -> None:
    """Print a new memory key (shown only once): of a new vault, or with --vault of an
    existing one (the way back in when its keys are lost)."""
    from mcp_memoryrouter.commands import store  # imported as it runs: it opens the store

    store.create_key(read_only, None if name is None else store.key_name(name), vault_ref, as_json)


@keys.command("list")
@click.option("--vault", "vault_ref", metavar="VR_REF", help="Only this vault's keys.")
@click.option("--json", "as_json", is_flag=True, help="Print the vaults and their keys as JSON.")
def keys_list(vault_ref: str | None, as_json: bool) -> None:
    """List the keys of every vault (or of one): id, name, prefix, mode, created, last used.

    Secrets are never shown: the prefix is a key's first characters, to recognise it."""
    from mcp_memoryrouter.commands import store  # imported as it runs: it opens the store

    store.list_keys(vault_ref, as_json)


@keys.command("revoke")
@click.argument("key_id")
def keys_revoke(key_id: str) -> None:
    """Revoke the key KEY_ID (from `keys list`): its next request is refused (401).

    Revoking a vault's last read-write key is allowed here, with a warning: run
    `keys create --vault VR_REF` to get back in."""
    from mcp_memoryrouter.commands import store  # imported as it runs: it opens the store

    store.revoke_key(key_id)
