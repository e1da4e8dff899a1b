"""The official client libraries of OpenAI, Anthropic and Google pointed at the chat proxy,
non-streaming and streaming, in front of a provider double over real HTTP.

Each test makes the same call twice, once straight to the provider double and once through
the proxy, and compares what the provider received (the memory block where the format keeps
instructions, and nothing else changed) and what the client got back (the provider's own
bytes). Then the turn is in the vault (stored once the response has gone), and the debt
header is the vault's own debt as the call found it (GET /v1/memory/stats).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx2
from google.genai import types

from tests.proxy.upstream import ANSWER
from tests.support.proxy import Proxied, anthropic_client, google_client, openai_client

FACT = "My dog is called Biscuit and he loves the beach at Brighton"
QUESTION = "What is my dog called again?"


def without_memory(fmt: str, body: dict[str, Any], context: str) -> dict[str, Any]:
    """``body`` with the memory block the proxy put in taken out again."""
    body = copy.deepcopy(body)
    if fmt == "openai":
        body["messages"] = [m for m in body["messages"] if m.get("content") != context]
    elif fmt == "anthropic":
        system = body["system"]
        if isinstance(system, list):
            assert system[-1] == {"type": "text", "text": context}
            system.pop()
        elif system == context:
            del body["system"]
        else:
            assert system.endswith("\n\n" + context)
            body["system"] = system.removesuffix("\n\n" + context)
    else:
        parts = body["systemInstruction"]["parts"]
        assert parts[-1] == {"text": context}
        parts.pop()
        if not parts:
            del body["systemInstruction"]
    return body


def injected(proxied: Proxied) -> str:
    """The context block the vault gives for the question (what the proxy must inject)."""
    body = {"messages": [{"role": "user", "content": QUESTION}]}
    context: str = proxied.vault("POST", "/v1/memory/prepare", json=body)["context"]
    assert FACT in context
    return context


def assert_turn_stored(
    proxied: Proxied, question: str = QUESTION, session: str | None = None, before: int = 1
) -> None:
    rows = proxied.stored_after(before + 2)
    assert [(r["role"], r["content"]) for r in rows[-2:]] == [
        ("user", question),
        ("assistant", ANSWER),
    ]
    assert rows[-2]["date"] <= rows[-1]["date"]
    if session is not None:
        found = proxied.vault(
            "POST", "/v1/memory/search", json={"query": "Biscuit beach", "session_id": session}
        )
        assert ANSWER in [m["content"] for m in found["memories"]]


# What a hop changes (RFC 9110 §7.6.1, and the length of a body with memory in it); the
# proxy asks for identity encoding so the client's bytes are the provider's.
HOP = {"host", "connection", "content-length", "accept-encoding"}


def assert_headers_passed(direct: dict[str, str], relayed: dict[str, str]) -> None:
    """Every header the client sends reaches the provider unchanged (the provider's key
    among them), and none of the memory side's does."""
    # the SDKs own: timeouts, and a flag that the caller asked for the raw response
    volatile = HOP | {"x-stainless-read-timeout", "x-stainless-timeout"}
    volatile.add("x-stainless-raw-response")
    assert {k: v for k, v in relayed.items() if k not in volatile} == {
        k: v for k, v in direct.items() if k not in volatile
    }
    assert relayed["accept-encoding"] == "identity"
    assert not [k for k in relayed if k.startswith("x-memory") or k == "x-session-id"]


def assert_debt_matches(stats: dict[str, Any], header: str) -> None:
    debt = json.loads(header)
    raw, tier2 = stats["unconsolidated"]["raw"], stats["unconsolidated"]["tier2"]
    assert debt == {
        "raw_units": raw["units"],
        "raw_tokens": raw["est_tokens"],
        "raw_importance_equiv": raw["importance_equiv"],
        "t2_count": tier2["count"],
        "t2_importance": tier2["importance"],
        "t2_tokens": tier2["est_tokens"],
        "threshold": stats["threshold_tokens"],
        "threshold_importance": stats["threshold_importance"],
        "suggestion": stats["suggestion"],
    }


# --- OpenAI -------------------------------------------------------------------------------


def test_openai_chat_gets_memory_in_a_system_message_and_the_turn_is_stored(
    proxied: Proxied,
) -> None:
    proxied.remember(FACT)
    context = injected(proxied)
    messages: Any = [
        {"role": "system", "content": "Answer in one sentence."},
        {"role": "user", "content": QUESTION},
    ]
    extra: Any = {
        "temperature": 0.2,
        "tools": [
            {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
        ],
    }

    direct = openai_client(proxied.upstream_url, None).chat.completions.create(
        model="gpt-test", messages=messages, **extra
    )
    sent, direct_headers = proxied.upstream.last.json, proxied.upstream.last.headers
    found = proxied.vault("GET", "/v1/memory/stats")["reflection"]
    raw = openai_client(proxied.url, proxied.key).chat.completions.with_raw_response.create(
        model="gpt-test", messages=messages, **extra
    )
    received = proxied.upstream.last.json

    # the block comes right after the app's own instructions, as a system message
    assert received["messages"][1] == {"role": "system", "content": context}
    assert without_memory("openai", received, context) == sent
    assert_headers_passed(direct_headers, proxied.upstream.last.headers)
    assert raw.parse().model_dump() == direct.model_dump()
    assert raw.headers["x-memory-status"] == "ok"
    assert int(raw.headers["x-memory-memories-retrieved"]) >= 1
    assert raw.headers["x-memory-store"] == "turn"
    assert_debt_matches(found, raw.headers["x-memory-reflection-debt"])
    assert_turn_stored(proxied)
    after = proxied.vault("GET", "/v1/memory/stats")["reflection"]
    assert after["unconsolidated"]["raw"]["units"] == found["unconsolidated"]["raw"]["units"] + 2


def test_openai_stream_passes_every_chunk_and_stores_the_assembled_answer(
    proxied: Proxied,
) -> None:
    # X-Session-ID narrows raw memories to that conversation, as session_id does on prepare
    proxied.remember(FACT, session="chat-42")
    proxied.remember("My cat is called Biscuit too", session="chat-7")
    messages: Any = [{"role": "user", "content": QUESTION}]
    session = {"X-Session-ID": "chat-42"}
    client = openai_client(proxied.url, proxied.key)
    stream = client.chat.completions.create(
        model="gpt-test", messages=messages, stream=True, extra_headers=session
    )
    pieces = [c.choices[0].delta.content or "" for c in stream if c.choices]
    assert "".join(pieces) == ANSWER
    received = proxied.upstream.last.json
    assert received["messages"][0]["role"] == "system"
    assert FACT in received["messages"][0]["content"]
    assert "cat" not in received["messages"][0]["content"]
    assert received["stream"] is True
    assert_turn_stored(proxied, session="chat-42", before=2)


def test_a_stream_reaches_the_client_byte_for_byte(proxied: Proxied) -> None:
    body = {
        "model": "gpt-test",
        "stream": True,
        "messages": [{"role": "user", "content": QUESTION}],
    }
    headers = {"Authorization": "Bearer sk-provider-1"}
    direct = httpx2.post(proxied.upstream_url + "/v1/chat/completions", json=body, headers=headers)
    relayed = httpx2.post(
        proxied.url + "/v1/chat/completions",
        json=body,
        headers={**headers, "X-Memory-Key": proxied.key},
    )
    assert relayed.status_code == 200
    assert relayed.content == direct.content
    assert relayed.headers["content-type"] == direct.headers["content-type"]
    assert relayed.headers["x-request-id"] == "req_upstream_1"
    # a stream's headers leave before the answer is stored: the debt is the one before it
    assert json.loads(relayed.headers["x-memory-reflection-debt"])["raw_units"] == 0
    assert relayed.headers["x-memory-store"] == "turn"
    assert_turn_stored(proxied, before=0)


# --- Anthropic ----------------------------------------------------------------------------


def test_anthropic_messages_get_memory_after_the_cached_system_blocks(proxied: Proxied) -> None:
    proxied.remember(FACT)
    context = injected(proxied)
    system: Any = [
        {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}
    ]
    messages: Any = [{"role": "user", "content": [{"type": "text", "text": QUESTION}]}]
    kwargs: Any = {
        "model": "claude-test",
        "max_tokens": 300,
        "system": system,
        "messages": messages,
    }
    kwargs["thinking"] = {"type": "enabled", "budget_tokens": 1024}

    direct = anthropic_client(proxied.upstream_url, None).messages.create(**kwargs)
    sent, direct_headers = proxied.upstream.last.json, proxied.upstream.last.headers
    found = proxied.vault("GET", "/v1/memory/stats")["reflection"]
    raw = anthropic_client(proxied.url, proxied.key).messages.with_raw_response.create(**kwargs)
    received = proxied.upstream.last.json

    assert received["system"][0] == system[0]  # the cache breakpoint still covers its prefix
    assert received["system"][-1] == {"type": "text", "text": context}
    assert without_memory("anthropic", received, context) == sent
    assert raw.parse().model_dump() == direct.model_dump()
    assert_headers_passed(direct_headers, proxied.upstream.last.headers)
    assert_debt_matches(found, raw.headers["x-memory-reflection-debt"])
    assert_turn_stored(proxied)


def test_anthropic_stream_with_a_string_system_prompt(proxied: Proxied) -> None:
    proxied.remember(FACT)
    context = injected(proxied)
    client = anthropic_client(proxied.url, proxied.key)
    with client.messages.stream(
        model="claude-test",
        max_tokens=300,
        system="You are terse.",
        messages=[{"role": "user", "content": QUESTION}],
    ) as stream:
        text = "".join(stream.text_stream)
    assert text == ANSWER
    assert proxied.upstream.last.json["system"] == "You are terse.\n\n" + context
    assert_turn_stored(proxied)


# --- Google -------------------------------------------------------------------------------


def test_google_generate_content_gets_memory_in_the_system_instruction(proxied: Proxied) -> None:
    proxied.remember(FACT)
    context = injected(proxied)
    config = types.GenerateContentConfig(system_instruction="Be brief.", temperature=0.1)

    straight = google_client(proxied.upstream_url, None)  # held: it closes when collected
    direct = straight.models.generate_content(model="gemini-test", contents=QUESTION, config=config)
    sent, direct_headers = proxied.upstream.last.json, proxied.upstream.last.headers
    client = google_client(proxied.url, proxied.key)
    answer = client.models.generate_content(model="gemini-test", contents=QUESTION, config=config)
    received = proxied.upstream.last.json

    assert proxied.upstream.last.path == "/v1/models/gemini-test:generateContent"
    assert received["systemInstruction"]["parts"] == [{"text": "Be brief."}, {"text": context}]
    assert without_memory("google", received, context) == sent
    assert answer.text == direct.text == ANSWER
    assert proxied.upstream.last.headers["x-goog-api-key"] == "g-provider-1"
    assert_headers_passed(direct_headers, proxied.upstream.last.headers)
    assert_turn_stored(proxied)


def test_google_stream(proxied: Proxied) -> None:
    proxied.remember(FACT)
    context = injected(proxied)
    client = google_client(proxied.url, proxied.key)
    chunks = client.models.generate_content_stream(model="gemini-test", contents=QUESTION)
    assert "".join(c.text or "" for c in chunks) == ANSWER
    assert proxied.upstream.last.path == "/v1/models/gemini-test:streamGenerateContent"
    assert proxied.upstream.last.query == "alt=sse"
    assert proxied.upstream.last.json["systemInstruction"] == {"parts": [{"text": context}]}
    assert_turn_stored(proxied)
