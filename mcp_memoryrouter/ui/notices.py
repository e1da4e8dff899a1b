"""What the next page says, once: the redirect after a change carries nothing in its URL, so
nothing in a link can make a page say it, and a reload shows nothing again."""

from __future__ import annotations

import json
from functools import partial

from mcp_memoryrouter import schemas
from mcp_memoryrouter.auth.state.database import off_loop
from mcp_memoryrouter.ui.sessions import UiSession, UiSessions


class Notices:
    def __init__(self, sessions: UiSessions) -> None:
        self._sessions = sessions

    async def tell(
        self, session: UiSession, notice: str, minted: schemas.KeyCreated | None = None
    ) -> None:
        """Say ``notice`` (and show a new key) on the session's next page, once."""
        said = {"notice": notice, "minted": None if minted is None else minted.model_dump()}
        work = partial(self._sessions.show_once, session.secret, json.dumps(said))
        await off_loop(self._sessions.remote, work)

    async def told(self, session: UiSession) -> tuple[str | None, schemas.KeyCreated | None]:
        """What :meth:`tell` left for this page; taken once the page's vault calls are done."""
        work = partial(self._sessions.take_shown_once, session.secret)
        said = await off_loop(self._sessions.remote, work)
        if said is None:
            return None, None
        value = json.loads(said)
        minted = value.get("minted")
        return value.get("notice"), None if minted is None else schemas.KeyCreated(**minted)

    async def notice(self, session: UiSession) -> str | None:
        return (await self.told(session))[0]
