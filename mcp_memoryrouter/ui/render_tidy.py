"""The Tidy page's HTML: export and import, the vault's keys, the apps connected to it, and
the wipe. Pure functions, no I/O; a read-only key's page has no control that changes
anything."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from mcp_memoryrouter import limits, schemas
from mcp_memoryrouter.auth.display import return_host, shown
from mcp_memoryrouter.auth.scopes import SCOPE_WORDS
from mcp_memoryrouter.auth.state.store import Connection
from mcp_memoryrouter.pages.document import esc
from mcp_memoryrouter.ui.render import PREFIX, Viewer, csrf_field, page
from mcp_memoryrouter.ui.views import day

WORDS = {str(scope): words for scope, words in SCOPE_WORDS.items()}  # what an app may do


def tidy_page(
    viewer: Viewer,
    stats: schemas.StatsResponse,
    keys: schemas.KeyList | None,
    *,
    apps: Sequence[Connection] | None = None,
    minted: schemas.KeyCreated | None = None,
    notice: str | None = None,
    error: str | None = None,
) -> str:
    """``apps``: the apps connected to the vault by OAuth (None: this server signs no app
    in by OAuth)."""
    if viewer.read_only:
        body = (
            export_section()
            + '<p class="note">This key is read-only: it can look and export, not import, '
            "delete, wipe, disconnect apps or manage keys.</p>"
        )
        return page("Tidy", body, viewer, current="/tidy", notice=notice, error=error)
    body = (
        export_section()
        + import_section(viewer)
        + keys_section(viewer, keys, minted)
        + apps_section(viewer, apps)
        + wipe_section(viewer, stats)
    )
    return page("Tidy", body, viewer, current="/tidy", notice=notice, error=error)


def export_section() -> str:
    return (
        '<section aria-labelledby="export-h"><h2 id="export-h">Export</h2>'
        "<p>The whole vault as one file (NDJSON, one memory a line, every tier with its "
        "lineage): Import below, or <code>mcp-memoryrouter import</code>, reads it back.</p>"
        f'<p><a class="button" href="{PREFIX}/export" download>Download the export</a></p>'
        "</section>"
    )


def import_section(viewer: Viewer) -> str:
    cap = limits.UI_IMPORT_MAX_BYTES // 1_048_576
    return (
        '<section aria-labelledby="import-h"><h2 id="import-h">Import</h2>'
        "<p>Upload an export (this page's download, or <code>mcp-memoryrouter export</code>): "
        "its memories are stored again, and its reflections rebuilt with their lineage. An "
        "export holding reflections goes into an empty vault. The whole file is checked "
        "before anything is stored, and a memory already here is not stored twice.</p>"
        f'<form method="post" action="{PREFIX}/import" enctype="multipart/form-data">'
        f'{csrf_field(viewer)}<label for="import-file">Export file (.ndjson, up to {cap} MiB;'
        " a larger one with <code>mcp-memoryrouter import</code>)</label>"
        '<input id="import-file" name="file" type="file" required '
        'accept=".ndjson,.jsonl,application/x-ndjson,application/jsonl">'
        '<div><button type="submit">Import the file</button></div></form></section>'
    )


def keys_section(
    viewer: Viewer, keys: schemas.KeyList | None, minted: schemas.KeyCreated | None
) -> str:
    rows = "".join(key_row(viewer, k) for k in (keys.keys if keys else []))
    return (
        '<section aria-labelledby="keys-h"><h2 id="keys-h">Keys</h2>'
        f'{minted_card(minted)}<div class="table-scroll"><table class="keys"><caption>'
        "The vault's keys (never their secrets)</caption><thead><tr>"
        '<th scope="col">Name</th><th scope="col">Starts</th><th scope="col">Access</th>'
        '<th scope="col">Created</th><th scope="col">Last used</th><th scope="col">'
        '<span class="visually-hidden">Action</span></th></tr></thead>'
        f"<tbody>{rows}</tbody></table></div>{mint_form(viewer)}</section>"
    )


def key_row(viewer: Viewer, k: schemas.KeyListed) -> str:
    revoke = (
        f'<form method="post" action="{PREFIX}/keys/revoke" data-confirm="Revoke the key '
        f'{esc(k.name)}? Anything using it stops working.">{csrf_field(viewer)}'
        f'<input type="hidden" name="id" value="{esc(k.id)}">'
        f'<button type="submit" class="danger small" aria-label="Revoke {esc(k.name)}">'
        "Revoke</button></form>"
    )
    return (
        f"<tr><td>{esc(k.name)}</td><td><code>{esc(k.prefix or '—')}…</code></td>"
        f"<td>{'read-only' if k.read_only else 'read-write'}</td>"
        f"<td>{esc(day(k.created_at))}</td><td>{esc(day(k.last_used_at))}</td>"
        f"<td>{revoke}</td></tr>"
    )


def minted_card(minted: schemas.KeyCreated | None) -> str:
    if minted is None:
        return ""
    access = "read-only" if minted.read_only else "read-write"
    warning = (
        ""
        if minted.read_only
        else "<p>It can store, delete and wipe everything in this vault: keep it like a "
        "password.</p>"
    )
    return (
        f'<div class="card minted" role="status"><p><strong>New {access} key '
        f"&ldquo;{esc(minted.name)}&rdquo;.</strong> Copy it now: it is shown once.</p>"
        f'<p><code class="secret">{esc(minted.key)}</code></p>{warning}</div>'
    )


def mint_form(viewer: Viewer) -> str:
    choices = (
        ("read", "Read-only: searches, reads and exports; changes nothing", True),
        ("write", "Read-write: also stores, consolidates, deletes and manages keys", False),
    )
    radios = "".join(
        f'<label class="inline"><input type="radio" name="access" value="{value}"'
        + (" checked" if checked else "")
        + f"> {esc(words)}</label>"
        for value, words, checked in choices
    )
    return (
        f'<form method="post" action="{PREFIX}/keys" class="card">{csrf_field(viewer)}'
        '<h3 id="mint-h">Make a key</h3>'
        '<label for="key-name">Name of the new key</label>'
        '<input id="key-name" name="name" maxlength="100" required>'
        f'<fieldset class="access"><legend>Access</legend>{radios}</fieldset>'
        '<button type="submit">Make the key</button></form>'
    )


def apps_section(viewer: Viewer, apps: Sequence[Connection] | None) -> str:
    head = '<section aria-labelledby="apps-h"><h2 id="apps-h">Connected apps</h2>'
    if apps is None:
        return (
            head + '<p class="note">Apps connect to this server with a memory key, not by '
            "signing in: revoke the key an app uses to disconnect it.</p></section>"
        )
    if not apps:
        return (
            head + '<p class="empty">No app is connected to this vault by signing in.</p></section>'
        )
    rows = "".join(app_row(viewer, app) for app in apps)
    return (
        head + "<p>Apps you signed in to this vault (Claude, ChatGPT, …). Disconnecting one "
        "stops it at its next request; your keys keep working, and the app can ask to connect "
        'again.</p><div class="table-scroll"><table class="apps"><caption>Apps signed in to '
        'this vault</caption><thead><tr><th scope="col">App</th><th scope="col">May</th>'
        '<th scope="col">Connected</th><th scope="col">Last active</th><th scope="col">'
        '<span class="visually-hidden">Action</span></th></tr></thead>'
        f"<tbody>{rows}</tbody></table></div>"
        '<p class="note">Last active: when the app last renewed its access, which it does '
        "while in use each time its access token runs out (15 minutes by default).</p>"
        "</section>"
    )


def app_name(app: Connection) -> tuple[str, str]:
    """The app's name as HTML (whatever it registered, shown so that it cannot rewrite the
    page), and the plain text for labels."""
    if app.client_name:
        name = app.client_name
    elif app.client_id.startswith("https://"):
        name = return_host(app.client_id)  # a client ID metadata document: its host
    else:
        name = "An app without a name"
    return shown(name), name


def app_row(viewer: Viewer, app: Connection) -> str:
    name, plain = app_name(app)
    where = ""
    if app.redirect_uris:
        where = f'<br><span class="note">returns to {shown(return_host(app.redirect_uris[0]))}'
        where += "</span>"
    may = ", ".join(esc(WORDS.get(s, s)) for s in app.scopes)
    disconnect = (
        f'<form method="post" action="{PREFIX}/apps/disconnect" data-confirm="Disconnect '
        f'{esc(plain)}? It stops at its next request.">{csrf_field(viewer)}'
        f'<input type="hidden" name="client" value="{esc(app.client_id)}">'
        f'<button type="submit" class="danger small" aria-label="Disconnect {esc(plain)}">'
        "Disconnect</button></form>"
    )
    return (
        f"<tr><td>{name}{where}</td><td>{may}</td><td>{esc(moment(app.connected_at))}</td>"
        f"<td>{esc(moment(app.last_used_at))}</td><td>{disconnect}</td></tr>"
    )


def moment(seconds: float) -> str:
    """Seconds since 1970 as the pages show a time (UTC, to the minute)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M")


def wipe_section(viewer: Viewer, stats: schemas.StatsResponse) -> str:
    return (
        '<section aria-labelledby="wipe-h"><h2 id="wipe-h">Wipe the vault</h2>'
        f"<p>Deletes all {stats.total_memories} memories at every tier, for good. Keys stay. "
        "Export first if you may want them back.</p>"
        f'<form method="post" action="{PREFIX}/wipe">{csrf_field(viewer)}'
        f'<label for="confirm-wipe">Type the vault reference <code>{esc(viewer.vault_ref)}'
        "</code> to confirm</label>"
        '<input id="confirm-wipe" name="confirm" autocomplete="off" spellcheck="false" required>'
        '<button type="submit" class="danger">Wipe every memory</button></form></section>'
    )
