"""The ``mcp-memoryrouter`` command: serve the vault, manage keys."""

from __future__ import annotations

import json
import sys

import anyio
import click
import uvicorn

from mcp_memoryrouter import __version__
from mcp_memoryrouter.app import ConfigError, create_server, create_stdio_server
from mcp_memoryrouter.auth.scopes import PolicyError
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.errors import StoreUnavailable
from mcp_memoryrouter.vault.app import build_service, migrate_store
from mcp_memoryrouter.vault.store.sqlite_owner import StoreInUse


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mcp-memoryrouter")
def main() -> None:
    """MemoryRouter: a three-tier memory vault for AI assistants.

    Configuration comes from MEMORYROUTER_* environment variables (MEMORYROUTER_DATA_DIR,
    MEMORYROUTER_LEASE_SECONDS, ...) and the flags below.
    """


@main.command()
@click.option("--host", default=None, help="Interface to bind (default 127.0.0.1).")
@click.option("--port", default=None, type=int, help="Port to listen on (default 8787).")
def serve(host: str | None, port: int | None) -> None:
    """Serve the MCP endpoint (/mcp) and the REST API (/v1, /healthz, /openapi.json).

    Data lives in MEMORYROUTER_DATA_DIR. On the first run, a vault is created and its
    memory key is printed once. MEMORYROUTER_API_URL serves /mcp only, proxying to that API.
    """
    settings = Settings()
    if host is not None:
        settings.host = host
    if port is not None:
        settings.port = port
    try:
        server = create_server(settings)
    except (ConfigError, PolicyError, StoreInUse) as exc:
        raise click.ClickException(str(exc)) from exc
    if server.vault_app is not None:
        service = server.vault_app.state.service
        if service.vault_count() == 0:
            key, ref = service.create_vault(name="default")
            click.echo(
                f"Created vault {ref}. Its memory key is shown only now; keep it safe:\n  {key}",
                err=True,
            )
    uvicorn.run(server.app, host=settings.host, port=settings.port, log_level="info")


@main.command()
def stdio() -> None:
    """Serve MCP over stdin/stdout for local clients (Claude desktop).

    The memory key comes from MEMORYROUTER_KEY; the vault is the local one in
    MEMORYROUTER_DATA_DIR, or the API at MEMORYROUTER_API_URL.
    """
    settings = Settings()
    if not settings.key:
        raise click.ClickException("set MEMORYROUTER_KEY to the memory key of your vault")
    try:
        mcp, client = create_stdio_server(settings)
    except (PolicyError, StoreInUse) as exc:
        raise click.ClickException(str(exc)) from exc

    async def run() -> None:
        try:
            await mcp.run_stdio_async()
        finally:
            await client.aclose()

    anyio.run(run)


@main.group()
def keys() -> None:
    """Create memory keys."""


@keys.command("create")
@click.option("--read-only", is_flag=True, help="The key can search and inspect, never write.")
@click.option("--name", default="default", show_default=True, help="A label for the key.")
@click.option("--json", "as_json", is_flag=True, help='Print {"key": ..., "vault": ...}.')
def keys_create(read_only: bool, name: str, as_json: bool) -> None:
    """Create a new vault and print its memory key (shown only once).

    To add a key to an existing vault, call POST /v1/keys with one of its keys.
    """
    service, _ = build_service(Settings(), start_worker=False)
    key, ref = service.create_vault(name=name, read_only=read_only)
    if as_json:
        click.echo(json.dumps({"key": key, "vault": ref}))
    else:
        click.echo(f"vault {ref}\nkey   {key}")
    sys.stdout.flush()


from mcp_memoryrouter.reflect.cli import register as register_reflect_commands  # noqa: E402

register_reflect_commands(main)


@main.command("migrate")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def migrate(as_json: bool) -> None:
    """Create or upgrade the schema of the configured store, then exit.

    The store is MEMORYROUTER_DATABASE_URL (postgresql://... or sqlite:///...) or the SQLite
    vault in MEMORYROUTER_DATA_DIR. Safe to run any number of times, also while servers run:
    migrations already applied are skipped, and on PostgreSQL concurrent runs wait for each
    other. Servers migrate on start too; run this once before rolling out new replicas.
    Exit status 1 when the store cannot be reached.
    """
    try:
        kind, version = migrate_store(Settings())
    except (StoreUnavailable, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps({"store": kind, "schema_version": version}))
    else:
        click.echo(f"{kind} schema at version {version}")
