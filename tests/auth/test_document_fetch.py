"""Fetching a client ID metadata document never leads into this machine or its network, is
sent to the address that was checked, and ends within one deadline and one size cap.

Addresses are resolved by an injected resolver and requests answered by a mock transport or
a real server on loopback: nothing here reaches any other address."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress

import anyio
import httpx2
import pytest
from anyio.abc import SocketStream

from mcp_memoryrouter.auth.server.addresses import Resolver
from mcp_memoryrouter.auth.server.clients import MetadataDocuments

pytestmark = pytest.mark.anyio

REDIRECT = "http://127.0.0.1:7777/callback"


def document(client_id: str) -> bytes:
    body = {"client_id": client_id, "redirect_uris": [REDIRECT], "client_name": "Doc"}
    return json.dumps(body).encode()


class Recorder:
    """A mock transport serving a valid document for any URL asked, recording requests."""

    def __init__(self) -> None:
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        host = request.headers["host"]
        return httpx2.Response(200, content=document(f"https://{host}{request.url.path}"))


def resolving_to(*addresses: str) -> tuple[list[str], Resolver]:
    asked: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        return list(addresses)

    return asked, resolve


@pytest.mark.parametrize(
    "host", ["127.1", "2130706433", "0x7f000001", "0", "0177.0.0.1", "[::ffff:127.0.0.1]"]
)
async def test_loopback_in_any_spelling_is_never_fetched_by_a_public_server(host: str) -> None:
    recorder = Recorder()
    _, resolve = resolving_to("127.0.0.1")
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(recorder)) as http:
        documents = MetadataDocuments(http, allow_loopback=False, resolver=resolve)
        assert await documents.fetch(f"https://{host}/client.json") is None
    assert recorder.requests == []


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.0.0.1",
        "::1",
        "169.254.169.254",
        "::ffff:10.0.0.1",
        "224.0.0.1",
        "100.64.0.1",
        "fec0::1",
        "2002:7f00:1::",
        "fd00::1",
    ],
)
async def test_a_name_resolving_to_a_local_address_is_never_fetched(address: str) -> None:
    recorder = Recorder()
    asked, resolve = resolving_to("93.184.216.34", address)
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(recorder)) as http:
        documents = MetadataDocuments(http, allow_loopback=False, resolver=resolve)
        assert await documents.fetch("https://docs.example/client.json") is None
    assert asked == ["docs.example"] and recorder.requests == []


async def test_the_request_goes_to_the_checked_address_naming_the_host() -> None:
    recorder = Recorder()
    _, resolve = resolving_to("93.184.216.34")
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(recorder)) as http:
        documents = MetadataDocuments(http, allow_loopback=False, resolver=resolve)
        client = await documents.fetch("https://docs.example/client.json")
    assert client is not None and client.client_name == "Doc"
    [sent] = recorder.requests
    assert sent.url.host == "93.184.216.34" and sent.headers["host"] == "docs.example"
    assert sent.extensions["sni_hostname"] == "docs.example"


@pytest.mark.parametrize(
    "url",
    ["https://docs.example:8443/client.json", "https://docs.example:70000/client.json"],
)
async def test_https_documents_are_fetched_on_the_default_port_only(url: str) -> None:
    recorder = Recorder()
    _, resolve = resolving_to("93.184.216.34")
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(recorder)) as http:
        documents = MetadataDocuments(http, allow_loopback=False, resolver=resolve)
        assert await documents.fetch(url) is None
    assert recorder.requests == []


@asynccontextmanager
async def loopback_site(answer: Callable[[SocketStream], Awaitable[None]]) -> AsyncIterator[int]:
    """A raw HTTP server on loopback answering every connection with ``answer(stream)``."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = int(listener.extra(anyio.abc.SocketAttribute.local_port))

    async def handle(stream: SocketStream) -> None:
        async with stream:
            await stream.receive()
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await answer(stream)  # or the client gave up

    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, handle)
        try:
            yield port
        finally:
            group.cancel_scope.cancel()


async def test_a_document_dripped_slowly_is_given_up_at_one_deadline() -> None:
    port_box: list[int] = []

    async def drip(stream: SocketStream) -> None:
        body = document(f"http://127.0.0.1:{port_box[0]}/slow.json")
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        await stream.send(head)
        for i in range(len(body)):  # ~2 s in all, each byte well within any per-read timeout
            await stream.send(body[i : i + 1])
            await anyio.sleep(2 / len(body))

    async with loopback_site(drip) as port, httpx2.AsyncClient() as http:
        port_box.append(port)
        documents = MetadataDocuments(http, allow_loopback=True, deadline=0.3)
        started = time.monotonic()
        with anyio.fail_after(10):
            client = await documents.fetch(f"http://127.0.0.1:{port}/slow.json")
        elapsed = time.monotonic() - started
    assert client is None and elapsed < 1.5


@pytest.mark.parametrize("declared", [True, False])
async def test_a_document_past_the_size_cap_is_refused_without_reading_it_all(
    declared: bool,
) -> None:
    sent: list[int] = []

    async def flood(stream: SocketStream) -> None:
        length = b"Content-Length: 10000000\r\n" if declared else b"Connection: close\r\n"
        await stream.send(b"HTTP/1.1 200 OK\r\n" + length + b"\r\n")
        for _ in range(1000):  # 10 MB at most, stops as soon as the client hangs up
            await stream.send(b" " * 10_000)
            sent.append(10_000)

    async with loopback_site(flood) as port, httpx2.AsyncClient() as http:
        documents = MetadataDocuments(http, allow_loopback=True, size_limit=4096)
        with anyio.fail_after(10):
            assert await documents.fetch(f"http://127.0.0.1:{port}/big.json") is None
    assert sum(sent) < 10_000_000


async def test_a_loopback_server_fetches_a_name_only_when_it_resolves_to_loopback() -> None:
    hosts: list[str] = []

    async def serve(stream: SocketStream) -> None:
        body = document(f"http://client.test:{port_box[0]}/c.json")
        await stream.send(f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)

    port_box: list[int] = []
    async with loopback_site(serve) as port, httpx2.AsyncClient() as http:
        port_box.append(port)
        _, to_loopback = resolving_to("127.0.0.1")
        pinned = MetadataDocuments(http, allow_loopback=True, resolver=to_loopback)
        client = await pinned.fetch(f"http://client.test:{port}/c.json")
        hosts.append("ok" if client is not None else "refused")
        _, to_private = resolving_to("10.0.0.1")
        private = MetadataDocuments(http, allow_loopback=True, resolver=to_private)
        hosts.append(
            "ok" if await private.fetch(f"http://client.test:{port}/c.json") else "refused"
        )
    assert hosts == ["ok", "refused"]
