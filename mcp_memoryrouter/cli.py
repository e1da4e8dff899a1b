"""The ``mcp-memoryrouter`` command: serve the vault, manage keys."""

from __future__ import annotations

import json
import sys

import anyio
import click
from mcp.server import MCPServer
from pydantic import ValidationError

from mcp_memoryrouter import __version__, edge
from mcp_memoryrouter.accesslog import keep_secrets_out_of_the_access_log
from mcp_memoryrouter.app import create_server, create_stdio_server, is_loopback
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.errors import (
    MemoryRouterError,
    NotFound,
    StartupError,
    StoreUnavailable,
    Unauthorized,
)
from mcp_memoryrouter.limits import MAX_ID_CHARS
from mcp_memoryrouter.schemas import hidden
from mcp_memoryrouter.startup import (
    Listening,
    announce_serving,
    banner,
    keep_first_key,
    serving_url,
    stdio_command,
    withdraw_serving,
)
from mcp_memoryrouter.vault.app import build_service, migrate_store
from mcp_memoryrouter.vault.http import render
from mcp_memoryrouter.vault.keyring import Keyring
from mcp_memoryrouter.vault.rules.access import looks_like_key, split_mode
from mcp_memoryrouter.vault.service import VaultService
from mcp_memoryrouter.vault.store.sqlite.owner import StoreInUse


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
        edge.run(
            server.app,
            host=settings.host,
            port=settings.port,
            limits=edge.ConnectionLimits(
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


@main.group()
def keys() -> None:
    """Create, list and revoke memory keys, beside the data.

    These commands open the store directly (MEMORYROUTER_DATA_DIR or
    MEMORYROUTER_DATABASE_URL), so whoever can run them there needs no key: this is how a
    lost key is replaced. Over HTTP, a read-write key uses GET/POST /v1/keys and
    DELETE /v1/keys/{id} instead (see docs/keys.md).
    """


def _keyring() -> tuple[VaultService, Keyring]:
    try:
        service, _ = build_service(Settings(), start_worker=False)
    except (StoreUnavailable, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    return service, service.keys


def _key_name(_: click.Context, __: click.Parameter, name: str) -> str:
    """The name ``keys create`` gives a key: the rule ``POST /v1/keys`` applies."""
    problem = next((f"U+{ord(c):04X}" for c in name if hidden(c)), None)
    if problem is not None:
        raise click.BadParameter(
            f"holds {problem}, a control or formatting character (a terminal would act on "
            "it when the name is listed): use letters, digits, spaces and punctuation"
        )
    if not 1 <= len(name) <= MAX_ID_CHARS:
        raise click.BadParameter(f"give a name of 1 to {MAX_ID_CHARS} characters")
    return name


def visible(text: str) -> str:
    """``text`` for a terminal: each control or formatting character shown as <U+001B>, never
    sent raw (names stored before they were checked may hold escape sequences)."""
    return "".join(f"<U+{ord(c):04X}>" if hidden(c) else c for c in text)


@keys.command("create")
@click.option("--read-only", is_flag=True, help="The key can search and inspect, never write.")
@click.option(
    "--name",
    default="default",
    show_default=True,
    callback=_key_name,
    help=f"A label for the key: up to {MAX_ID_CHARS} characters, no control or formatting "
    "characters.",
)
@click.option(
    "--vault",
    "vault_ref",
    metavar="VR_REF",
    help="Add the key to this existing vault (its vr_… reference, as status and `keys list` "
    "show it) instead of creating a new vault.",
)
@click.option("--json", "as_json", is_flag=True, help='Print {"key", "vault", "id"}.')
def keys_create(read_only: bool, name: str, vault_ref: str | None, as_json: bool) -> None:
    """Print a new memory key (shown only once): of a new vault, or with --vault of an
    existing one (the way back in when its keys are lost)."""
    service, keyring = _keyring()
    try:
        if vault_ref is None:
            key, ref = keyring.create_vault(name=name, read_only=read_only)
            key_id = keyring.vault_keys(keyring.vault_id(ref))[0].id
        else:
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


@keys.command("list")
@click.option("--vault", "vault_ref", metavar="VR_REF", help="Only this vault's keys.")
@click.option("--json", "as_json", is_flag=True, help="Print the vaults and their keys as JSON.")
def keys_list(vault_ref: str | None, as_json: bool) -> None:
    """List the keys of every vault (or of one): id, name, prefix, mode, created, last used.

    Secrets are never shown: the prefix is a key's first characters, to recognise it."""
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


@keys.command("revoke")
@click.argument("key_id")
def keys_revoke(key_id: str) -> None:
    """Revoke the key KEY_ID (from `keys list`): its next request is refused (401).

    Revoking a vault's last read-write key is allowed here, with a warning: run
    `keys create --vault VR_REF` to get back in."""
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
