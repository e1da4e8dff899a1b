"""The pure parts of the chat proxy: each format's turns, injection and answers, the event
reader, the option headers and the debt header."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcp_memoryrouter import schemas
from mcp_memoryrouter.errors import InvalidRequest
from mcp_memoryrouter.proxy.events import EventReader
from mcp_memoryrouter.proxy.formats import ANTHROPIC, GOOGLE, OPENAI, Assembly, Turn
from mcp_memoryrouter.proxy.options import debt_header, header_text, options


def test_events_cut_anywhere_come_out_whole() -> None:
    stream = (
        b'event: x\r\ndata: {"a":\r\ndata: 1}\r\n\r\n'
        b": comment\n\ndata: caf\xc3\xa9\n\ndata: [DONE]\r\n\r\n"
    )
    for size in (1, 2, 3, 7, len(stream)):
        reader, events = EventReader(), []
        for at in range(0, len(stream), size):
            events += reader.feed(stream[at : at + size])
        assert events == ['{"a":\n1}', "café", "[DONE]"]


def test_openai_memory_goes_after_the_apps_instructions() -> None:
    body: dict[str, Any] = {
        "messages": [
            {"role": "developer", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url"}]},
        ]
    }
    OPENAI.inject(body, "MEMORY")
    assert [m["role"] for m in body["messages"]] == ["developer", "system", "user"]
    assert OPENAI.turns(body) == [Turn("user", "hi")]
    assert OPENAI.newest(body) == Turn("user", "hi")


def test_anthropic_system_in_each_shape() -> None:
    absent: dict[str, Any] = {"messages": []}
    ANTHROPIC.inject(absent, "MEMORY")
    assert absent["system"] == "MEMORY"
    blocks: dict[str, Any] = {"system": [{"type": "text", "text": "a", "cache_control": {}}]}
    ANTHROPIC.inject(blocks, "MEMORY")
    assert blocks["system"][-1] == {"type": "text", "text": "MEMORY"}
    tool_result = {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]},
        ]
    }
    assert ANTHROPIC.newest(tool_result) is None


def test_google_skips_thoughts_and_marks_the_end() -> None:
    assembly = Assembly()
    chunk = {
        "candidates": [{"content": {"parts": [{"text": "plan", "thought": True}, {"text": "Hi "}]}}]
    }
    GOOGLE.feed(assembly, json.dumps(chunk))
    last = {"candidates": [{"content": {"parts": [{"text": "there"}]}, "finishReason": "STOP"}]}
    GOOGLE.feed(assembly, json.dumps(last))
    assert (assembly.text, assembly.complete) == ("Hi there", True)
    body: dict[str, Any] = {
        "contents": [{"parts": [{"text": "q"}]}],
        "system_instruction": {"parts": [{"text": "s"}]},
    }
    GOOGLE.inject(body, "MEMORY")
    assert body["system_instruction"]["parts"] == [{"text": "s"}, {"text": "MEMORY"}]
    assert "systemInstruction" not in body


def test_a_stream_without_its_end_is_not_complete() -> None:
    assembly = Assembly()
    OPENAI.feed(assembly, json.dumps({"choices": [{"index": 0, "delta": {"content": "Hal"}}]}))
    assert (assembly.text, assembly.complete) == ("Hal", False)
    ANTHROPIC.feed(assembly, json.dumps({"type": "error", "error": {}}))
    assert assembly.failed


def test_opt_outs_are_read_then_stripped() -> None:
    body = {"messages": [{"role": "user", "content": "secret", "memory": False}]}
    assert OPENAI.newest(body) == Turn("user", "secret", stored=False)
    assert OPENAI.strip_opt_outs(body)
    assert body == {"messages": [{"role": "user", "content": "secret"}]}


def test_option_headers() -> None:
    chosen = options(
        {
            "x-memory-mode": "NONE",
            "x-context-limit": "5",
            "x-memory-tiers": "2, 3",
            "x-memory-importance": "7",
            "x-session-id": "s",
        }
    )
    assert (chosen.mode, chosen.context_limit, chosen.tiers, chosen.importance) == (
        "off",
        5,
        [2, 3],
        7,
    )
    assert not chosen.retrieves and not chosen.stores
    for header, value in [
        ("x-context-limit", "0"),
        ("x-memory-tiers", ""),
        ("x-session-id", "s" * 201),
    ]:
        if value == "":
            assert options({header: value}).tiers is None
            continue
        with pytest.raises(InvalidRequest):
            options({header: value})


def test_the_debt_header_is_the_documents_compact_form() -> None:
    reflection = schemas.Reflection.model_validate(
        {
            "unconsolidated": {
                "raw": {"units": 40000, "est_tokens": 13200000, "importance_equiv": 39600},
                "tier2": {"count": 120, "importance": 640, "est_tokens": 41000},
            },
            "threshold_tokens": 50000,
            "threshold_importance": 150,
            "suggestion": "raw consolidation suggested: 39600 unconsolidated importance",
        }
    )
    assert debt_header(reflection) == (
        '{"raw_units":40000,"raw_tokens":13200000,"raw_importance_equiv":39600,"t2_count":120,'
        '"t2_importance":640,"t2_tokens":41000,"threshold":50000,"threshold_importance":150,'
        '"suggestion":"raw consolidation suggested: 39600 unconsolidated importance"}'
    )
    assert header_text("a\nb\u00e9" + "x" * 400).startswith("a b?")
    assert len(header_text("x" * 400)) == 300
