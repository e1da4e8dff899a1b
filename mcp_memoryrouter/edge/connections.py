"""The connections ``serve`` accepts, and what it believes about where they come from.

uvicorn, left to its defaults, waits for a request head for ever, accepts connections until
the process runs out of file descriptors (and then logs a traceback for every failed
``accept()``), and rewrites a request's client address from ``X-Forwarded-For`` sent by any
loopback peer. Here, instead:

- a connection has ``head_seconds`` to send a whole request head, from its first byte or
  from the end of its previous response, and then ``body_seconds`` for the body (plus
  :data:`BODY_GRACE_SECONDS`, so that the REST API and the chat proxy, which keep the same
  deadline, answer first in their error envelope); past either it is closed, with a 408
  when it had sent part of a request (RFC 9110 §15.5.9);
- at most ``most`` connections are open at once: a new one past that closes the oldest
  connection still waiting for a request head, so idle or trickling connections cannot
  crowd out a load balancer's ``/healthz`` (nor any real request); the soft limit of open
  files is raised to the hard one at start, and the cap kept below it;
- ``accept()`` failing for want of descriptors or memory is one warning a minute, not a
  traceback per attempt;
- forwarding headers name the client only when the connection comes from a proxy in
  ``trusted_proxies`` (``MEMORYROUTER_TRUSTED_PROXIES``), by uvicorn's own middleware; with
  none named, uvicorn's proxy headers are off and every per-address rule (the OAuth limits,
  the REST limit without a key, the explorer's sign-in, /metrics) sees the peer's address.

:class:`Doorway` keeps the open connections of one server; :class:`GuardedH11` is uvicorn's
h11 protocol with the deadlines and the doorway; :func:`run` serves an app with both.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import logging
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import uvicorn
from starlette.types import ASGIApp
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

log = logging.getLogger("mcp_memoryrouter.edge")

RESERVED_FILES = 256  # descriptors kept for the store, upstream calls, logs and the rest
MOST_ACCEPTED_AT_ONCE = 2048  # uvicorn's listen backlog, and what asyncio accepts in one go
# RFC 9110 §15.5.9: a server closing a connection that did not finish its request says so
_TIMEOUT_TEXT = b"The request did not arrive in time: send it whole, at once.\n"
REQUEST_TIMEOUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(_TIMEOUT_TEXT), _TIMEOUT_TEXT)
)
# The REST API and the chat proxy answer a stalled body with 408 in the error envelope at the
# body deadline themselves; the connection's own deadline comes this much later, for the rest
BODY_GRACE_SECONDS = 2.0
RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
SETTING = "MEMORYROUTER_MAX_CONNECTIONS"


@dataclass(frozen=True)
class ConnectionLimits:
    """Seconds to a whole request head and then to a whole body; open connections at once."""

    head_seconds: float
    body_seconds: float
    most: int


class Sparing:
    """A warning logged when it first happens, then at most once every ``seconds`` with the
    count of those not logged in between: a flood of one failure is a line a minute."""

    def __init__(self, seconds: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._seconds = seconds
        self._clock = clock
        self._last: dict[str, float] = {}
        self._unlogged: dict[str, int] = {}

    def warning(self, what: str, message: str) -> bool:
        """Log ``message`` unless ``what`` was logged less than ``seconds`` ago; True if
        it was logged."""
        now = self._clock()
        last = self._last.get(what)
        if last is not None and now - last < self._seconds:
            self._unlogged[what] = self._unlogged.get(what, 0) + 1
            return False
        unlogged = self._unlogged.pop(what, 0)
        self._last[what] = now
        more = f" ({unlogged} more since the last such line)" if unlogged else ""
        log.warning("%s%s", message, more)
        return True


class Doorway:
    """The open connections of one server, and those waiting for a request head in the
    order they began to wait (the first is the one to close when a new one needs room)."""

    def __init__(self, limits: ConnectionLimits, sparing: Sparing | None = None) -> None:
        self.limits = limits
        self.open: set[GuardedH11] = set()
        self.waiting: dict[GuardedH11, None] = {}  # insertion order: longest waiting first
        self.closed_for_room = 0
        self._sparing = sparing or Sparing()

    def admit(self, connection: GuardedH11) -> bool:
        """Room for ``connection``, closing the longest-waiting idle one if need be; False
        when every open connection is busy with a request (the new one is to be closed)."""
        if len(self.open) >= self.limits.most:
            oldest = next(iter(self.waiting), None)
            if oldest is None:
                self._sparing.warning(
                    "full",
                    f"{len(self.open)} connections open and every one busy with a request: "
                    f"new connections are closed ({SETTING} raises the cap)",
                )
                return False
            self.closed_for_room += 1
            oldest.close_for_room()
        self.open.add(connection)
        return True

    def waits(self, connection: GuardedH11) -> None:
        self.waiting.pop(connection, None)
        self.waiting[connection] = None  # the newest waiter

    def works(self, connection: GuardedH11) -> None:
        self.waiting.pop(connection, None)

    def leaves(self, connection: GuardedH11) -> None:
        self.waiting.pop(connection, None)
        self.open.discard(connection)


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with deadlines for a request's head and body, admitted by a
    :class:`Doorway` (``doorway`` is set on the subclass :func:`protocol_for` makes)."""

    doorway: ClassVar[Doorway]

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if not self.doorway.admit(self):
            transport.close()
            return
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.doorway.leaves(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        before = self.cycle
        super().data_received(data)
        self._after_events(before)

    def on_response_complete(self) -> None:
        self._disarm()
        before = self.cycle
        super().on_response_complete()  # may start a pipelined request at once
        if self.transport.is_closing():
            return
        if self.cycle is before:
            self._await_head()
        else:
            self._after_events(before)

    def close_for_room(self) -> None:
        """Closed to admit a newer connection (it had sent no whole request head)."""
        self.doorway.leaves(self)
        self._disarm()
        self.transport.close()

    # --- the deadlines -----------------------------------------------------------------

    def _await_head(self) -> None:
        self.doorway.waits(self)
        self._arm(self.doorway.limits.head_seconds, self._head_timed_out)

    def _after_events(self, before: object) -> None:
        cycle = self.cycle
        if cycle is None or self.transport.is_closing():
            return
        if cycle is not before:  # a whole head arrived: a request is under way
            self.doorway.works(self)
            self._disarm()
            if cycle.more_body:
                self._arm(self.doorway.limits.body_seconds, self._body_timed_out)
        elif not cycle.more_body and self._deadline is not None and not cycle.response_complete:
            self._disarm()  # the body is whole

    def _head_timed_out(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self.conn.trailing_data[0]:  # part of a head arrived: say why it ends
            self.transport.write(REQUEST_TIMEOUT)
        self.transport.close()

    def _body_timed_out(self) -> None:
        self._deadline = None
        cycle = self.cycle
        if cycle is None or self.transport.is_closing():
            return
        if not cycle.response_started:
            self.transport.write(REQUEST_TIMEOUT)
        cycle.disconnected = True  # the app's receive() says so, and its sends go nowhere
        cycle.message_event.set()
        self.transport.close()

    def _arm(self, seconds: float, then: Callable[[], None]) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, then)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None


def protocol_for(doorway: Doorway) -> type[GuardedH11]:
    """The protocol class uvicorn instantiates per connection, bound to ``doorway``."""

    class Bound(GuardedH11):
        pass

    Bound.doorway = doorway
    return Bound


# --- the process ----------------------------------------------------------------------------


def raise_open_file_limit() -> int:
    """Raise the soft limit of open files to the hard one; the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):  # an unlimited hard limit some systems refuse as soft
            pass
    return soft if soft != resource.RLIM_INFINITY else 1 << 30


@dataclass(frozen=True)
class Room:
    """What the open-file limit leaves: connections open at once, and the listen backlog
    (also how many connections asyncio accepts in one go, each a descriptor)."""

    connections: int
    backlog: int


def room_for(wanted: int, open_files: int) -> Room:
    """``wanted`` connections, fewer if the open-file limit cannot hold them beside a
    backlog's worth being accepted and :data:`RESERVED_FILES` for the rest of the process."""
    backlog = min(MOST_ACCEPTED_AT_ONCE, max(64, open_files // 4))
    return Room(max(16, min(wanted, open_files - RESERVED_FILES - backlog)), backlog)


def trusted_forms(
    proxies: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network],
) -> list[str]:
    """The proxies as uvicorn matches a peer against them: an IPv4 one also as the
    IPv4-mapped IPv6 network a dual-stack socket (``MEMORYROUTER_HOST=::``) reports."""
    forms = []
    for network in proxies:
        forms.append(str(network))
        if isinstance(network, ipaddress.IPv4Network):
            forms.append(f"::ffff:{network.network_address}/{96 + network.prefixlen}")
    return forms


def spare_accept_failures(loop: asyncio.AbstractEventLoop, sparing: Sparing) -> None:
    """An ``accept()`` failing for want of descriptors or memory: a warning a minute instead
    of asyncio's traceback per attempt (it retries every 100 ms or so, hundreds at a time)."""
    default = loop.get_exception_handler()

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in RESOURCE_ERRNOS and "socket" in context:
            sparing.warning(
                "accept",
                f"cannot accept connections: {type(exc).__name__} ({exc.strerror}); "
                f"raise the open-file limit or lower {SETTING}",
            )
            return
        if default is None:
            loop.default_exception_handler(context)
        else:
            default(loop, context)

    loop.set_exception_handler(handle)


def run(
    app: ASGIApp,
    *,
    host: str,
    port: int,
    limits: ConnectionLimits,
    trusted_proxies: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network],
) -> None:
    """Serve ``app`` on ``host:port`` until a signal stops it."""
    open_files = raise_open_file_limit()
    room = room_for(limits.most, open_files)
    if room.connections < limits.most:
        log.warning(
            "at most %d connections at once, not %d: the open-file limit is %d (%s)",
            room.connections,
            limits.most,
            open_files,
            SETTING,
        )
    sparing = Sparing()
    body_seconds = limits.body_seconds + BODY_GRACE_SECONDS
    guarded = ConnectionLimits(limits.head_seconds, body_seconds, room.connections)
    doorway = Doorway(guarded, sparing)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="info",
        http=protocol_for(doorway),
        ws="none",  # nothing here speaks WebSocket
        backlog=room.backlog,
        proxy_headers=bool(trusted_proxies),
        forwarded_allow_ips=trusted_forms(trusted_proxies),
    )
    server = uvicorn.Server(config)

    async def serve() -> None:
        spare_accept_failures(asyncio.get_running_loop(), sparing)
        await server.serve()

    asyncio.run(serve())
