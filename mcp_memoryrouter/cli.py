"""``mcp-memoryrouter serve`` and ``stdio``: the server's composition root.

The command group and the commands that serve nothing are in :mod:`commands`, which loads
this module (and so the whole app) only when ``serve`` or ``stdio`` is asked for; ``main``
is importable from here too, with every command on it.
"""

from __future__ import annotations

import sys

import anyio
import click
from mcp.server import MCPServer
from pydantic import ValidationError

from mcp_memoryrouter import __version__, allocator
from mcp_memoryrouter.accesslog import keep_secrets_out_of_the_access_log
from mcp_memoryrouter.app import create_server, create_stdio_server
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.commands import main as main  # serve and stdio join it; tests use it
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.edge import connections
from mcp_memoryrouter.edge.addresses import is_loopback
from mcp_memoryrouter.errors import MemoryRouterError, StartupError, Unauthorized
from mcp_memoryrouter.startup import (
    Listening,
    announce_serving,
    banner,
    keep_first_key,
    serving_url,
    stdio_command,
    withdraw_serving,
)
from mcp_memoryrouter.vault.app import ranking
from mcp_memoryrouter.vault.rules.access import looks_like_key, split_mode
from mcp_memoryrouter.vault.store.sqlite.owner import StoreInUse


@main.command()
@click.option("--host", default=None, help="Interface to bind (default 127.0.0.1).")
@click.option("--port", default=None, type=int, help="Port to listen on (default 8787).")
def serve(host: str | None, port: int | None) -> None:
    """Serve the MCP endpoint (/mcp) and the REST API (/v1, /healthz, /openapi.json).

    Data lives in MEMORYROUTER_DATA_DIR. On the first run, a vault is created: its memory
    key is shown once on a terminal, or, when the output is not a terminal (a service
    manager's log), written to first-run.key (mode 0600) in the data directory. At start it
    prints the URLs and how to connect each client. MEMORYROUTER_API_URL serves /mcp only,
    proxying to that API.

    Behind a reverse proxy, name it in MEMORYROUTER_TRUSTED_PROXIES so per-address limits
    see the client; a server without keys (MEMORYROUTER_AUTH=none) refuses whatever a proxy
    relays. A connection has MEMORYROUTER_HEAD_TIMEOUT_SECONDS to send a request head and
    MEMORYROUTER_BODY_TIMEOUT_SECONDS for its body; MEMORYROUTER_MAX_CONNECTIONS are open
    at once (docs/security.md, "The edge").
    """
    try:
        settings = Settings()
    except ValidationError as exc:
        raise click.ClickException(settings_problem(exc)) from exc
    if host is not None:
        settings.host = host
    if port is not None:
        settings.port = port
    allocator.settle()  # two malloc arenas, free memory given back (allocator.py)
    try:
        server = create_server(settings)
    except StartupError as exc:
        raise click.ClickException(str(exc)) from exc
    first = None
    service = server.service
    if service is not None and service.vault_count() == 0:
        key, ref = service.create_vault(name="default")
        first = keep_first_key(ref, key, settings.data_dir, terminal=sys.stderr.isatty())
    data_dir = None if settings.api_url else settings.data_dir
    where = Listening(
        settings.base_url,
        data_dir,
        stdio_command(),
        explorer=settings.ui == "on",
        signin=settings.signin,
        ranker=None if data_dir is None else ranking(settings),
    )
    click.echo(banner(where, first, __version__), err=True)
    for line in edge_notes(settings):
        click.echo(line, err=True)
    keep_secrets_out_of_the_access_log()  # a provider key sent as ?key= (docs/proxy.md)
    # stdio started on this data directory goes through this server (see `stdio`)
    announced = (
        None if data_dir is None else announce_serving(data_dir, settings.host, settings.port)
    )
    try:
        connections.run(
            server.app,
            host=settings.host,
            port=settings.port,
            limits=connections.ConnectionLimits(
                settings.head_timeout_seconds,
                settings.body_timeout_seconds,
                settings.max_connections,
            ),
            trusted_proxies=settings.trusted_proxies,
        )
    finally:
        if announced is not None:
            withdraw_serving(announced)


def stdio_server(settings: Settings) -> tuple[MCPServer, VaultClient]:
    """The stdio server over the data directory's vault; when a running `serve` owns that
    directory, through that server (the URL it announced), as MEMORYROUTER_API_URL would."""
    try:
        return create_stdio_server(settings)
    except StoreInUse as busy:
        url = None if settings.api_url else serving_url(settings.data_dir, busy.pid)
        if url is None:
            raise
        click.echo(
            f"{settings.data_dir} is served by `serve` (process {busy.pid}): going through it "
            f"at {url}",
            err=True,
        )
        settings.api_url = url
        return create_stdio_server(settings)


def settings_problem(exc: ValidationError) -> str:
    """Each setting that could not be read, by its environment variable, and why."""
    lines = []
    for error in exc.errors():
        where = str(error["loc"][0]) if error["loc"] else ""
        lines.append(f"MEMORYROUTER_{where.upper()}: {error['msg']}")
    return "; ".join(lines)


def edge_notes(settings: Settings) -> list[str]:
    """What serve says at start about who reaches it, through what (docs/security.md)."""
    if settings.auth == "none":
        return [
            "",
            "No keys (MEMORYROUTER_AUTH=none): only clients on this machine that reach it",
            "directly; anything a proxy or tunnel relays is refused (use MEMORYROUTER_AUTH=key).",
        ]
    trusted = ", ".join(str(n) for n in settings.trusted_proxies)
    notes = [
        "",
        "The edge:",
        f"  trusted proxies  {trusted or 'none'} (MEMORYROUTER_TRUSTED_PROXIES)"
        + ("" if trusted else ": per-address limits see the connecting address"),
    ]
    if not is_loopback(settings.host):
        notes.append(f"  listening on     {settings.host}: reachable beyond this machine")
    if settings.metrics == "on" and not settings.metrics_token:
        notes.append(
            "  /metrics         "
            + (
                "this machine only, no proxy between (MEMORYROUTER_METRICS_OPEN=loopback)"
                if settings.metrics_open == "loopback"
                else "closed: set MEMORYROUTER_METRICS_TOKEN or MEMORYROUTER_METRICS_OPEN=loopback"
            )
        )
    return notes


@main.command()
def stdio() -> None:
    """Serve MCP over stdin/stdout for local clients (Claude desktop).

    The memory key comes from MEMORYROUTER_KEY; the vault is the local one in
    MEMORYROUTER_DATA_DIR, or the API at MEMORYROUTER_API_URL.
    """
    settings = Settings()
    key = settings.key
    if not key:
        raise click.ClickException("set MEMORYROUTER_KEY to the memory key of your vault")
    if not looks_like_key(split_mode(key)[0]):
        raise click.ClickException(
            "MEMORYROUTER_KEY is not a memory key: a key is mk_ followed by letters and digits, "
            "as `serve` or `keys create` showed it (the mk_... of examples is a "
            "placeholder)"
        )
    try:
        mcp, client = stdio_server(settings)
    except StartupError as exc:
        raise click.ClickException(str(exc)) from exc
    where = settings.api_url or f"the vault in {settings.data_dir}"

    async def run() -> None:
        try:
            # A key that cannot open the vault stops here with one line, not at every call.
            try:
                await client.with_key(key).key_info()
            except Unauthorized as exc:
                raise click.ClickException(
                    f"MEMORYROUTER_KEY does not open {where} (unknown or revoked key): list "
                    "keys with `mcp-memoryrouter keys list`, or make one for the vault with "
                    "`mcp-memoryrouter keys create --vault vr_...`"
                ) from exc
            except MemoryRouterError as exc:
                raise click.ClickException(f"cannot start: {exc.message}") from exc
            await mcp.run_stdio_async()
        finally:
            await client.aclose()

    anyio.run(run)
