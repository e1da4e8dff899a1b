"""The routes beyond chat completions that the official clients call: OpenAI's Responses API
with memory (the SDK now steers apps to ``responses.create``), streaming included; model
lists, embeddings and Anthropic's token count passed on without memory; and any other
provider route answered with an error that names the routes served."""

from __future__ import annotations

import time

import httpx2
import openai
import pytest
from openai.types.responses import ResponseTextDeltaEvent

from tests.proxy.upstream import ANSWER
from tests.support import loopback
from tests.support.proxy import Proxied, anthropic_client, google_client, openai_client

FACT = "The spare key to the allotment shed is under the blue watering can"
QUESTION = "Where is the spare key to the shed?"


def stored_after(proxied: Proxied, count: int) -> list[str]:
    deadline = time.monotonic() + 10
    while len(rows := proxied.stored()) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return [r["content"] for r in rows]


def test_responses_gets_memory_in_its_instructions_and_the_turn_is_stored(
    proxied: Proxied,
) -> None:
    proxied.remember(FACT)
    client = openai_client(proxied.url, proxied.key)
    raw = client.responses.with_raw_response.create(
        model="gpt-test", instructions="Answer in one sentence.", input=QUESTION
    )
    assert raw.parse().output_text == ANSWER
    sent = proxied.upstream.last.json
    assert proxied.upstream.last.path == "/v1/responses"
    assert sent["instructions"].startswith("Answer in one sentence.\n\n")
    assert FACT in sent["instructions"]
    assert sent["input"] == QUESTION  # the app's input is not touched
    assert raw.headers["x-memory-store"] == "turn"
    assert stored_after(proxied, 3) == [FACT, QUESTION, ANSWER]


def test_a_streamed_response_is_relayed_and_stored_once_complete(proxied: Proxied) -> None:
    proxied.remember(FACT)
    client = openai_client(proxied.url, proxied.key)
    items = [{"role": "user", "content": [{"type": "input_text", "text": QUESTION}]}]
    stream = client.responses.create(model="gpt-test", input=items, stream=True)  # type: ignore[arg-type]
    deltas = [e.delta for e in stream if isinstance(e, ResponseTextDeltaEvent)]
    assert "".join(deltas) == ANSWER
    sent = proxied.upstream.last.json
    assert FACT in sent["instructions"]
    assert sent["input"] == items
    assert stored_after(proxied, 3) == [FACT, QUESTION, ANSWER]


def test_a_stream_cut_short_stores_nothing(proxied: Proxied) -> None:
    client = openai_client(proxied.url, proxied.key)
    with pytest.raises(openai.APIError):
        for _ in client.responses.create(model="drop", input=QUESTION, stream=True):
            pass
    loopback.quiet(proxied.url)  # the relay has ended: what it stores is stored
    assert proxied.stored() == []


def test_model_lists_embeddings_and_token_counts_pass_through_without_memory(
    proxied: Proxied,
) -> None:
    proxied.remember(FACT)
    oa = openai_client(proxied.url, proxied.key)
    assert [m.id for m in oa.models.list()] == ["gpt-test"]
    assert proxied.upstream.last.headers["authorization"] == "Bearer sk-provider-1"
    vectors = oa.embeddings.create(model="e", input="hello")
    assert vectors.data[0].embedding == [0.25, -0.5]
    assert proxied.upstream.last.json["input"] == "hello"
    claude = anthropic_client(proxied.url, proxied.key)
    assert [m.id for m in claude.models.list()] == ["claude-test"]
    sent = proxied.upstream.last.headers
    assert "sk-ant-provider-1" in (sent.get("x-api-key"), sent.get("authorization", "")[7:])
    for received in proxied.upstream.received:
        assert FACT not in received.body.decode()
    loopback.quiet(proxied.url)
    assert [r["content"] for r in proxied.stored()] == [FACT]  # nothing more stored


def test_passing_through_still_needs_a_memory_key(proxied: Proxied) -> None:
    without = openai_client(proxied.url, None)
    with pytest.raises(openai.AuthenticationError):
        without.models.list()
    assert proxied.upstream.received == []


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/audio/speech"),
        ("POST", "/v1/images/generations"),
        ("POST", "/v1/completions"),
        ("GET", "/v1/files"),
        ("POST", "/v1/messages/batches"),
        ("POST", "/v1beta/models/m:embedContent"),
    ],
)
def test_another_provider_route_is_a_404_naming_the_routes_served(
    proxied: Proxied, method: str, path: str
) -> None:
    answer = httpx2.request(
        method, proxied.url + path, headers={"X-Memory-Key": proxied.key}, json={}, timeout=30
    )
    assert answer.status_code == 404
    error = answer.json()["error"]
    assert error["code"] == "not_found"
    assert "POST /v1/responses" in error["details"]["served"]
    assert proxied.upstream.received == []


def test_google_model_list_passes_through(proxied: Proxied) -> None:
    client = google_client(proxied.url, proxied.key)
    assert [m.name for m in client.models.list()] == ["models/gemini-test"]
    assert proxied.upstream.received[-1].path == "/v1/models"
    assert proxied.upstream.received[-1].headers["x-goog-api-key"] == "g-provider-1"
