"""The Tidy page and its changes: export and import the vault, make and revoke its keys,
disconnect an app signed in to it, wipe it.

The apps are the grants of the embedded authorization server (``auth/state/store.py``), read and
revoked here for the signed-in vault only, and only once the vault has confirmed that the
session's key still opens that vault with the right to change it."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from mcp_memoryrouter import schemas
from mcp_memoryrouter.abilities import abilities
from mcp_memoryrouter.auth.state.database import off_loop
from mcp_memoryrouter.auth.state.store import AuthStore, Connection
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.errors import Forbidden, MemoryRouterError, NotFound
from mcp_memoryrouter.transfer.archive import Archive, read_archive
from mcp_memoryrouter.transfer.importer import import_archive
from mcp_memoryrouter.ui.corrections import Corrections
from mcp_memoryrouter.ui.notices import Notices
from mcp_memoryrouter.ui.render import PREFIX, url
from mcp_memoryrouter.ui.render_tidy import tidy_page
from mcp_memoryrouter.ui.responses import Form, count, field, html, redirect, viewer_of
from mcp_memoryrouter.ui.sessions import UiSession
from mcp_memoryrouter.ui.upload import Upload

ACCESS = {"read": True, "write": False}  # the mint form's access: read_only


class Tidying:
    def __init__(
        self,
        vault: VaultClient,
        notices: Notices,
        corrections: Corrections,
        *,
        apps: AuthStore | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``apps``: the authorization server's grants, when it is embedded here."""
        self._vault = vault
        self._notices = notices
        self._corrections = corrections
        self._clock = clock
        self.apps = apps

    def _client(self, session: UiSession) -> VaultClient:
        return self._vault.with_key(session.key)

    async def page(self, request: Request, session: UiSession) -> Response:
        return await self._page(session, shown_once=True)

    async def _page(
        self,
        session: UiSession,
        *,
        shown_once: bool = False,
        error: str | None = None,
        status: int = 200,
    ) -> Response:
        client = self._client(session)
        stats = await client.stats()
        keys = None if session.read_only else await client.list_keys()
        apps = None if session.read_only else await self._connections(session)
        notice, minted = await self._notices.told(session) if shown_once else (None, None)
        content = tidy_page(
            viewer_of(session), stats, keys, apps=apps, minted=minted, notice=notice, error=error
        )
        return html(content, status)

    async def _connections(self, session: UiSession) -> list[Connection] | None:
        store = self.apps
        if store is None:
            return None
        work = partial(store.connections, session.vault_ref, self._clock())
        return await off_loop(store.remote, work)

    # --- export and import -------------------------------------------------------------

    async def export(self, request: Request, session: UiSession) -> Response:
        lines = self._client(session).export_lines()
        first = await anext(lines, None)  # a refusal surfaces here, before the 200

        async def body() -> AsyncIterator[bytes]:
            if first is None:
                return
            yield _line(first)
            async for line in lines:
                yield _line(line)

        stamp = datetime.fromtimestamp(self._clock(), UTC).strftime("%Y-%m-%d")
        name = f"memoryrouter-{session.vault_ref}-{stamp}.ndjson"
        return StreamingResponse(
            body(),
            media_type="application/x-ndjson",
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )

    async def import_file(self, request: Request, session: UiSession, form: Form) -> Response:
        """The uploaded export, checked whole, then stored as ``mcp-memoryrouter import``
        stores it. A file that cannot be imported changes nothing."""
        file = form.file if isinstance(form, Upload) else None
        archive = _archive(file)
        if isinstance(archive, str):
            return await self._page(session, error=f"Nothing was imported: {archive}", status=400)
        client = self._client(session)
        held = (await client.stats()).total_memories
        if held and (archive.groups or archive.to_mark):
            return await self._page(
                session,
                error=f"Nothing was imported: this vault holds {count(held, 'memory', 'memories')}"
                ", and an export with reflections goes into an empty vault (its moments would "
                "meet their copies here, already consolidated). Import it into a new vault, or "
                "export this one and wipe it first.",
                status=409,
            )
        report = await import_archive(client, archive)
        rebuilt = report.reflections[2] + report.reflections[3]
        said = f"Imported {count(report.stored, 'memory', 'memories')}"
        if report.duplicates:
            said += f" ({report.duplicates} already here)"
        if rebuilt:
            said += f" and rebuilt {count(rebuilt, 'reflection', 'reflections')}"
        await self._notices.tell(session, said + ".")
        return redirect(url("/tidy"))

    # --- keys ----------------------------------------------------------------------------

    async def mint(self, request: Request, session: UiSession, form: Form) -> Response:
        name = field(form, "name").strip()
        if not name:
            return await self._page(session, error="Give the new key a name.", status=400)
        read_only = ACCESS.get(field(form, "access") or "read")
        if read_only is None:
            return await self._page(
                session, error="Choose the new key's access: read-only or read-write.", status=400
            )
        minted = await self._client(session).mint_key(
            schemas.KeyCreateRequest(name=name, read_only=read_only)
        )
        access = "read-only" if minted.read_only else "read-write"
        await self._notices.tell(session, f"Made the {access} key {minted.name}.", minted)
        return redirect(url("/tidy"))

    async def revoke(self, request: Request, session: UiSession, form: Form) -> Response:
        key_id = field(form, "id")
        if not key_id:
            return await self._page(session, error="Choose a key to revoke.", status=400)
        try:
            await self._client(session).revoke_key(key_id)
        except MemoryRouterError as error:
            if error.status not in (404, 409):
                raise
            return await self._page(session, error=error.message, status=error.status)
        await self._notices.tell(session, "The key is revoked.")
        return redirect(url("/tidy"))

    # --- apps ----------------------------------------------------------------------------

    async def disconnect(self, request: Request, session: UiSession, form: Form) -> Response:
        """Revoke one app's grants on this vault; the key it was signed in with stays."""
        client_id, store = field(form, "client"), self.apps
        if store is None:
            raise NotFound("no app signs in to this server")
        if not client_id:
            return await self._page(session, error="Choose an app to disconnect.", status=400)
        info = await self._client(session).key_info()  # the key still opens this vault
        if info.vault != session.vault_ref or not abilities(info.read_only, info.mode).full:
            raise Forbidden("This key cannot disconnect apps from this vault.")
        work = partial(store.disconnect, session.vault_ref, client_id)
        if not await off_loop(store.remote, work):
            return await self._page(
                session, error="That app is not connected to this vault.", status=404
            )
        await self._notices.tell(
            session, "The app is disconnected: its next request is refused. Your keys still work."
        )
        return redirect(url("/tidy"))

    # --- wipe ----------------------------------------------------------------------------

    async def wipe(self, request: Request, session: UiSession, form: Form) -> Response:
        typed = field(form, "confirm").strip()
        if typed != session.vault_ref:
            return await self._page(
                session,
                error=f"Nothing was wiped: type the vault reference {session.vault_ref} "
                "exactly to confirm.",
                status=400,
            )
        done = await self._client(session).wipe()
        forget = partial(self._corrections.forget_vault, session.vault_ref)
        await off_loop(self._corrections.remote, forget)
        deleted = count(done.deleted, "memory", "memories")
        await self._notices.tell(session, f"Wiped the vault: {deleted} deleted.")
        return redirect(PREFIX)


def _line(value: dict[str, Any]) -> bytes:
    return (json.dumps(value, ensure_ascii=False) + "\n").encode()


def _archive(file: bytes | None) -> Archive | str:
    """The uploaded file as an archive, checked whole; else what is wrong with it."""
    if not file:
        return "choose the export file (.ndjson) to import."
    try:
        text = file.decode("utf-8")
    except UnicodeDecodeError:
        return "the file is not UTF-8 text. Choose the .ndjson file an export wrote."
    try:
        # one record a line, ended by "\n" alone (JSON leaves U+2028 and U+0085 raw)
        archive = read_archive(text.split("\n"))
    except MemoryRouterError as error:
        return f"{error.message}. Choose the .ndjson file an export wrote, or fix that line."
    if not archive.size:
        return "the file holds no memories."
    return archive
