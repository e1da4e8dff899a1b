"""Real uvicorn servers on loopback, kept for the whole session and lent to one app at a time.

Starting a uvicorn costs little; stopping one costs 0.2 s (its main loop looks for the exit
flag every 0.1 s, and its shutdown waits 0.1 s more for connections to close), and a test that
starts three pays that three times. So each process keeps its servers: a test borrows one,
mounts its app (with the app's lifespan run, startup and shutdown, when asked), and gives it
back; giving it back ends the app's lifespan, closes every connection (letting a response in
flight finish, as uvicorn's own shutdown does) and unmounts the app. A request to a server
that is not lent gets a 503. A server is not lent again right after it is given back: a test
that restarts a server gets a new port, as a new process would. Each borrowing is still a
real socket, a real HTTP/1.1 server and the app's own lifespan; only the port is reused.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, Literal

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

DRAIN_SECONDS = 10.0  # what a server of the test's own waited for its thread when stopping


class _Lifespan:
    """An app's lifespan (ASGI lifespan protocol), run on the server's event loop."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.state: dict[str, Any] = {}
        self._to_app: asyncio.Queue[Message] = asyncio.Queue()
        self._from_app: asyncio.Queue[Message] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def _answer(self, expected: str) -> None:
        assert self._task is not None
        answer = asyncio.ensure_future(self._from_app.get())
        await asyncio.wait({answer, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if not answer.done():
            answer.cancel()
            self._task.result()  # the app's own error, if it raised one
            raise RuntimeError(f"the app ended its lifespan without {expected}")
        message = answer.result()
        if message["type"] != expected:
            raise RuntimeError(f"lifespan: {message['type']}: {message.get('message', '')}")

    async def startup(self) -> None:
        scope = {
            "type": "lifespan",
            "asgi": {"version": "3.0", "spec_version": "2.0"},
            "state": self.state,
        }
        self._task = asyncio.create_task(
            self.app(scope, self._to_app.get, self._from_app.put)  # type: ignore[arg-type]
        )
        await self._to_app.put({"type": "lifespan.startup"})
        await self._answer("lifespan.startup.complete")

    async def shutdown(self) -> None:
        assert self._task is not None
        await self._to_app.put({"type": "lifespan.shutdown"})
        await self._answer("lifespan.shutdown.complete")
        await self._task


class _Server(uvicorn.Server):
    """A uvicorn that says which event loop it runs on."""

    loop: asyncio.AbstractEventLoop

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self.loop = asyncio.get_running_loop()
        await super().serve(sockets)


class Slot:
    """One uvicorn bound to a loopback port; ``url`` is known before any app is mounted."""

    def __init__(self) -> None:
        self.app: ASGIApp | None = None
        self.state: dict[str, Any] = {}
        # IPPROTO_TCP named, or asyncio leaves Nagle on for the accepted connections (it sets
        # TCP_NODELAY only on sockets whose proto says TCP), and every response written in two
        # parts waits out the client's delayed ACK: 40 ms a request
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        config = uvicorn.Config(
            self._dispatch, log_level="warning", lifespan="off", interface="asgi3"
        )
        self._server = _Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start within 10 s")
            time.sleep(0.005)

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self.app
        if app is None:
            await send({"type": "http.response.start", "status": 503, "headers": []})
            await send({"type": "http.response.body", "body": b"no app on this server"})
            return
        await app({**scope, "state": dict(self.state)}, receive, send)

    def _run(self, coroutine: Any) -> Any:
        done: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self._server.loop)
        return done.result(timeout=30)

    @contextmanager
    def serving(self, app: ASGIApp, *, lifespan: Literal["on", "off"] = "off") -> Iterator[str]:
        """``app`` on this server (its lifespan run when ``lifespan`` is on) until the end."""
        assert self.app is None, "this server is lent already"
        span = _Lifespan(app) if lifespan == "on" else None
        if span is not None:
            self._run(span.startup())
            self.state = span.state
        self.app = app
        _lent[self.url] = self
        try:
            yield self.url
        finally:
            _lent.pop(self.url, None)
            try:
                if span is not None:
                    self._run(span.shutdown())
            finally:
                self._run(self._drain())
                self.app = None
                self.state = {}

    def quiet(self, seconds: float) -> None:
        """Once no request is in flight: every ASGI call the server began has returned."""
        self._run(self._quiet(seconds))

    async def _quiet(self, seconds: float) -> None:
        tasks = self._server.server_state.tasks
        deadline = time.monotonic() + seconds
        while tasks:
            assert time.monotonic() < deadline, f"requests still running after {seconds} s"
            await asyncio.sleep(0.002)

    async def _drain(self) -> None:
        """Close every connection, as a stopping uvicorn does: idle ones now, busy ones once
        their response is sent; after ``DRAIN_SECONDS``, whatever still runs is cancelled."""
        state = self._server.server_state
        for connection in list(state.connections):
            connection.shutdown()
        deadline = time.monotonic() + DRAIN_SECONDS
        while (state.connections or state.tasks) and time.monotonic() < deadline:
            await asyncio.sleep(0.002)
        for task in list(state.tasks):
            task.cancel()
        for connection in list(state.connections):
            transport = getattr(connection, "transport", None)
            if transport is not None:
                transport.close()

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()


_idle: list[Slot] = []
_lent: dict[str, Slot] = {}  # by URL
_lock = threading.Lock()


def quiet(url: str, seconds: float = 10.0) -> None:
    """Wait until the server lent at ``url`` has no request in flight: what an app does
    after its response has gone (a proxied turn stored, a background task) is done then."""
    _lent[url].quiet(seconds)


@contextmanager
def borrowed() -> Iterator[Slot]:
    """A server of the process's pool (a new one when every one is lent), given back after."""
    with _lock:
        # the oldest idle server, never the one given back last: a server started again
        # listens on a new port, and a test may count on that (a new port, a new issuer)
        slot = _idle.pop(0) if len(_idle) > 1 else None
    if slot is None:
        slot = Slot()
    try:
        yield slot
    finally:
        if slot.app is None:
            with _lock:
                _idle.append(slot)
        else:  # still serving: never lend it again
            slot.close()


def close_all() -> None:
    """Stop every idle server (at the end of the session)."""
    with _lock:
        slots, _idle[:] = list(_idle), []
    for slot in slots:
        slot.close()


@contextmanager
def live_server(app: ASGIApp, *, lifespan: Literal["on", "off"] = "off") -> Iterator[str]:
    """Run ``app`` on a real uvicorn on an ephemeral loopback port; its base URL."""
    with borrowed() as slot, slot.serving(app, lifespan=lifespan) as url:
        yield url
