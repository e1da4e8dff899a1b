"""What the chat proxy refuses, what it passes through untouched, and what it never keeps:
modes that store nothing, provider errors and broken streams, a vault that is down, keys
that may not store, the provider's key, metering and rate limits."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import httpx2
import openai
import pytest

from mcp_memoryrouter.app import create_server
from mcp_memoryrouter.tokens import est_tokens
from tests.proxy.upstream import ANSWER, Upstream
from tests.support import free_port, live_server
from tests.support.proxy import (
    CALLS,
    FACT,
    PROVIDER_KEY,
    QUESTION,
    Proxied,
    call,
    settings_for,
)


def direct(proxied: Proxied, fmt: str, model: str) -> httpx2.Response:
    path, body = CALLS[fmt]
    if fmt == "google":
        path = path.replace("/m:", f"/{model}:")
    else:
        body = {**body, "model": model}
    return httpx2.post(proxied.upstream_url + path, json=body, timeout=30)


# --- modes and keys -----------------------------------------------------------------------


def test_read_mode_retrieves_but_stores_nothing(proxied: Proxied) -> None:
    proxied.remember(FACT)
    response = call(proxied, "openai", headers={"X-Memory-Mode": "read"})
    assert response.status_code == 200
    assert FACT in json.dumps(proxied.upstream.last.json)
    assert response.headers["x-memory-mode"] == "read"
    assert response.headers["x-memory-store"] == "none"
    assert [m["content"] for m in proxied.settled(1)] == [FACT]


@pytest.mark.parametrize("fmt", sorted(CALLS))
def test_off_mode_neither_retrieves_nor_stores(proxied: Proxied, fmt: str) -> None:
    proxied.remember(FACT)
    response = call(proxied, fmt, stream=True, headers={"X-Memory-Mode": "off"})
    assert response.status_code == 200
    assert response.headers["x-memory-status"] == "off"
    assert FACT not in json.dumps(proxied.upstream.last.json)
    assert response.headers["x-memory-store"] == "none"
    assert [m["content"] for m in proxied.settled(1)] == [FACT]


def test_write_mode_and_key_suffixes(proxied: Proxied) -> None:
    proxied.remember(FACT)
    written = call(proxied, "anthropic", headers={"X-Memory-Mode": "write"})
    assert written.headers["x-memory-memories-retrieved"] == "0"
    assert FACT not in json.dumps(proxied.upstream.last.json)
    assert written.headers["x-memory-store"] == "turn"
    proxied.stored_after(3)
    # mk_…:read is the same vault, retrieving only
    read = call(proxied, "anthropic", key=proxied.key + ":read")
    assert FACT in json.dumps(proxied.upstream.last.json)
    assert read.headers["x-memory-store"] == "none"
    proxied.settled(3)


def test_a_read_only_key_cannot_store(proxied: Proxied) -> None:
    proxied.remember(FACT)
    read_only = proxied.vault("POST", "/v1/keys", json={"read_only": True})["key"]
    response = call(proxied, "google", key=read_only)
    assert response.status_code == 200
    assert FACT in json.dumps(proxied.upstream.last.json)
    assert response.headers["x-memory-store"] == "none"
    assert [m["content"] for m in proxied.settled(1)] == [FACT]


def test_a_missing_or_unknown_memory_key_is_refused_before_the_provider_is_called(
    proxied: Proxied,
) -> None:
    for key in (None, "mk_" + "x" * 40):
        response = call(proxied, "openai", key=key)
        assert response.status_code == 401
        error = response.json()["error"]
        assert error["code"] == "unauthorized"
        assert "X-Memory-Key" in error["message"] or "key" in error["message"]
    assert proxied.upstream.received == []


def test_a_bad_option_header_is_refused_naming_it(proxied: Proxied) -> None:
    for header, value in [
        ("X-Memory-Mode", "sometimes"),
        ("X-Context-Limit", "500"),
        ("X-Memory-Tiers", "1,4"),
        ("X-Memory-Importance", "high"),
    ]:
        response = call(proxied, "openai", headers={header: value})
        assert response.status_code == 400
        assert response.json()["error"]["details"]["field"] == header
        assert header in response.json()["error"]["message"]
    assert proxied.upstream.received == []


def test_options_reach_prepare(proxied: Proxied) -> None:
    proxied.remember(FACT, "My dog Biscuit was adopted in 2019 from a shelter in Hove")
    wide = call(proxied, "openai")
    narrow = call(proxied, "openai", headers={"X-Context-Limit": "1", "X-Memory-Tiers": "2,3"})
    assert int(wide.headers["x-memory-memories-retrieved"]) >= 2
    assert narrow.headers["x-memory-memories-retrieved"] == "0"  # no reflections yet


def test_a_message_that_opts_out_is_stripped_and_not_stored(proxied: Proxied) -> None:
    secret = "my bank PIN is 4411, what is my dog called?"
    body = {"model": "m", "messages": [{"role": "user", "content": secret, "memory": False}]}
    response = call(proxied, "openai", body=body)
    assert response.status_code == 200
    assert proxied.upstream.last.json["messages"][-1] == {"role": "user", "content": secret}
    assert response.headers["x-memory-store"] == "answer"
    assert [m["content"] for m in proxied.stored_after(1)] == [ANSWER]
    proxied.settled(1)


def test_a_tool_result_turn_stores_only_the_answer(proxied: Proxied) -> None:
    messages = [
        {"role": "user", "content": QUESTION},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "Biscuit"},
    ]
    response = call(proxied, "openai", body={"model": "m", "messages": messages})
    assert response.headers["x-memory-store"] == "answer"
    assert [m["role"] for m in proxied.stored_after(1)] == ["assistant"]
    proxied.settled(1)


def test_x_provider_key_goes_where_each_provider_expects_it(proxied: Proxied) -> None:
    for fmt, header, value in [
        ("openai", "authorization", "Bearer pk-1"),
        ("anthropic", "x-api-key", "pk-1"),
        ("google", "x-goog-api-key", "pk-1"),
    ]:
        path, body = CALLS[fmt]
        httpx2.post(
            proxied.url + path,
            json=body,
            headers={"X-Memory-Key": proxied.key, "X-Provider-Key": "pk-1"},
            timeout=30,
        )
        assert proxied.upstream.last.headers[header] == value
        assert "x-provider-key" not in proxied.upstream.last.headers


# --- provider errors and broken streams ---------------------------------------------------


@pytest.mark.parametrize("fmt", sorted(CALLS))
@pytest.mark.parametrize("status", [400, 429, 500])
def test_provider_errors_reach_the_client_as_sent_and_store_nothing(
    proxied: Proxied, fmt: str, status: int
) -> None:
    expected = direct(proxied, fmt, f"fail-{status}")
    response = call(proxied, fmt, model=f"fail-{status}")
    assert response.status_code == expected.status_code == status
    assert response.content == expected.content
    assert response.headers.get("retry-after") == expected.headers.get("retry-after")
    assert response.headers["x-memory-store"] == "none"
    assert proxied.settled(0) == []


def test_the_official_client_sees_the_providers_error(proxied: Proxied) -> None:
    client = openai.OpenAI(
        base_url=proxied.url + "/v1",
        api_key=PROVIDER_KEY,
        default_headers={"X-Memory-Key": proxied.key},
        max_retries=0,
    )
    with pytest.raises(openai.RateLimitError) as raised:
        client.chat.completions.create(
            model="fail-429", messages=[{"role": "user", "content": QUESTION}]
        )
    assert raised.value.status_code == 429
    assert "upstream says 429" in str(raised.value)


@pytest.mark.parametrize("fmt", sorted(CALLS))
def test_a_dropped_stream_is_dropped_for_the_client_and_stores_no_half_turn(
    proxied: Proxied, fmt: str
) -> None:
    with pytest.raises(httpx2.RemoteProtocolError):
        call(proxied, fmt, model="drop", stream=True)
    assert proxied.settled(0) == []


def test_an_unreachable_provider_is_a_502_naming_it(tmp_path: Path) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    server = create_server(settings_for(tmp_path, nowhere))
    assert server.service is not None
    key, _ = server.service.create_vault()
    with live_server(server.app, lifespan="on") as url:
        response = httpx2.post(
            url + "/v1/messages",
            json=CALLS["anthropic"][1],
            headers={"X-Memory-Key": key, "x-api-key": PROVIDER_KEY},
            timeout=30,
        )
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "transport_failure"
    assert nowhere in error["message"]
    assert PROVIDER_KEY not in response.text


def test_a_body_over_the_limit_is_413(tmp_path: Path, upstream: tuple[Upstream, str]) -> None:
    double, upstream_url = upstream
    server = create_server(settings_for(tmp_path, upstream_url, proxy_max_body_bytes=4096))
    assert server.service is not None
    key, _ = server.service.create_vault()
    big = {"model": "m", "messages": [{"role": "user", "content": "x" * 5000}]}
    with live_server(server.app, lifespan="on") as url:
        response = httpx2.post(
            url + "/v1/chat/completions", json=big, headers={"X-Memory-Key": key}, timeout=30
        )
    assert response.status_code == 413
    assert response.json()["error"]["details"]["max_bytes"] == 4096
    assert double.received == []


# --- the memory side failing --------------------------------------------------------------


@pytest.fixture
def vault_down(tmp_path: Path, upstream: tuple[Upstream, str]) -> Iterator[Proxied]:
    """The proxy in front of a vault that does not answer (a remote vault, unreachable)."""
    double, upstream_url = upstream
    settings = settings_for(tmp_path, upstream_url, api_url=f"http://127.0.0.1:{free_port()}")
    server = create_server(settings)
    assert server.service is None
    with live_server(server.app, lifespan="on") as url:
        yield Proxied(url, "mk_" + "a" * 43, server.service, double, upstream_url)  # type: ignore[arg-type]


@pytest.mark.parametrize("stream", [False, True])
def test_the_vault_down_the_call_still_answers_and_says_so(
    vault_down: Proxied, stream: bool
) -> None:
    response = call(vault_down, "openai", stream=stream)
    assert response.status_code == 200
    assert "Biscuit" in response.text
    assert response.headers["x-memory-status"] == "unavailable"
    assert "cannot reach the vault" in response.headers["x-memory-problem"]
    assert vault_down.upstream.last.json == CALLS["openai"][1] | {"model": "m"} | (
        {"stream": True} if stream else {}
    )


# --- secrets, metering, limits ------------------------------------------------------------


def test_the_provider_key_is_in_no_log_no_row_and_no_response_header(
    proxied: Proxied, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    proxied.remember(FACT)
    responses = [
        call(proxied, "openai"),
        call(proxied, "anthropic", stream=True),
        call(proxied, "google", model="fail-500"),
        call(proxied, "google", stream=True),
    ]
    rows = proxied.stored_after(7)  # the fact and three turns, stored
    # the key went to the provider on every call...
    assert all(PROVIDER_KEY in json.dumps(r.headers) for r in proxied.upstream.received)
    for response in responses:
        assert PROVIDER_KEY not in str(response.headers)
        assert PROVIDER_KEY not in response.text
    assert PROVIDER_KEY not in caplog.text
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert PROVIDER_KEY.encode() not in path.read_bytes(), path
    assert PROVIDER_KEY not in json.dumps(rows)


def test_metering_counts_what_was_injected_and_what_was_stored(proxied: Proxied) -> None:
    proxied.remember(FACT)
    before = proxied.vault("GET", "/v1/usage")["by_endpoint"]
    response = call(proxied, "openai")
    proxied.stored_after(3)
    after = proxied.vault("GET", "/v1/usage")["by_endpoint"]
    injected = int(response.headers["x-memory-tokens-injected"])
    assert injected > 0
    assert (
        after["prepare"]["retrieval_tokens"] - before.get("prepare", {}).get("retrieval_tokens", 0)
        == injected
    )
    grew = after["ingest"]["storage_tokens"] - before["ingest"]["storage_tokens"]
    assert grew == est_tokens(QUESTION) + est_tokens(ANSWER)


def test_a_key_over_its_rate_limit_is_told_when_to_retry(
    tmp_path: Path, upstream: tuple[Upstream, str]
) -> None:
    double, upstream_url = upstream
    settings = settings_for(tmp_path, upstream_url, rate_limit_per_minute=3, rate_limit_burst=3)
    server = create_server(settings)
    assert server.service is not None
    key, _ = server.service.create_vault()
    with live_server(server.app, lifespan="on") as url:
        statuses = []
        for _ in range(3):
            response = httpx2.post(
                url + "/v1/chat/completions",
                json=CALLS["openai"][1],
                headers={"X-Memory-Key": key},
                timeout=30,
            )
            statuses.append(response.status_code)
    # a call takes what its vault requests take: prepare, then ingest
    assert statuses[:1] == [200]
    assert statuses[-1] == 429
    assert int(response.headers["retry-after"]) >= 1
    assert response.json()["error"]["code"] == "rate_limited"
    assert len(double.received) == statuses.count(200)


def test_a_local_server_without_keys_answers_only_to_its_own_names(
    tmp_path: Path, upstream: tuple[Upstream, str]
) -> None:
    """With MEMORYROUTER_AUTH=none a call without a key acts with the local vault's: a page
    on another name that resolves here (DNS rebinding) must not reach it, nor the provider."""
    double, upstream_url = upstream
    server = create_server(settings_for(tmp_path, upstream_url, auth="none"))
    body = {"model": "m", "messages": [{"role": "user", "content": "what do you know?"}]}
    with live_server(server.app, lifespan="on") as url:
        forged = httpx2.post(
            url + "/v1/chat/completions",
            json=body,
            headers={"Host": "attacker.example:8787", "Authorization": "Bearer sk-attacker"},
        )
        assert forged.status_code == 421
        assert forged.json()["error"]["code"] == "misdirected_request"
        assert "MEMORYROUTER_ALLOWED_HOSTS" in forged.json()["error"]["message"]
        assert double.received == []
        own = httpx2.post(
            url + "/v1/chat/completions", json=body, headers={"Authorization": "Bearer sk-1"}
        )
        assert own.status_code == 200, own.text
        assert len(double.received) == 1
