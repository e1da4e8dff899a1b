"""The chat proxy: a provider's own API, with the caller's memory before and after the call.

An app points its OpenAI, Anthropic or Google client at this server instead of the
provider and adds its memory key (``X-Memory-Key``). For each call:

1. the key is checked with the vault (an unknown key is refused; the proxy is no open
   relay), and the memory options are read from the headers (:mod:`proxy.options`);
2. ``prepare`` runs over the conversation's last messages, and its context block is put
   where the format keeps instructions (:mod:`proxy.formats`); nothing else in the body
   changes, and a body is never translated into another provider's format;
3. the call goes to the configured upstream with the provider's key as the client sent it;
4. the provider's response goes back as it came, byte for byte (streams chunk by chunk, as
   they arrive), with ``X-Memory-*`` headers added;
5. once the response has gone (the caller never waits for it), the user's new message and
   the answer are stored (``ingest``), for a stream once it has ended complete: a stream cut
   short, or an error status, stores nothing. ``X-Memory-Store`` says beforehand what will
   be stored: ``turn``, ``answer`` (the user's message opted out, or carried a tool's
   result) or ``none``.

OpenAI's Responses API (``/v1/responses``) is served the same way. Model lists, embeddings
and Anthropic's token count pass through without memory (a known key still needed); other
provider routes get a 404 naming those served (:mod:`proxy.routes`).

The memory side never blocks a call: if the vault cannot answer, the call goes on without
memory and ``X-Memory-Status: unavailable`` says why. Refused up front are only what the
vault would refuse anyway: no key or an unknown one (401), a bad option header (400), a key
over its rate limit (429, with ``Retry-After``). The vault is reached only through
:class:`~mcp_memoryrouter.client.VaultClient`, as the MCP side reaches it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx2
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from mcp_memoryrouter import limits, schemas
from mcp_memoryrouter.abilities import abilities
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.edge.body import read_body
from mcp_memoryrouter.edge.responses import error_response
from mcp_memoryrouter.errors import (
    Forbidden,
    InvalidRequest,
    MemoryRouterError,
    NotFound,
    RateLimited,
    TransportFailure,
    Unauthorized,
    too_large,
)
from mcp_memoryrouter.limits import PREPARE_QUERY_MESSAGES
from mcp_memoryrouter.proxy.admission import Admission
from mcp_memoryrouter.proxy.answers import parsed, reader_for
from mcp_memoryrouter.proxy.formats import (
    ANTHROPIC,
    GOOGLE,
    OPENAI,
    OPENAI_RESPONSES,
    Format,
    Turn,
)
from mcp_memoryrouter.proxy.options import (
    MEMORY_KEY,
    OWN_HEADERS,
    PROVIDER_KEY,
    Options,
    debt_header,
    header_text,
    options,
)
from mcp_memoryrouter.proxy.routes import NOT_SERVED, SERVED

log = logging.getLogger("mcp_memoryrouter.proxy")

# RFC 9110 §7.6.1: never forwarded either way. Content-Length is recomputed; Accept-Encoding
# is replaced by identity, so the bytes the client gets are the bytes the proxy reads.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "accept-encoding",
    }
)
# This server's own: uvicorn writes them on every response.
OWN_RESPONSE_HEADERS = frozenset({"date", "server"})
GOOGLE_VERSIONS = frozenset({"v1", "v1beta", "v1alpha"})
GOOGLE_CALLS = (":generateContent", ":streamGenerateContent")
UPSTREAM_TIMEOUT = httpx2.Timeout(600.0, connect=10.0)  # answers may think for minutes


@dataclass(frozen=True)
class Upstreams:
    """Where each format's calls go: OpenAI's base includes its ``/v1`` (as the OpenAI SDK's
    base URL does, so any OpenAI-compatible server fits); Anthropic's and Google's are
    origins, and the request's own path follows them."""

    openai: str = "https://api.openai.com/v1"
    anthropic: str = "https://api.anthropic.com"
    google: str = "https://generativelanguage.googleapis.com"


@dataclass
class Report:
    """What memory did for one call, told back in the response headers."""

    mode: str
    status: str = "ok"  # ok | off | unavailable
    problem: str | None = None
    retrieved: int = 0
    tokens_retrieved: int = 0
    tokens_injected: int = 0
    store: str = "none"  # what is stored once the answer is complete: turn | answer | none
    debt: str | None = None
    session: str | None = None

    def failed(self, what: str, error: Exception) -> None:
        self.status = "unavailable"
        message = error.message if isinstance(error, MemoryRouterError) else str(error)
        self.problem = f"{what}: {message}"
        log.warning("chat proxy: memory %s", self.problem)

    def headers(self) -> dict[str, str]:
        found = {
            "x-memory-mode": self.mode,
            "x-memory-status": self.status,
            "x-memory-memories-retrieved": str(self.retrieved),
            "x-memory-tokens-retrieved": str(self.tokens_retrieved),
            "x-memory-tokens-injected": str(self.tokens_injected),
        }
        if self.problem:
            found["x-memory-problem"] = header_text(self.problem)
        found["x-memory-store"] = self.store
        if self.debt:
            found["x-memory-reflection-debt"] = self.debt
        if self.session:
            found["x-session-id"] = header_text(self.session, 200)
        return found


@dataclass
class Call:
    """One proxied call on its way: its format, body and the memory side's state."""

    format: Format
    payload: dict[str, Any] | None
    options: Options
    report: Report
    vault: VaultClient  # with the caller's key
    asked_at: float
    stores: bool = False
    newest: Turn | None = None  # the user's new message, read before opt-outs are stripped


class ChatProxy:
    """The proxy routes (see the module's docstring). ``vault`` is the client without a
    key; ``http`` reaches the upstreams; ``default_key`` serves calls that bring none (a
    local server with MEMORYROUTER_AUTH=none)."""

    def __init__(
        self,
        vault: VaultClient,
        upstreams: Upstreams,
        *,
        max_body_bytes: int,
        default_key: str | None = None,
        allowed_hosts: Sequence[str] | None = None,
        allowed_origins: Sequence[str] = (),
        body_seconds: float = limits.BODY_SECONDS,
        max_answer_bytes: int = limits.PROXY_MAX_ANSWER_BYTES,
        http: httpx2.AsyncClient | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``allowed_hosts``: when given, the only ``Host`` names a call may carry (a local
        server without keys: a page on another name that resolves here must not use it).
        ``allowed_origins``: the web origins besides this server's own whose pages may call
        (the CORS list); a call from any other page is refused. ``body_seconds``: how long a
        request body may take to arrive. ``max_answer_bytes``: the most of a provider's
        answer held to be stored (the rest is relayed, not held)."""
        self._vault = vault
        self._admission = Admission(
            None if allowed_hosts is None else tuple(allowed_hosts),
            frozenset(o.rstrip("/").lower() for o in allowed_origins),
        )
        self._upstreams = upstreams
        self._max_body = max_body_bytes
        self._body_seconds = body_seconds
        self.max_answer = max_answer_bytes
        self._default_key = default_key
        self._http = http or httpx2.AsyncClient(timeout=UPSTREAM_TIMEOUT)
        self._clock = clock

    def routes(self) -> list[Route]:
        return [
            Route("/v1/chat/completions", self._openai, methods=["POST"]),
            Route("/v1/responses", self._openai_responses, methods=["POST"]),
            Route("/v1/messages", self._anthropic, methods=["POST"]),
            Route("/{version}/models/{call}", self._google, methods=["POST"]),
            # passed on as they are, without memory: the model lists and embeddings
            Route("/v1/embeddings", self._embeddings, methods=["POST"]),
            Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
            Route("/{version}/models", self._models, methods=["GET"]),
            Route("/{version}/models/{model}", self._models, methods=["GET"]),
            *(
                Route(path, self._not_served, methods=["GET", "POST", "DELETE"])
                for path in NOT_SERVED
            ),
        ]

    async def aclose(self) -> None:
        await self._http.aclose()

    # --- the three formats --------------------------------------------------------------

    async def _openai(self, request: Request) -> Response:
        return await self._relay(request, OPENAI, self._upstreams.openai + "/chat/completions")

    async def _anthropic(self, request: Request) -> Response:
        return await self._relay(request, ANTHROPIC, self._upstreams.anthropic + "/v1/messages")

    async def _openai_responses(self, request: Request) -> Response:
        target = self._upstreams.openai + "/responses"
        return await self._relay(request, OPENAI_RESPONSES, target)

    async def _embeddings(self, request: Request) -> Response:
        return await self._pass(request, OPENAI, self._upstreams.openai + "/embeddings")

    async def _count_tokens(self, request: Request) -> Response:
        target = self._upstreams.anthropic + "/v1/messages/count_tokens"
        return await self._pass(request, ANTHROPIC, target)

    async def _models(self, request: Request) -> Response:
        """``GET /v1/models`` is OpenAI's and Anthropic's (told apart by the header only
        Anthropic's clients send) and Google's; ``/v1beta`` and ``/v1alpha`` Google's."""
        version, path = request.path_params["version"], request.url.path
        if version not in GOOGLE_VERSIONS:
            return self._not_served(request)
        headers = request.headers
        if version == "v1" and "anthropic-version" in headers:
            return await self._pass(request, ANTHROPIC, self._upstreams.anthropic + path)
        google = "x-goog-api-key" in headers or "key" in request.query_params
        if version != "v1" or google:
            return await self._pass(request, GOOGLE, self._upstreams.google + path)
        return await self._pass(request, OPENAI, self._upstreams.openai + path.removeprefix("/v1"))

    def _not_served(self, request: Request) -> Response:
        served = ", ".join(SERVED)
        return error_response(
            NotFound(
                f"the chat proxy does not serve {request.method} {request.url.path}: it serves "
                f"{served} (docs/proxy.md); call the provider directly for the rest",
                {"served": list(SERVED)},
            )
        )

    async def _google(self, request: Request) -> Response:
        version, call = request.path_params["version"], request.path_params["call"]
        if version not in GOOGLE_VERSIONS or not call.endswith(GOOGLE_CALLS):
            return self._not_served(request)
        return await self._relay(request, GOOGLE, self._upstreams.google + request.url.path)

    # --- one call -----------------------------------------------------------------------

    async def _relay(self, request: Request, fmt: Format, target: str) -> Response:
        asked_at = self._clock()
        try:
            self._admission.check(request.headers)
            key = self._key_of(request)
            chosen = options(request.headers)
            vault = self._vault.with_key(key).as_surface("proxy")  # stored_by: the proxy's
            info, admitted = await _checked(vault)  # before a byte of the body is read
            body = await self._body(request)
            call, forwarded = await self._before(fmt, body, admitted, info, chosen, asked_at)
            # the store after the answer presents the key again: revoked meanwhile, it
            # stores nothing
            call.vault = vault
        except MemoryRouterError as refused:
            return _refusal(refused)
        return await self._send(request, call, "POST", target, forwarded)

    def _key_of(self, request: Request) -> str:
        key = request.headers.get(MEMORY_KEY) or self._default_key
        if not key:
            raise Unauthorized(
                "missing memory key: send it in the X-Memory-Key header (the provider's "
                "key goes where the provider expects it, or in X-Provider-Key)"
            )
        return key

    async def _send(
        self, request: Request, call: Call, method: str, target: str, content: bytes | None
    ) -> Response:
        """The call to the provider; its answer relayed as it arrives."""
        upstream = self._http.build_request(
            method,
            target,
            params=request.url.query or None,
            content=content,
            headers=_upstream_headers(request, call.format),
        )
        try:
            response = await self._http.send(upstream, stream=True)
        except httpx2.HTTPError as exc:
            where = httpx2.URL(target).copy_with(query=None)
            return error_response(
                TransportFailure(
                    f"cannot reach the provider at {where}: {type(exc).__name__}: {exc}",
                    {"upstream": str(where)},
                )
            )
        call.report.store = self._what_is_stored(call) if response.is_success else "none"
        return Relayed(self, call, response)

    async def _pass(self, request: Request, fmt: Format, target: str) -> Response:
        """A provider call passed on as it is, with no memory before or after; a memory key
        the vault knows is needed all the same (the proxy is no open relay)."""
        try:
            self._admission.check(request.headers, json_body=request.method == "POST")
            key = self._key_of(request)
            chosen = options(request.headers)
            info, _ = await _checked(self._vault.with_key(key))
            body = await self._body(request) if request.method == "POST" else None
        except MemoryRouterError as refused:
            return _refusal(refused)
        report = Report(mode="off", status="off")
        if isinstance(info, MemoryRouterError):
            report.failed("the vault cannot check the key", info)
        call = Call(fmt, None, chosen, report, self._vault, self._clock())
        return await self._send(request, call, request.method, target, body)

    async def _body(self, request: Request) -> bytes:
        body = await read_body(request.receive, self._max_body, self._body_seconds)
        if body is None:
            raise too_large(self._max_body)
        return body

    async def _before(
        self,
        fmt: Format,
        body: bytes,
        vault: VaultClient,
        info: schemas.KeyInfo | MemoryRouterError,
        chosen: Options,
        asked_at: float,
    ) -> tuple[Call, bytes]:
        """The call, and the body to forward: with the memory block when there is one, else
        as sent. A vault that cannot answer leaves the call without memory."""
        report = Report(mode=chosen.mode, session=chosen.session_id)
        payload = _parsed_object(body)
        call = Call(fmt, payload, chosen, report, vault, asked_at)
        turns = fmt.turns(payload) if payload is not None else []
        asked = _prepare_request(chosen, turns) if chosen.retrieves and turns else None
        prepared = await _prepared(vault, asked)
        if isinstance(prepared, RateLimited):
            raise prepared
        if payload is None:
            report.status, report.problem = "off", "the body is not a JSON object"
            return call, body
        call.newest = fmt.newest(payload)  # read before the opt-outs are stripped
        changed = fmt.strip_opt_outs(payload)
        if isinstance(info, MemoryRouterError):
            report.failed("the vault cannot check the key", info)
        elif chosen.mode == "off" or info.mode == "off":
            report.status = "off"
        else:
            call.stores = chosen.stores and abilities(info.read_only, info.mode).writes
            if isinstance(prepared, Forbidden):
                pass  # the key's mode does not retrieve (mk_…:write)
            elif isinstance(prepared, MemoryRouterError):
                report.failed("retrieval failed", prepared)
            elif prepared is not None:
                report.debt = debt_header(prepared.reflection)
                report.retrieved = prepared.memories_found
                report.tokens_retrieved = prepared.est_tokens
                if prepared.context.strip():
                    fmt.inject(payload, prepared.context)
                    report.tokens_injected = prepared.est_tokens
                    changed = True
        # untouched bodies travel as their own bytes
        return call, json.dumps(payload, ensure_ascii=False).encode() if changed else body

    @staticmethod
    def _what_is_stored(call: Call) -> str:
        if not call.stores:  # also False for a body that is no JSON object
            return "none"
        newest = call.newest
        return "turn" if newest is not None and newest.stored else "answer"

    async def _remember_after(self, call: Call, answer: str) -> None:
        """Store what ``X-Memory-Store`` promised: the user's new message (unless it opted
        out) and the answer. A failure is logged: the caller has its answer already."""
        if call.report.store == "none":
            return
        messages = []
        newest = call.newest
        if call.report.store == "turn" and newest is not None:
            messages.append(
                schemas.MessageIn(role="user", content=newest.text, date=_iso(call.asked_at))
            )
        if answer:
            messages.append(
                schemas.MessageIn(role="assistant", content=answer, date=_iso(self._clock()))
            )
        if not messages:
            return
        try:
            await call.vault.ingest(
                schemas.IngestRequest(messages=messages, session_id=call.options.session_id)
            )
        except MemoryRouterError as exc:
            call.report.failed("the turn was not stored", exc)


class Relayed(Response):
    """A provider's answer passed through as it arrives: each chunk goes to the client when
    it comes, and the answer is put together beside it (a stream's events as they end, a
    whole answer's bytes up to the proxy's cap) and stored once it has ended complete and
    the response's end has gone. An answer the provider cuts short is cut short for the
    client too, and stores nothing; so does an answer larger than the cap, which still
    reaches the client whole."""

    def __init__(self, proxy: ChatProxy, call: Call, upstream: httpx2.Response) -> None:
        super().__init__(status_code=upstream.status_code)
        self._proxy = proxy
        self._call = call
        self._upstream = upstream
        self.raw_headers = _downstream_headers(upstream.headers, call.report)
        content_type = upstream.headers.get("content-type", "")
        self._answer = reader_for(content_type, call.format, proxy.max_answer)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        upstream = self._upstream
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        try:
            async for chunk in upstream.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                if self._call.report.store != "none":  # else nothing is put together
                    await self._answer.take(chunk)
        except httpx2.HTTPError as exc:
            log.warning("chat proxy: the provider's answer broke off: %s", type(exc).__name__)
            return  # the client's answer ends without its last chunk, as the provider's did
        except OSError:
            return  # the client went away: nothing complete to store
        finally:
            await upstream.aclose()
        # every byte has reached the client; a client gone now misses only the end
        with contextlib.suppress(OSError):
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        if self._call.report.store == "none":
            return
        answer = await self._answer.text()
        if answer is not None:
            await self._proxy._remember_after(self._call, answer)


def _refusal(refused: MemoryRouterError) -> Response:
    refusal = error_response(refused)
    # a refused body may be unread: the connection is not kept for the next request
    refusal.headers["connection"] = "close"
    return refusal


async def _checked(
    vault: VaultClient,
) -> tuple[schemas.KeyInfo | MemoryRouterError, VaultClient]:
    """The key's check, before the body is read: no key the vault knows, no body read and
    no call relayed. A vault that cannot answer at all is the call's problem to report,
    not a refusal (the call goes on without memory). With it, the client the call's
    prepare uses: in process, it does not look the key up again."""
    try:
        return await vault.admitted()
    except (Unauthorized, InvalidRequest, RateLimited):
        raise
    except MemoryRouterError as exc:
        return exc, vault


async def _prepared(
    vault: VaultClient, asked: schemas.PrepareRequest | None
) -> schemas.PrepareResponse | MemoryRouterError | None:
    """The retrieval, or its error (the vault refuses a prepare itself when the key's mode
    does not retrieve)."""
    if asked is None:
        return None
    try:
        return await vault.prepare(asked)
    except MemoryRouterError as exc:
        return exc


def _prepare_request(chosen: Options, turns: list[Turn]) -> schemas.PrepareRequest:
    return schemas.PrepareRequest(
        messages=[
            schemas.MessageIn(role=t.role, content=t.text) for t in turns[-PREPARE_QUERY_MESSAGES:]
        ],
        session_id=chosen.session_id,
        context_limit=chosen.context_limit,
        tiers=chosen.tiers,
        importance=chosen.importance,
        stored_by=chosen.stored_by,
    )


def _upstream_headers(request: Request, fmt: Format) -> dict[str, str]:
    headers = {
        name: value
        for name, value in request.headers.items()
        if name not in HOP_BY_HOP and name not in OWN_HEADERS
    }
    headers["accept-encoding"] = "identity"
    provider_key = request.headers.get(PROVIDER_KEY)
    if provider_key:
        headers[fmt.provider_key_header] = fmt.provider_key_prefix + provider_key
    return headers


def _downstream_headers(upstream: httpx2.Headers, report: Report) -> list[tuple[bytes, bytes]]:
    """The provider's headers (each as often as it came), then the memory side's."""
    passed = [
        (name.lower(), value)
        for name, value in upstream.multi_items()
        if name.lower() not in HOP_BY_HOP and name.lower() not in OWN_RESPONSE_HEADERS
    ]
    return [
        (name.encode("latin-1"), value.encode("latin-1"))
        for name, value in [*passed, *report.headers().items()]
    ]


def _parsed_object(content: bytes) -> dict[str, Any] | None:
    value = parsed(content)
    return value if isinstance(value, dict) else None


def _iso(seconds: float) -> str:
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
