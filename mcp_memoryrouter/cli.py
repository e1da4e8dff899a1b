"""The ``mcp-memoryrouter`` command: serve the vault, manage keys."""

from __future__ import annotations

import json
import sys

import click
import uvicorn

from mcp_memoryrouter import __version__
from mcp_memoryrouter.app import create_app
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.vault.app import build_service


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
    """Serve the REST API (/v1, /healthz, /openapi.json).

    Data lives in MEMORYROUTER_DATA_DIR. On the first run, a vault is created and its
    memory key is printed once.
    """
    settings = Settings()
    if host is not None:
        settings.host = host
    if port is not None:
        settings.port = port
    app = create_app(settings)
    service = app.state.service
    if app.state.store_kind == "sqlite" and service.vault_count() == 0:
        key, ref = service.create_vault(name="default")
        click.echo(
            f"Created vault {ref}. Its memory key is shown only now; keep it safe:\n  {key}",
            err=True,
        )
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="info")


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
    service, _ = build_service(Settings())
    key, ref = service.create_vault(name=name, read_only=read_only)
    if as_json:
        click.echo(json.dumps({"key": key, "vault": ref}))
    else:
        click.echo(f"vault {ref}\nkey   {key}")
    sys.stdout.flush()
