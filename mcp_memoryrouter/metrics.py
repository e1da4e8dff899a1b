"""Prometheus metrics at ``/metrics`` (docs/metrics.md), in the text exposition format 0.0.4.

:class:`Metrics` is an ASGI middleware around the whole server. Every HTTP request is counted
(``memoryrouter_http_requests_total{route,method,status}``) and timed until its response ends
(``memoryrouter_http_request_duration_seconds{route,method}``), labelled by the route
*template* it matches (``/v1/keys/{key_id}``), never by its raw path: an id in a path, or a
path no route serves, would make a new series per request (``other`` for those). The
templates are read once from the server's routes (:class:`RouteTemplates`); a request costs a
dictionary lookup (a regular expression or two for a path with an id), two clock reads and a
few integer additions, with no lock: the middleware runs on the event loop, and nothing
between reading and writing a count awaits.

A scrape adds what is read at scrape time: build information, uptime and, when this process
serves a store, one read of every vault at once (:class:`Backlog`: the embedding queue, the
vaults due for consolidation, the debt summed). Who may scrape is :func:`refusal`: whoever
presents the token; with ``MEMORYROUTER_METRICS_OPEN=loopback``, also a client on this
machine that no proxy relayed; nobody else (and nobody at all when neither is set).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from time import perf_counter
from typing import Protocol

import anyio.to_thread
from fastapi.routing import iter_route_contexts
from starlette.routing import BaseRoute, Mount, compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_memoryrouter import __version__
from mcp_memoryrouter.edge.addresses import is_loopback_host
from mcp_memoryrouter.edge.forwarding import relayed
from mcp_memoryrouter.edge.responses import send_bytes

log = logging.getLogger("mcp_memoryrouter.metrics")

PATH = "/metrics"
CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"
OTHER = "other"  # the route of a path no route serves, the method of an unusual one
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# seconds: from a health probe (well under a millisecond) to a chat proxy's stream (minutes)
DURATION_BUCKETS = (
    *(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5),
    *(1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
)
TOKEN_SETTING = "MEMORYROUTER_METRICS_TOKEN"
OPEN_SETTING = "MEMORYROUTER_METRICS_OPEN"
MORE_LABELS = 64  # route templates learned from routers the walk of the routes did not see


class Backlog(Protocol):
    """What a store reports at scrape time (``vault.rules.domain.Backlog``)."""

    @property
    def vaults(self) -> int: ...
    @property
    def consolidation_due(self) -> int: ...
    @property
    def raw_tokens(self) -> int: ...
    @property
    def tier2_importance(self) -> int: ...
    @property
    def pending_embeddings(self) -> int: ...


# --- route templates ----------------------------------------------------------------------


def route_paths(routes: Iterable[BaseRoute], prefix: str = "") -> Iterator[str]:
    """Every route's full path as written (``/v1/keys/{key_id:key_id}``), in matching order:
    mounts walked into, FastAPI's included routers read through ``iter_route_contexts``."""
    for route in routes:
        if isinstance(route, Mount):
            yield from route_paths(route.routes, prefix + route.path)
            continue
        for context in iter_route_contexts([route]):
            if context.path:
                yield prefix + context.path


class RouteTemplates:
    """Path → the template of the first route whose pattern matches it, else ``other``.

    A path without parameters is one dictionary lookup; only a path that is none of those is
    tried against the patterns of the routes with parameters, in their order."""

    def __init__(self, paths: Iterable[str]) -> None:
        self._static: dict[str, str] = {}
        self._dynamic: list[tuple[re.Pattern[str], str]] = []
        seen: set[str] = set()
        for path in paths:
            pattern, template, _ = compile_path(path)  # ``{key_id:key_id}`` → ``{key_id}``
            if template in seen:
                continue
            seen.add(template)
            if "{" in path:
                self._dynamic.append((pattern, template))
            else:
                self._static.setdefault(path, template)

    @property
    def templates(self) -> list[str]:
        return [*self._static.values(), *(template for _, template in self._dynamic)]

    def of(self, path: str) -> str:
        found = self._static.get(path)
        if found is not None:
            return found
        for pattern, template in self._dynamic:
            if pattern.match(path):
                return template
        return OTHER


# --- the counts ---------------------------------------------------------------------------


class Series:
    """One (route, method): its responses by status, and its durations in buckets."""

    __slots__ = ("buckets", "count", "statuses", "total")

    def __init__(self) -> None:
        self.statuses: dict[int, int] = {}
        self.buckets = [0] * (len(DURATION_BUCKETS) + 1)  # the last one: above every bound
        self.count = 0
        self.total = 0.0

    def observe(self, status: int, seconds: float) -> None:
        self.statuses[status] = self.statuses.get(status, 0) + 1
        self.buckets[bisect_left(DURATION_BUCKETS, seconds)] += 1  # le: at most the bound
        self.count += 1
        self.total += seconds


class Requests:
    """The request counters of this process."""

    def __init__(self) -> None:
        self.series: dict[tuple[str, str], Series] = {}

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        key = (route, method)
        series = self.series.get(key)
        if series is None:
            series = self.series[key] = Series()
        series.observe(status, seconds)

    def render(self, out: list[str]) -> None:
        rows = sorted(self.series.items())
        name = "memoryrouter_http_requests_total"
        out.append(f"# HELP {name} HTTP requests answered, by route template, method and status.")
        out.append(f"# TYPE {name} counter")
        for (route, method), series in rows:
            labels = f'route="{escape(route)}",method="{escape(method)}"'
            for status, count in sorted(series.statuses.items()):
                out.append(f'{name}{{{labels},status="{status}"}} {count}')
        name = "memoryrouter_http_request_duration_seconds"
        out.append(f"# HELP {name} Time from a request's arrival to the end of its response.")
        out.append(f"# TYPE {name} histogram")
        for (route, method), series in rows:
            labels = f'route="{escape(route)}",method="{escape(method)}"'
            cumulative = 0
            for bound, count in zip((*DURATION_BUCKETS, None), series.buckets, strict=True):
                cumulative += count
                le = "+Inf" if bound is None else repr(bound)
                out.append(f'{name}_bucket{{{labels},le="{le}"}} {cumulative}')
            out.append(f"{name}_sum{{{labels}}} {series.total!r}")
            out.append(f"{name}_count{{{labels}}} {series.count}")


def escape(value: str) -> str:
    """A label value as the text format writes it."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def gauge(out: list[str], name: str, help_text: str, value: float, labels: str = "") -> None:
    out.append(f"# HELP {name} {help_text}")
    out.append(f"# TYPE {name} gauge")
    out.append(f"{name}{{{labels}}} {value!r}" if labels else f"{name} {value!r}")


# --- who may scrape -----------------------------------------------------------------------


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def refusal(scope: Scope, token: bytes | None, loopback: bool = False) -> tuple[int, str] | None:
    """Why this request may not read /metrics (status, message), or None.

    ``token`` is the SHA-256 of ``MEMORYROUTER_METRICS_TOKEN``: a request carrying
    ``Authorization: Bearer <token>`` (compared in constant time, digest to digest) may, from
    wherever it comes. With ``loopback`` (``MEMORYROUTER_METRICS_OPEN=loopback``) so may a
    client on this machine: a loopback address naming a loopback host, that no proxy relayed
    (forwarding.relayed: a reverse proxy or a tunnel on this machine connects from loopback
    too, on behalf of anyone). With neither, nobody: 403, naming both settings, rather than a
    401 that invites credentials no one could hold, or a 404 that hides a route that is there
    and sends whoever configured a scrape looking for the wrong mistake."""
    headers = scope["headers"]
    if token is not None and bearer_matches(headers, token):
        return None
    host = next((value for name, value in headers if name == b"host"), None)
    if (
        loopback
        and relayed(scope) is None
        and is_loopback_host(None if host is None else host.decode("latin-1"))
    ):
        return None
    if token is not None:
        return 401, f"/metrics needs Authorization: Bearer <{TOKEN_SETTING}>"
    if loopback:
        return 403, (
            f"/metrics answers without a token ({OPEN_SETTING}=loopback) only clients on this "
            f"machine that no proxy relayed; to scrape from elsewhere set {TOKEN_SETTING} and "
            "send Authorization: Bearer <token>"
        )
    return 403, (
        f"/metrics is closed: set {TOKEN_SETTING} and send Authorization: Bearer <token>, or "
        f"set {OPEN_SETTING}=loopback to let a scraper on this machine read it without one "
        "(MEMORYROUTER_METRICS=off removes it)"
    )


def bearer_matches(headers: list[tuple[bytes, bytes]], token: bytes) -> bool:
    """One ``Authorization: Bearer`` header whose credentials hash to ``token``."""
    presented = [value for name, value in headers if name == b"authorization"]
    if len(presented) != 1:
        return False
    scheme, _, credentials = presented[0].partition(b" ")
    digest = hashlib.sha256(credentials.strip()).digest()
    return scheme.lower() == b"bearer" and hmac.compare_digest(digest, token)


# --- the middleware -----------------------------------------------------------------------


class Metrics:
    """``app`` with /metrics, its requests counted by route template.

    ``store`` names the store for ``memoryrouter_build_info`` (``sqlite``, ``postgresql``,
    ``remote``); ``backlog`` reads it at scrape time (blocking: run on a worker thread), None
    when this process serves no store (``MEMORYROUTER_API_URL``). ``token``: the scrape
    token, or None; ``loopback``: clients on this machine may scrape without it
    (:func:`refusal`)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        routes: Iterable[BaseRoute],
        store: str,
        backlog: Callable[[], Backlog] | None,
        token: str | None,
        loopback: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.app = app
        self.routes = RouteTemplates(route_paths(routes))
        # the route labels: every template of ``routes``, and those of routers they reach
        # that the walk does not see (an app behind a middleware), up to a bound
        self._labels = {*self.routes.templates, PATH, OTHER}
        self._most_labels = len(self._labels) + MORE_LABELS
        self.requests = Requests()
        self._store = store
        self._backlog = backlog
        self._token = None if token is None else token_digest(token)
        self._loopback = loopback
        self._started = clock()
        self._started_monotonic = time.monotonic()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = perf_counter()
        app = self.scrape if scope["path"] == PATH else self.app
        root: str = scope.get("root_path", "")
        method: str = scope["method"]
        if method not in METHODS:
            method = OTHER
        status = 0
        ended = False

        async def sending(message: Message) -> None:
            nonlocal status, ended
            if message["type"] == "http.response.start":
                status = message["status"]
                await send(message)
                return
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                ended = True  # the response's end, before any background task of the app
                seconds = perf_counter() - start
                self.requests.observe(self.route_of(scope, root), method, status, seconds)

        try:
            await app(scope, receive, sending)
        finally:  # an app that raised, or a client gone mid-stream: counted as it stood
            if not ended:
                seconds = perf_counter() - start
                self.requests.observe(self.route_of(scope, root), method, status or 500, seconds)

    @property
    def route_labels(self) -> frozenset[str]:
        """Every route label this middleware has used or may use without learning more."""
        return frozenset(self._labels)

    def route_of(self, scope: Scope, root: str) -> str:
        """The template of the route that answered: the one a router chose (Starlette sets
        ``scope["route"]``), with the prefix of the mounts it sits in; else, for a response
        given before any router chose (a rate limit's 429, a CORS preflight), the first route
        whose pattern matches the path; else ``other``."""
        path: str = scope["path"]
        if path == PATH:
            return PATH
        route = scope.get("route")
        if route is not None and not isinstance(route, Mount):
            template = getattr(route, "path_format", None)
            if isinstance(template, str):
                mounted: str = scope.get("root_path", "")
                if mounted != root:
                    template = mounted[len(root) :] + template
                if template in self._labels:
                    return template
                if len(self._labels) < self._most_labels:  # a bound, whatever the routers
                    self._labels.add(template)
                    return template
        if root and path.startswith(root):
            path = path[len(root) :]
        return self.routes.of(path)

    async def scrape(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = refusal(scope, self._token, self._loopback)
        if refused is not None:
            status, message = refused
            headers = [(b"content-type", b"text/plain; charset=utf-8")]
            if status == 401:
                headers.append((b"www-authenticate", b'Bearer realm="metrics"'))
            await send_bytes(send, status, message.encode() + b"\n", headers)
            return
        if scope["method"] != "GET":
            headers = [(b"allow", b"GET"), (b"content-type", b"text/plain; charset=utf-8")]
            await send_bytes(send, 405, b"/metrics answers GET\n", headers)
            return
        body = (await self.exposition()).encode()
        await send_bytes(send, 200, body, [(b"content-type", CONTENT_TYPE)])

    async def exposition(self) -> str:
        """The whole scrape: build, uptime, requests, and the store's gauges read now."""
        out: list[str] = []
        labels = f'version="{escape(__version__)}",store="{escape(self._store)}"'
        gauge(out, "memoryrouter_build_info", "The running version and store; always 1.", 1, labels)
        gauge(
            out,
            "memoryrouter_start_time_seconds",
            "When this server started, in seconds since the epoch.",
            self._started,
        )
        uptime = time.monotonic() - self._started_monotonic
        gauge(out, "memoryrouter_uptime_seconds", "Seconds since this server started.", uptime)
        self.requests.render(out)
        if self._backlog is not None:
            await self._render_store(out, self._backlog)
        out.append("")
        return "\n".join(out)

    async def _render_store(self, out: list[str], read: Callable[[], Backlog]) -> None:
        try:
            backlog = await anyio.to_thread.run_sync(read)
        except Exception as exc:  # a scrape still answers, saying the store did not
            log.warning("reading the store for /metrics failed: %s", type(exc).__name__)
            gauge(out, "memoryrouter_store_up", "Whether the store answered this scrape.", 0)
            return
        gauge(out, "memoryrouter_store_up", "Whether the store answered this scrape.", 1)
        for name, help_text, value in (
            (
                "memoryrouter_embedding_queue_depth",
                "Memories waiting for vectors, across every vault of the store.",
                backlog.pending_embeddings,
            ),
            ("memoryrouter_vaults", "Vaults in the store.", backlog.vaults),
            (
                "memoryrouter_vaults_consolidation_due",
                "Vaults whose reflection debt reached the threshold at either tier.",
                backlog.consolidation_due,
            ),
            (
                "memoryrouter_unconsolidated_raw_tokens",
                "Unconsolidated raw tokens, summed over the vaults.",
                backlog.raw_tokens,
            ),
            (
                "memoryrouter_unconsolidated_tier2_importance",
                "Unconsolidated tier-2 importance, summed over the vaults.",
                backlog.tier2_importance,
            ),
        ):
            gauge(out, name, help_text, value)
