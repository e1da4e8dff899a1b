"""The memory explorer at ``/ui``: server-rendered pages over the vault's REST API.

Like the MCP side and the chat proxy, it reaches the vault only through :class:`VaultClient`,
acting with the key the person signed in with (kept sealed in the server-side session of
:mod:`sessions`), so every rule of the vault (read-only keys, scopes of a key's mode, rate
limits, metering) applies to the pages exactly as to the API.

Every page answers with a strict Content-Security-Policy (scripts and styles from this
server only, no inline ones, no frames, forms post here only). Every change is a POST that
carries the session's CSRF token, from a session cookie that is HttpOnly and SameSite=Strict;
a read-only key's pages show no control that changes anything, and its POSTs are refused.
"""

from __future__ import annotations

import hmac
import math
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from functools import partial, wraps
from importlib import resources
from typing import Literal, TypeVar
from urllib.parse import parse_qs, unquote, urlsplit

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, Router
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_memoryrouter import limits, schemas
from mcp_memoryrouter.abilities import abilities
from mcp_memoryrouter.auth.explorer_signin import ExplorerIdentity, IdentitySignedIn
from mcp_memoryrouter.auth.state.database import off_loop
from mcp_memoryrouter.auth.state.store import AuthStore
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.edge.body import read_body
from mcp_memoryrouter.edge.ratelimit import TokenBuckets
from mcp_memoryrouter.errors import (
    Forbidden,
    MemoryRouterError,
    NotFound,
    RateLimited,
    TransportFailure,
    Unauthorized,
)
from mcp_memoryrouter.pages.headers import EXPLORER_HEADERS
from mcp_memoryrouter.ui import render, render_memory, render_overview, render_search, views
from mcp_memoryrouter.ui.notices import Notices
from mcp_memoryrouter.ui.render import PREFIX, Viewer, url
from mcp_memoryrouter.ui.responses import Form, html, local_path, redirect, viewer_of
from mcp_memoryrouter.ui.sessions import LIFETIME_SECONDS, UiSession, UiSessions
from mcp_memoryrouter.ui.shell import Shell
from mcp_memoryrouter.ui.tidying import Tidying
from mcp_memoryrouter.ui.upload import read_upload
from mcp_memoryrouter.ui.views import ConsolidateNow, Filters
from mcp_memoryrouter.ui.writing import Writing

T = TypeVar("T")

__all__ = ["Explorer"]

SESSION_COOKIE = "memoryrouter_ui"
SIGN_IN_COOKIE = "memoryrouter_ui_signin"
SIGN_IN_SECONDS = 1800
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_IMPORTANCE = re.compile(r"^(10|[1-9])$")
EPOCH = "1970-01-01"
SEARCH_STEP = 20
PREFERENCES_SHOWN = 8  # the overview's standing preferences, most important first
PREFERENCES_QUERY = "standing preferences and instructions"
DEFAULT_API_URL = "http://127.0.0.1:8787"  # what the CLI's --api-url defaults to
# the pages a person reads, and so may come back to after a delete
RETURNABLE = tuple(PREFIX + p for p in ("/search", "/timeline", "/memories/", "/tidy"))
FORBIDDEN_FORM = "This form expired or came from another page. Load the page again and resubmit."
READ_ONLY = "This key is read-only: it can look at the vault but not change it."
ENDED = "Your session ended (signed out, expired, or its key was revoked). Sign in again."
SIGNED_OUT = "You are signed out."

UNKNOWN_KEY = (
    "That is not a key of this server's vaults, or it was revoked. Check it and try again."
)

Handler = Callable[[Request], Awaitable[Response]]


class Refusal(Exception):
    """A sign-in refused: what the page says, its status and headers."""

    def __init__(self, message: str, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.headers = headers


async def _preferences(
    client: VaultClient, stats: schemas.StatsResponse
) -> list[schemas.MemoryRow]:
    """The current standing preferences the overview lists: most important, then newest,
    first (a search by kind holds every current one, up to its limit; none is asked for
    when the vault holds none)."""
    if not stats.preferences:
        return []
    found = await client.search(
        schemas.SearchRequest(
            query=PREFERENCES_QUERY,
            kinds=["preference"],
            current=True,
            limit=min(stats.preferences, limits.SEARCH_LIMIT_MAX),
        )
    )
    rows = sorted(found.memories, key=lambda r: r.covers.to if r.covers else "", reverse=True)
    rows.sort(key=lambda r: r.importance or 0, reverse=True)  # stable: newest first within
    return rows[:PREFERENCES_SHOWN]


def _static(name: str) -> bytes:
    return resources.files("mcp_memoryrouter.ui").joinpath("static", name).read_bytes()


class Explorer:
    def __init__(
        self,
        client: VaultClient,
        sessions: UiSessions,
        *,
        secure_cookies: bool,
        default_key: str | None = None,
        clock: Callable[[], float] = time.time,
        sign_ins: TokenBuckets | None = None,
        identity: ExplorerIdentity | None = None,
        apps: AuthStore | None = None,
    ) -> None:
        """``sign_ins``: the sign-in attempts each client address may make (None: any);
        ``identity``: the identity providers' sign-in, when people sign in with one;
        ``apps``: the authorization server's grants, when it is embedded here."""
        self._vault = client
        self._sign_ins = sign_ins
        self._dry_run_known: bool | None = None
        self._sessions = sessions
        self._secure = secure_cookies
        self._default_key = default_key
        self._clock = clock
        self.identity = identity
        self._notices = Notices(sessions)
        corrections = sessions.corrections()
        self.writing = Writing(client, self._notices, corrections, clock=clock)
        self.tidying = Tidying(client, self._notices, corrections, apps=apps, clock=clock)
        self._css = _static("explorer.css")
        self._js = _static("explorer.js")

    def serves(self, path: str) -> bool:
        return path == PREFIX or path.startswith(PREFIX + "/")

    def app(self, allowed_hosts: Sequence[str]) -> ASGIApp:
        """Every page under ``/ui``, behind the shell (the Host check and the headers), for
        requests whose Host is one of ``allowed_hosts``."""
        page, change = self._page, self._change
        writing, tidying = self.writing, self.tidying
        memory_form = limits.UI_MEMORY_FORM_MAX_BYTES
        routes = [
            Route(PREFIX, page(self.overview)),
            Route(PREFIX + "/", self.home),
            Route(PREFIX + "/sign-in", self.sign_in_form, methods=["GET"]),
            Route(PREFIX + "/sign-in", self.sign_in, methods=["POST"]),
            Route(PREFIX + "/sign-in/provider", self.sign_in_provider, methods=["GET"]),
            Route(PREFIX + "/sign-out", change(self.sign_out, writes=False), methods=["POST"]),
            Route(PREFIX + "/search", page(self.search)),
            Route(PREFIX + "/timeline", page(self.timeline)),
            Route(PREFIX + "/memories/{memory_id}", page(self.memory)),
            Route(PREFIX + "/memories/{memory_id}/correct", page(writing.correct_form)),
            Route(
                PREFIX + "/memories/{memory_id}/correct",
                change(writing.correct, limit=memory_form),
                methods=["POST"],
            ),
            Route(PREFIX + "/add", page(writing.add_form), methods=["GET"]),
            Route(PREFIX + "/add", change(writing.add, limit=memory_form), methods=["POST"]),
            Route(PREFIX + "/delete", change(self.delete), methods=["POST"]),
            Route(PREFIX + "/delete/confirm", change(self.delete_confirmed), methods=["POST"]),
            Route(PREFIX + "/tidy", page(tidying.page)),
            Route(PREFIX + "/export", page(tidying.export)),
            Route(PREFIX + "/import", change(tidying.import_file, upload=True), methods=["POST"]),
            Route(PREFIX + "/keys", change(tidying.mint), methods=["POST"]),
            Route(PREFIX + "/keys/revoke", change(tidying.revoke), methods=["POST"]),
            Route(PREFIX + "/apps/disconnect", change(tidying.disconnect), methods=["POST"]),
            Route(PREFIX + "/wipe", change(tidying.wipe), methods=["POST"]),
            Route(PREFIX + "/consolidate", change(self.consolidate), methods=["POST"]),
            Route(PREFIX + "/static/explorer.css", self.stylesheet),
            Route(PREFIX + "/static/explorer.js", self.script),
        ]
        return Shell(Router(routes, default=self.not_found), allowed_hosts)

    async def not_found(self, scope: Scope, receive: Receive, send: Send) -> None:
        content = render.problem("Not found", "There is no such page.", None, back=PREFIX)
        await html(content, 404)(scope, receive, send)

    async def home(self, request: Request) -> Response:
        return redirect(PREFIX)

    async def aclose(self) -> None:
        self._sessions.close()

    # --- the session around each page ------------------------------------------------------

    async def _db(self, work: Callable[[], T]) -> T:
        """The sessions' ``work``, off the event loop when they are kept in a remote database."""
        return await off_loop(self._sessions.remote, work)

    async def _session(self, request: Request) -> UiSession | None:
        secret = request.cookies.get(SESSION_COOKIE)
        if not secret:
            return None
        return await self._db(partial(self._sessions.find, secret, self._clock()))

    def _page(self, view: Callable[[Request, UiSession], Awaitable[Response]]) -> Handler:
        """A GET page: signed in, or sent to the sign-in page (which comes back here)."""

        @wraps(view)
        async def handle(request: Request) -> Response:
            session = await self._session(request)
            if session is None:
                back = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                # a cookie that opens no session: it expired, was signed out or revoked
                ended = "1" if request.cookies.get(SESSION_COOKIE) else None
                response = redirect(url("/sign-in", next=local_path(back), ended=ended))
                if ended:
                    self._clear(response, SESSION_COOKIE)
                return response
            return await self._guarded(view, request, session)

        return handle

    def _change(
        self,
        action: Callable[[Request, UiSession, Form], Awaitable[Response]],
        *,
        writes: bool = True,
        limit: int = limits.UI_FORM_MAX_BYTES,
        upload: bool = False,
    ) -> Handler:
        """A POST: signed in, its CSRF token the session's, and (``writes``) a key that may
        change the vault. The form is read under a size limit (``upload``: a form with a
        file, read under the upload's)."""

        @wraps(action)
        async def handle(request: Request) -> Response:
            session = await self._session(request)
            if session is None:
                return await self._ended(request, status=401)
            if upload:
                form: Form | None = await read_upload(request, limits.UI_IMPORT_MAX_BYTES)
            else:
                form = await self._form(request, limit)
            if form is None:
                return html(render.problem("Too large", _too_large(upload), None), status=413)
            token = (form.get("csrf") or [""])[0]
            if not hmac.compare_digest(token.encode(), session.csrf.encode()):
                return html(render.problem("Refused", FORBIDDEN_FORM, viewer_of(session)), 403)
            if writes and session.read_only:
                return html(render.problem("Refused", READ_ONLY, viewer_of(session)), 403)
            return await self._guarded(lambda r, s: action(r, s, form), request, session)

        return handle

    async def _guarded(
        self,
        view: Callable[[Request, UiSession], Awaitable[Response]],
        request: Request,
        session: UiSession,
    ) -> Response:
        """The view's response, or the page that says what the vault refused and why."""
        try:
            return await view(request, session)
        except Unauthorized:
            return await self._ended(request, session=session)
        except MemoryRouterError as error:
            return self._refused(error, session, request)
        except ValidationError:  # a value the API would refuse (an id too long, a name)
            message = "That value is not one the vault accepts: check it and try again."
            return html(render.problem("Not understood", message, viewer_of(session)), 400)

    def _refused(self, error: MemoryRouterError, session: UiSession, request: Request) -> Response:
        viewer = viewer_of(session)
        headers = {}
        if isinstance(error, RateLimited):
            retry = error.details.get("retry_after")
            headers["Retry-After"] = str(retry or 1)
            message = f"Too many requests for this key. Wait {retry or 1} s and try again."
        elif isinstance(error, NotFound):
            message = "Nothing with this id in this vault (it may have been deleted)."
        elif isinstance(error, Forbidden):
            message = error.message
        elif error.status >= 500:
            message = "The vault could not answer. Try again in a moment."
            if error.status == 503:  # the database is away: when to try again, if it said
                headers["Retry-After"] = str(error.details.get("retry_after") or 1)
        else:
            message = error.message
        content = render.problem(
            _TITLES.get(error.status, "Refused"),
            message,
            viewer,
            back=PREFIX,
        )
        return html(content, error.status, headers)

    async def _ended(
        self, request: Request, *, session: UiSession | None = None, status: int = 303
    ) -> Response:
        if session is not None:
            await self._db(partial(self._sessions.end, session.secret))
        if status == 303:
            back = None
            if request.method == "GET":
                back = local_path(
                    request.url.path + (f"?{request.url.query}" if request.url.query else "")
                )
            response = redirect(url("/sign-in", next=back, ended="1"))
        else:
            response = html(render.sign_in_notice(ENDED), status)
        self._clear(response, SESSION_COOKIE)
        return response

    async def _form(self, request: Request, limit: int) -> Form | None:
        body = await read_body(request.receive, limit)
        if body is None:
            return None
        return parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)

    def _client(self, session: UiSession) -> VaultClient:
        return self._client_with(session.key)

    def _client_with(self, key: str) -> VaultClient:
        return self._vault.with_key(key)

    # --- cookies ---------------------------------------------------------------------------

    def _set(self, response: Response, name: str, value: str, max_age: int) -> None:
        response.set_cookie(
            name,
            value,
            max_age=max_age,
            path=PREFIX,
            secure=self._secure,
            httponly=True,
            samesite="strict",
        )

    def _clear(self, response: Response, name: str) -> None:
        self._set(response, name, "", 0)

    # --- sign-in ---------------------------------------------------------------------------

    async def sign_in_form(self, request: Request) -> Response:
        if await self._session(request) is not None:
            return redirect(local_path(request.query_params.get("next")))
        # another tab's form stays valid: the token is reused while its cookie lives
        token = request.cookies.get(SIGN_IN_COOKIE) or secrets.token_urlsafe(24)
        notice = ENDED if request.query_params.get("ended") else None
        if request.query_params.get("out"):
            notice = SIGNED_OUT
        content = render.sign_in(
            token,
            needs_key=self._default_key is None,
            next_path=local_path(request.query_params.get("next")),
            notice=notice,
            providers=() if self.identity is None else self.identity.providers,
        )
        response = html(content)
        self._set(response, SIGN_IN_COOKIE, token, SIGN_IN_SECONDS)
        return response

    def _too_many_sign_ins(self, request: Request) -> Response | None:
        address = request.client.host if request.client else "unknown"
        wait = self._sign_ins.take(address) if self._sign_ins is not None else None
        if wait is None:
            return None
        seconds = max(1, math.ceil(wait))
        content = render.problem(
            "Slow down",
            f"Too many sign-in attempts from this address. Wait {seconds} s and try again.",
            None,
            back=url("/sign-in"),
        )
        return html(content, 429, {"Retry-After": str(seconds)})

    async def sign_in(self, request: Request) -> Response:
        refused = self._too_many_sign_ins(request)
        if refused is not None:
            return refused
        form = await self._form(request, limits.UI_FORM_MAX_BYTES)
        if form is None:
            return html(render.problem("Too large", "That form is too large.", None), 413)
        expected = request.cookies.get(SIGN_IN_COOKIE, "")
        token = (form.get("csrf") or [""])[0]
        next_path = local_path((form.get("next") or [""])[0])
        if not expected or not hmac.compare_digest(token.encode(), expected.encode()):
            return html(render.problem("Refused", FORBIDDEN_FORM, None, back=url("/sign-in")), 403)
        if self.identity is not None:  # no memory key is typed here: the provider signs in
            names = " or ".join(name for _, name in self.identity.providers)
            message = f"Sign in with {names}."
            return html(render.problem("Refused", message, None, back=url("/sign-in")), 403)
        key = self._default_key or (form.get("key") or [""])[0].strip()
        try:
            info = await self._readable(key)
        except Refusal as refusal:
            content = render.sign_in(
                token,
                needs_key=self._default_key is None,
                next_path=next_path,
                error=refusal.message,
            )
            return html(content, refusal.status, refusal.headers)
        earlier = request.cookies.get(SESSION_COOKIE)
        if earlier:
            # a new sign-in replaces this browser's session
            await self._db(partial(self._sessions.end, earlier))
        read_only = not abilities(info.read_only, info.mode).writes
        session = await self._db(
            partial(self._sessions.start, info.vault, key, read_only, self._clock())
        )
        response = redirect(next_path)
        self._set(response, SESSION_COOKIE, session.secret, LIFETIME_SECONDS)
        self._clear(response, SIGN_IN_COOKIE)
        return response

    async def sign_in_provider(self, request: Request) -> Response:
        """Off to the identity provider, which sends the person back to the server's callback
        (then :meth:`identity_signed_in`)."""
        if self.identity is None:
            return html(render.problem("Not found", "There is no such page.", None), 404)
        refused = self._too_many_sign_ins(request)
        if refused is not None:
            return refused
        key = request.query_params.get("provider") or self.identity.providers[0][0]
        return await self.identity.start(key, local_path(request.query_params.get("next")))

    async def identity_signed_in(self, person: IdentitySignedIn) -> Response:
        """A person the identity provider signed in: a session on their vault, and a page
        that goes on to where they were going (see ``render.signed_in``)."""
        session = await self._db(
            partial(
                self._sessions.start, person.vault_ref, person.key, person.read_only, self._clock()
            )
        )
        response = html(render.signed_in(local_path(person.next_path)), 200, EXPLORER_HEADERS)
        self._set(response, SESSION_COOKIE, session.secret, LIFETIME_SECONDS)
        self._clear(response, SIGN_IN_COOKIE)
        return response

    async def _readable(self, key: str) -> schemas.KeyInfo:
        """What ``key`` may do, when it opens a vault it may read; else :class:`Refusal`
        saying why, with no detail of the vault's own failures."""
        if not key:
            raise Refusal("Paste a memory key.", 400)
        if not (key.isascii() and key.isprintable()) or len(key) > limits.UI_KEY_MAX_CHARS:
            raise Refusal(UNKNOWN_KEY, 401)
        try:
            info = await self._client_with(key).key_info()
        except Unauthorized:
            raise Refusal(UNKNOWN_KEY, 401) from None
        except RateLimited as limited:
            retry = str(limited.details.get("retry_after") or 1)
            message = f"Too many requests for this key. Wait {retry} s."
            raise Refusal(message, 429, {"Retry-After": retry}) from None
        except MemoryRouterError as error:
            if error.status >= 500:
                wait = {"Retry-After": str(error.details.get("retry_after") or 1)}
                message = "The vault could not answer. Try again in a moment."
                raise Refusal(message, 503, wait) from None
            raise Refusal(error.message, error.status) from None
        if not abilities(info.read_only, info.mode).reads:
            raise Refusal(
                f"This key's mode ({info.mode}) cannot read memories. Sign in with the key "
                "without its mode suffix.",
                403,
            )
        return info

    async def sign_out(
        self, request: Request, session: UiSession, form: dict[str, list[str]]
    ) -> Response:
        await self._db(partial(self._sessions.end, session.secret))
        response = redirect(url("/sign-in", out="1"))
        self._clear(response, SESSION_COOKIE)
        return response

    # --- pages -----------------------------------------------------------------------------

    async def overview(self, request: Request, session: UiSession) -> Response:
        client = self._client(session)
        stats = await client.stats()
        try:
            timeline = await client.timeline(_bucket_for(stats))
        except NotFound:  # a vault API elsewhere (MEMORYROUTER_API_URL) without the route
            timeline = None
        notice = await self._notices.notice(session)
        reflector = stats.server_reflector
        runs_a_model = reflector is not None and reflector.configured and reflector.enabled
        action = PREFIX + "/consolidate" if runs_a_model else None
        offer = ConsolidateNow(
            api_url=_api_url(request),
            action=action,
            failed=None if reflector is None else reflector.last_error,
            next_run=None if reflector is None else reflector.next_run_after,
        )
        preferences = await _preferences(client, stats)
        return html(
            render_overview.overview(
                stats,
                timeline,
                viewer_of(session),
                notice=notice,
                offer=offer,
                preferences=preferences,
            )
        )

    async def consolidate(self, request: Request, session: UiSession, form: Form) -> Response:
        """The overview's "Consolidate now": the server's reflector, now (docs/reflector.md);
        the overview then says what it wrote, or the page why nothing was."""
        done = await self._client(session).consolidate_run(schemas.ConsolidateRunRequest())
        await self._notices.tell(session, f"Consolidated now: {done.message}.")
        return redirect(PREFIX)

    async def search(self, request: Request, session: UiSession) -> Response:
        viewer = viewer_of(session)
        f, problem = _filters(request)
        if problem:
            return html(render_search.search_page(f, None, viewer, error=problem), 400)
        if not request.query_params:
            return html(render_search.search_page(f, None, viewer))
        client = self._client(session)
        if f.query and not (f.date_from or f.date_to):
            found = await client.search(
                schemas.SearchRequest(
                    query=f.query,
                    limit=f.limit,
                    tiers=list(f.tiers) or None,
                    importance=f.importance,
                )
            )
            more = None
            if len(found.memories) >= f.limit and f.limit < limits.SEARCH_LIMIT_MAX:
                more = url(
                    "/search",
                    **views.query_of(f),
                    limit=min(f.limit + SEARCH_STEP, limits.SEARCH_LIMIT_MAX),
                )
            note = "Best matches first: meaning and words, newer breaking near ties."
            return html(
                render_search.search_page(
                    f,
                    found.memories,
                    viewer,
                    note=note,
                    more=more,
                    notice=await self._notices.notice(session),
                    here=_here(request),
                )
            )
        window = await client.date_search(_date_request(f, None))
        note = (
            "In the date window, best matches first."
            if f.query
            else "Newest first; a reflection stands at the start of the time it covers. The "
            "timeline pages through a longer window."
        )
        return html(
            render_search.search_page(
                f,
                window.memories,
                viewer,
                note=note,
                notice=await self._notices.notice(session),
                here=_here(request),
            )
        )

    async def timeline(self, request: Request, session: UiSession) -> Response:
        viewer = viewer_of(session)
        f, problem = _filters(request)
        if problem:
            return html(
                render_search.timeline_page(f, None, viewer, next_page=None, error=problem), 400
            )
        cursor = request.query_params.get("cursor") or None
        result = await self._client(session).date_search(_date_request(f, cursor))
        next_page = None
        if result.truncated:
            turn = result.returned.from_ if f.order == "newest_first" else result.returned.to
            next_page = url("/timeline", **views.query_of(f), cursor=turn)
        return html(
            render_search.timeline_page(
                f,
                result,
                viewer,
                next_page=next_page,
                notice=await self._notices.notice(session),
                here=_here(request),
            )
        )

    async def memory(self, request: Request, session: UiSession) -> Response:
        memory_id = request.path_params["memory_id"]
        offset = _int(request.query_params.get("offset"), 0, 0, 10**9)
        found = await self._client(session).inspect(
            schemas.InspectRequest(memory_id=memory_id, offset=offset, order="similarity")
        )
        more = (
            render.memory_url(memory_id, offset=found.next_offset)
            if found.next_offset is not None
            else None
        )
        back = _came_from(request, memory_id) or _parent(found)
        links = await self.writing.links(session, found.memory_id)
        notice = await self._notices.notice(session)
        content = render_memory.memory_page(
            found, viewer_of(session), next_offset=more, back=back, notice=notice, corrections=links
        )
        return html(content)

    # --- changes ---------------------------------------------------------------------------

    async def delete(
        self, request: Request, session: UiSession, form: dict[str, list[str]]
    ) -> Response:
        ids, back = _ids(form), local_path((form.get("back") or [""])[0])
        cancel = local_path((form.get("cancel") or [""])[0], back)
        viewer = viewer_of(session)
        refused = _selection_problem(ids, viewer, cancel)
        if refused is not None:
            return refused
        client = self._client(session)
        if not await self._dry_runs(client):
            return html(render_memory.confirm_delete(ids, None, None, viewer, back, cancel))
        alone = await client.delete_ids(schemas.DeleteIdsRequest(ids=ids, dry_run=True))
        derived = await client.delete_ids(
            schemas.DeleteIdsRequest(ids=ids, derived=True, dry_run=True)
        )
        if alone.dry_run is not True or derived.dry_run is not True:
            raise TransportFailure("the vault did not answer the dry run as one")
        return html(render_memory.confirm_delete(ids, alone, derived, viewer, back, cancel))

    async def _dry_runs(self, client: VaultClient) -> bool:
        """Whether the vault answers ``dry_run`` on delete-ids. Any vault of this version
        does; a vault API elsewhere (``MEMORYROUTER_API_URL``) that predates it would ignore
        the field and delete, so it is asked first, once: a vault with the timeline route
        (newer than dry runs) has them."""
        if self._dry_run_known is None:
            try:
                await client.timeline("month")
                self._dry_run_known = True
            except NotFound:
                self._dry_run_known = False
        return self._dry_run_known

    async def delete_confirmed(
        self, request: Request, session: UiSession, form: dict[str, list[str]]
    ) -> Response:
        ids, back = _ids(form), local_path((form.get("back") or [""])[0])
        refused = _selection_problem(ids, viewer_of(session), back)
        if refused is not None:
            return refused
        asked = (form.get("derived") or ["no"])[0]
        derived: bool | Literal["evidence"] = "evidence" if asked == "evidence" else asked == "yes"
        done = await self._client(session).delete_ids(
            schemas.DeleteIdsRequest(ids=ids, derived=derived)
        )
        deleted = sum(len(v) for v in (done.by_tier or {}).values()) if derived else done.deleted
        gone = {*ids, *(i for group in (done.by_tier or {}).values() for i in group)}
        if _memory_of(back) in gone:
            back = PREFIX  # the page of what was just deleted is gone
        await self._notices.tell(session, f"Deleted {_memories(deleted)}.")
        return redirect(back)

    # --- static ----------------------------------------------------------------------------

    async def stylesheet(self, request: Request) -> Response:
        return _asset(self._css, "text/css; charset=utf-8")

    async def script(self, request: Request) -> Response:
        return _asset(self._js, "text/javascript; charset=utf-8")


_TITLES = {
    400: "Not understood",
    403: "Refused",
    404: "Not found",
    409: "Refused",
    429: "Slow down",
}


def _asset(content: bytes, media_type: str) -> Response:
    response = Response(content, media_type=media_type)
    response.headers["Cache-Control"] = "no-cache"
    return response


def _api_url(request: Request) -> str | None:
    """This server's address as the consolidation command names it (None: the command's
    default, http://127.0.0.1:8787)."""
    base = str(request.base_url).rstrip("/")
    return None if base == DEFAULT_API_URL else base


def _too_large(upload: bool) -> str:
    if not upload:
        return "That form is too large."
    cap = limits.UI_IMPORT_MAX_BYTES // 1_048_576
    return f"That file is over {cap} MiB: import it with mcp-memoryrouter import instead."


def _here(request: Request) -> str:
    """The page's own address, for a delete started from it to come back to."""
    query = f"?{request.url.query}" if request.url.query else ""
    return local_path(request.url.path + query)


def _came_from(request: Request, memory_id: str) -> str | None:
    """The explorer page that linked to this memory (the browser's same-origin Referer, the
    pages' Referrer-Policy), when it is another page of this server's explorer."""
    referer = urlsplit(request.headers.get("referer", ""))
    if referer.netloc != request.headers.get("host") or referer.scheme not in ("http", "https"):
        return None
    if referer.path != PREFIX and not referer.path.startswith(RETURNABLE):
        return None  # the sign-in page, a download: not a page to come back to
    found = local_path(referer.path + (f"?{referer.query}" if referer.query else ""), "")
    return found if found and _memory_of(found) != memory_id else None


def _parent(found: schemas.InspectResponse) -> str:
    """The first reflection built from this memory, else the overview."""
    up = found.consolidated_into or []
    return render.memory_url(up[0].id) if up else PREFIX


def _memory_of(path: str) -> str | None:
    """The id of the memory whose page ``path`` is (None: not a memory's page)."""
    route = urlsplit(path).path
    prefix = PREFIX + "/memories/"
    return unquote(route[len(prefix) :]) if route.startswith(prefix) else None


def _selection_problem(ids: list[str], viewer: Viewer, back: str) -> Response | None:
    if not ids:
        message = "Tick the memories to delete first."
    elif len(ids) > limits.MAX_DELETE_IDS:
        message = f"Select at most {limits.MAX_DELETE_IDS} memories at a time."
    else:
        return None
    return html(render.problem("Nothing deleted", message, viewer, back=back), 400)


def _memories(n: int) -> str:
    return f"{n} memor{'y' if n == 1 else 'ies'}"


def _ids(form: dict[str, list[str]]) -> list[str]:
    seen: dict[str, None] = {}
    for value in form.get("ids", []):
        if value.strip():
            seen[value.strip()] = None
    return list(seen)


def _int(value: str | None, default: int, low: int, high: int) -> int:
    try:
        return min(max(int(value), low), high) if value else default
    except ValueError:
        return default


def _filters(request: Request) -> tuple[Filters, str | None]:
    """The form's filters, and what is wrong with them (None: nothing)."""
    q = request.query_params
    tiers = tuple(sorted({int(t) for t in q.getlist("tier") if t in ("1", "2", "3")}))
    importance_text = q.get("importance", "")
    importance = int(importance_text) if _IMPORTANCE.match(importance_text) else None
    f = Filters(
        query=q.get("q", "").strip()[: limits.MAX_QUERY_CHARS],
        tiers=tiers,
        importance=importance if importance is None or 1 <= importance <= 10 else None,
        date_from=q.get("from", "").strip(),
        date_to=q.get("to", "").strip(),
        order="oldest_first" if q.get("order") == "oldest_first" else "newest_first",
        limit=_int(q.get("limit"), SEARCH_STEP, 1, limits.SEARCH_LIMIT_MAX),
    )
    for name, value in (("From", f.date_from), ("To", f.date_to)):
        if value and not _DATE.match(value):
            return f, f"{name} must be a date like 2026-03-01."
    if f.date_from and f.date_to and f.date_from > f.date_to:
        return f, "From must not be after To."
    if importance_text and f.importance is None:
        return f, "Importance is a number from 1 to 10."
    return f, None


def _date_request(f: Filters, cursor: str | None) -> schemas.DateSearchRequest:
    start, end = f.date_from or EPOCH, f.date_to or None
    if cursor:
        if f.order == "newest_first":
            end = cursor
        else:
            start = cursor
    return schemas.DateSearchRequest(
        **{"from": start},
        to=end,
        query=f.query or None,
        tiers=list(f.tiers) or None,
        importance=f.importance,
        order=f.order,
        max_tokens=limits.UI_PAGE_TOKENS,
    )


def _bucket_for(stats: schemas.StatsResponse) -> str:
    """Days for a vault spanning two months at most, weeks up to two years, else months."""
    if not stats.oldest or not stats.newest:
        return "month"
    oldest = datetime.fromisoformat(stats.oldest.replace("Z", "+00:00"))
    newest = datetime.fromisoformat(stats.newest.replace("Z", "+00:00"))
    span = (newest - oldest).days
    return "day" if span <= 62 else "week" if span <= 730 else "month"
