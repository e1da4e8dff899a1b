"""The pages that store a memory: add one by hand, or correct one.

Both store through ``POST /v1/memory/ingest`` with the session's key, as a connected app
does. A correction is a new memory whose text says what it corrects; the link between the
two ids is kept beside the sessions (:mod:`corrections`), and the corrected memory's page
shows it. Nothing is edited in place."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial

from starlette.requests import Request
from starlette.responses import Response

from mcp_memoryrouter import limits, schemas
from mcp_memoryrouter.auth.state.database import off_loop
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.errors import NotFound
from mcp_memoryrouter.ui import render_writing
from mcp_memoryrouter.ui.corrections import Corrections
from mcp_memoryrouter.ui.notices import Notices
from mcp_memoryrouter.ui.render import memory_url, problem
from mcp_memoryrouter.ui.render_writing import ROLES, Draft
from mcp_memoryrouter.ui.responses import Form, count, field, html, redirect, viewer_of
from mcp_memoryrouter.ui.sessions import UiSession

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
READ_ONLY_PAGE = "This key is read-only: it can look at the vault but not change it."


class Writing:
    def __init__(
        self,
        vault: VaultClient,
        notices: Notices,
        corrections: Corrections,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._vault = vault
        self._notices = notices
        self._corrections = corrections
        self._clock = clock

    def _client(self, session: UiSession) -> VaultClient:
        return self._vault.with_key(session.key).as_surface("explorer")  # stored_by

    def _today(self) -> str:
        return datetime.fromtimestamp(self._clock(), UTC).strftime("%Y-%m-%d")

    # --- add -----------------------------------------------------------------------------

    async def add_form(self, request: Request, session: UiSession) -> Response:
        viewer = viewer_of(session)
        if viewer.read_only:
            return html(problem("Add a memory", READ_ONLY_PAGE, viewer), 403)
        return html(render_writing.add_page(viewer))

    async def add(self, request: Request, session: UiSession, form: Form) -> Response:
        draft = Draft(field(form, "text").strip(), field(form, "role"), field(form, "date"))
        wrong = _draft_problem(draft)
        if wrong:
            page = render_writing.add_page(viewer_of(session), draft, error=wrong)
            return html(page, 400)
        message = schemas.MessageIn.model_validate(
            {"role": draft.role, "content": draft.text, "date": draft.date or None}
        )
        done = await self._client(session).ingest(schemas.IngestRequest(messages=[message]))
        first = " This is its first part." if len(done.ids) > 1 else ""
        await self._notices.tell(session, _stored(done, "memory") + first)
        return redirect(memory_url(done.ids[0]))

    # --- correct -------------------------------------------------------------------------

    async def correct_form(self, request: Request, session: UiSession) -> Response:
        viewer = viewer_of(session)
        if viewer.read_only:
            return html(problem("Correct a memory", READ_ONLY_PAGE, viewer), 403)
        found = await self._inspect(session, request.path_params["memory_id"])
        return html(render_writing.correct_page(found, viewer, today=self._today()))

    async def correct(self, request: Request, session: UiSession, form: Form) -> Response:
        found = await self._inspect(session, request.path_params["memory_id"])
        text = field(form, "text").strip()
        wrong = _text_problem(text)
        if wrong:
            page = render_writing.correct_page(
                found, viewer_of(session), today=self._today(), text=text, error=wrong
            )
            return html(page, 400)
        message = schemas.MessageIn(
            role="user",
            content=render_writing.correction_text(found, text, self._today()),
            date=render_writing.when_of(found),
        )
        done = await self._client(session).ingest(schemas.IngestRequest(messages=[message]))
        link = partial(
            self._corrections.link, session.vault_ref, found.memory_id, done.ids, self._clock()
        )
        await off_loop(self._corrections.remote, link)
        await self._notices.tell(session, _stored(done, "correction") + " It is linked below.")
        return redirect(memory_url(found.memory_id))

    async def _inspect(self, session: UiSession, memory_id: str) -> schemas.InspectResponse:
        return await self._client(session).inspect(schemas.InspectRequest(memory_id=memory_id))

    # --- on a memory's page ----------------------------------------------------------------

    async def links(self, session: UiSession, memory_id: str) -> str:
        """The memory page's "Corrected by" and "Corrects", from the links the vault still
        answers with this key (one it no longer has is forgotten)."""
        store = self._corrections
        by = partial(store.corrected_by, session.vault_ref, memory_id)
        of = partial(store.corrects, session.vault_ref, memory_id)
        corrected_by = await self._present(session, await off_loop(store.remote, by))
        corrects = await self._present(session, await off_loop(store.remote, of))
        return render_writing.corrections_section(corrected_by, corrects, viewer_of(session))

    async def _present(
        self, session: UiSession, ids: Sequence[str]
    ) -> list[schemas.InspectResponse]:
        found = []
        for memory_id in ids:
            try:
                found.append(await self._inspect(session, memory_id))
            except NotFound:
                forget = partial(self._corrections.forget, session.vault_ref, memory_id)
                await off_loop(self._corrections.remote, forget)
        return found


def _text_problem(text: str) -> str | None:
    if not text:
        return "Write what to remember."
    if len(text) > limits.UI_MEMORY_MAX_CHARS:
        return f"Keep it under {limits.UI_MEMORY_MAX_CHARS} characters (this is {len(text)})."
    return None


def _draft_problem(draft: Draft) -> str | None:
    if draft.role not in {value for value, _ in ROLES}:
        return "Choose whose words these are."
    if draft.date and not _DATE.match(draft.date):
        return "When must be a date like 2026-03-01, or empty for now."
    return _text_problem(draft.text)


def _stored(done: schemas.IngestResponse, what: str) -> str:
    """What storing said, for the page that follows (the first part's, or the corrected
    memory's)."""
    if done.stored == 0:
        return f"That {what} was already stored."
    if len(done.ids) > 1:
        parts = count(len(done.ids), "part", "parts")
        return f"Stored the {what} in {parts}, as a long text is kept."
    return f"Stored the {what}."
