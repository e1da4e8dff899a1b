"""``mcp-memoryrouter import --from chatgpt|claude conversations.json`` against a real server.

The fixtures are small exports written by hand from the formats' public descriptions:
``chatgpt_conversations.json`` (an edited user message and a regenerated answer, a hidden
system message and hidden custom instructions, an image beside text, a call to a tool and
its output, a hidden note, an empty answer; a second conversation named by ``id`` only) and
``claude_conversations.json`` (an attachment, a file, an answer of text and tool blocks, a
message without a date; a second conversation with an edited branch, listed out of order).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from mcp_memoryrouter import limits, schemas
from mcp_memoryrouter.cli import main
from mcp_memoryrouter.transfer.history import History, read_history, session_id
from mcp_memoryrouter.transfer.importer import MAX_REQUEST_BYTES, history_requests
from tests.support.reflect import (
    CHATGPT,
    CHATGPT_STORED,
    CLAUDE,
    CLAUDE_STORED,
    GPT_2,
    Served,
    connection_dropped_after_one_ingest,
    stored,
)


def run(served: Served, *args: str) -> Result:
    return CliRunner().invoke(
        main, ["import", *args, "--api-url", served.url], env={"MEMORYROUTER_KEY": served.key}
    )


def write(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def test_chatgpt_keeps_the_path_shown_in_order_with_dates_and_one_session_per_conversation(
    served: Served,
) -> None:
    result = run(served, "--from", "chatgpt", str(CHATGPT), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "messages": 8,
        "conversations": 2,
        "attachments": 1,  # the image
        "system": 5,  # system, custom instructions, the tool call, its output, the hidden note
        "stored": 8,
        "duplicates": 0,
    }
    assert stored(served) == CHATGPT_STORED
    with served.http() as http:
        found = http.post(
            "/v1/memory/date-search",
            json={"from": "2024-06-10", "to": "2024-06-10", "session_id": GPT_2, "tiers": [1]},
        ).json()
    assert sorted(m["content"] for m in found["memories"]) == [
        "Four to six hours at room temperature.",
        "How long should sourdough proof?",
    ]


def test_claude_keeps_text_blocks_and_the_newest_branch_and_counts_attachments(
    served: Served,
) -> None:
    result = run(served, "--from", "claude", str(CLAUDE))
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == (
        "imported 7 messages from 2 conversations (0 duplicates, 2 attachments skipped, "
        "0 system/tool messages skipped)"
    )
    assert stored(served) == CLAUDE_STORED


def test_the_same_file_imported_again_stores_nothing(served: Served) -> None:
    assert run(served, "--from", "chatgpt", str(CHATGPT)).exit_code == 0
    again = run(served, "--from", "chatgpt", str(CHATGPT))
    assert again.exit_code == 0, again.output
    assert again.stdout.startswith("imported 0 messages from 2 conversations (8 duplicates, ")
    assert served.stats()["total_memories"] == 8
    assert stored(served) == CHATGPT_STORED


def test_an_interrupted_import_run_again_stores_only_the_rest(
    served: Served, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # 600 messages: a request of 500, then one of 100
    export = write(tmp_path / "c.json", [_conversation(f"c{n}", 6) for n in range(100)])
    with connection_dropped_after_one_ingest(monkeypatch):
        cut = run(served, "--from", "claude", str(export))
    assert cut.exit_code == 1 and "the connection dropped" in cut.output
    assert served.stats()["total_memories"] == 500  # the first request went through

    resumed = run(served, "--from", "claude", str(export), "--json")
    assert resumed.exit_code == 0, resumed.output
    counts = json.loads(resumed.stdout)
    assert (counts["stored"], counts["duplicates"]) == (100, 500)
    assert served.stats()["total_memories"] == 600


def test_a_prefix_of_the_history_then_the_whole_stores_only_what_the_prefix_lacked(
    served: Served, tmp_path: Path
) -> None:
    export = json.loads(CHATGPT.read_text(encoding="utf-8"))
    earlier = copy.deepcopy(export[:1])
    earlier[0]["current_node"] = "a3-second"  # the export taken mid-conversation
    assert run(served, "--from", "chatgpt", str(write(tmp_path / "c.json", earlier))).exit_code == 0
    assert stored(served) == CHATGPT_STORED[:4]
    whole = run(served, "--from", "chatgpt", str(CHATGPT), "--json")
    counts = json.loads(whole.stdout)
    assert (counts["stored"], counts["duplicates"]) == (4, 4)
    assert stored(served) == CHATGPT_STORED


def _chatgpt() -> list[Any]:
    value: list[Any] = json.loads(CHATGPT.read_text(encoding="utf-8"))
    return value


def _claude() -> list[Any]:
    value: list[Any] = json.loads(CLAUDE.read_text(encoding="utf-8"))
    return value


def _last_broken(export: list[Any], change: Any) -> list[Any]:
    """The export with its last conversation changed: the first is fine, yet not sent."""
    change(export[-1])
    return export


def _bad_date(conversation: dict[str, Any]) -> None:
    conversation["mapping"]["b2"]["message"]["create_time"] = "yesterday"


def _bad_iso(conversation: dict[str, Any]) -> None:
    conversation["chat_messages"][1]["created_at"] = "the 3rd of May"


BAD = [
    ("chatgpt", "{not json", "not valid JSON"),
    ("claude", '[{"uuid": "x", "chat_messages": []}]\n{"more": 1}\n', "not valid JSON"),
    ("chatgpt", {"conversations": []}, "holds a JSON array of conversations"),
    ("chatgpt", [1], "conversation 1: a conversation must be an object"),
    ("chatgpt", _claude(), "this is a Claude export"),
    ("claude", _chatgpt(), "this is a ChatGPT export"),
    ("chatgpt", _last_broken(_chatgpt(), lambda c: c.pop("mapping")), "mapping"),
    ("chatgpt", _last_broken(_chatgpt(), lambda c: c.update(current_node="gone")), "'gone'"),
    ("chatgpt", _last_broken(_chatgpt(), _bad_date), "create_time must be a number"),
    ("chatgpt", _last_broken(_chatgpt(), lambda c: c.pop("id")), "conversation 2: no"),
    ("claude", _last_broken(_claude(), _bad_iso), "not an ISO datetime"),
    ("claude", _last_broken(_claude(), lambda c: c.update(chat_messages={})), "chat_messages"),
]


@pytest.mark.parametrize(("source", "content", "says"), BAD)
def test_a_bad_file_is_refused_naming_it_and_nothing_is_sent(
    served: Served, tmp_path: Path, source: str, content: Any, says: str
) -> None:
    path = tmp_path / "conversations.json"
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        write(path, content)
    result = run(served, "--from", source, str(path))
    assert result.exit_code == 1, result.output
    assert str(path) in result.output and says in result.output, result.output
    assert served.stats()["total_memories"] == 0


def test_a_chat_export_given_without_from_is_refused_with_a_hint(served: Served) -> None:
    result = run(served, str(CHATGPT))
    assert result.exit_code == 1
    assert "--from chatgpt" in result.output
    assert served.stats()["total_memories"] == 0


def test_a_long_message_is_stored_whole_as_the_vault_splits_it_and_dedups_it_again(
    served: Served, tmp_path: Path
) -> None:
    long_text = " ".join(f"Sentence {i} of a long answer about bread." for i in range(200))
    export = _claude()[:1]
    export[0]["chat_messages"][3]["text"] = long_text
    path = write(tmp_path / "long.json", export)
    first = json.loads(run(served, "--from", "claude", str(path), "--json").stdout)
    assert first["messages"] == 3 and first["stored"] > 3  # one message, several memories
    again = json.loads(run(served, "--from", "claude", str(path), "--json").stdout)
    assert (again["stored"], again["duplicates"]) == (0, first["stored"])


# --- the readers and the requests, without a vault ---------------------------------------


def _history(messages: list[str]) -> History:
    value = [
        {
            "uuid": "c",
            "created_at": "2024-05-02T09:00:00Z",
            "chat_messages": [{"sender": "human", "text": text} for text in messages],
        }
    ]
    return read_history("claude", value)


def test_a_message_too_large_for_one_request_is_sent_in_pieces_each_under_the_limit() -> None:
    line = "é" * 9_000 + "\n"  # 54,000 bytes escaped
    huge = line * 40 + "z" * 900_000  # ~3 MB escaped, its last line longer than a request
    requests = history_requests(_history(["Before.", huge, "After."]))
    sent = [m for r in requests for m in r.messages]
    assert len(requests) > 3
    assert sent[0].content == "Before." and sent[-1].content == "After."
    assert "".join(m.content for m in sent[1:-1]) == huge
    for request in requests:
        assert len(request.model_dump_json().encode()) < MAX_REQUEST_BYTES + 1024
        assert {m.session_id for m in request.messages} == {"claude-c"}
        assert {m.date for m in request.messages} == {"2024-05-02T09:00:00.000Z"}


def test_requests_hold_at_most_500_messages_each_naming_its_conversation() -> None:
    requests = history_requests(_history([f"Note {i}." for i in range(1_200)]))
    assert [len(r.messages) for r in requests] == [500, 500, 200]
    two = read_history("claude", [_conversation("a", 3), _conversation("b", 2)])
    (request,) = history_requests(two)
    assert [m.session_id for m in request.messages] == ["claude-a"] * 3 + ["claude-b"] * 2
    assert request.session_id is None


def _conversation(uuid: str, messages: int) -> dict[str, Any]:
    return {
        "uuid": uuid,
        "created_at": "2024-05-02T09:00:00Z",
        "chat_messages": [{"sender": "human", "text": f"{uuid} {i}"} for i in range(messages)],
    }


def test_session_ids_are_the_prefixed_id_else_cleaned_cut_and_hashed() -> None:
    assert session_id("chatgpt", "6650a1b2-0000") == "chatgpt-6650a1b2-0000"
    odd = session_id("claude", "a/b c\u00e9")
    assert odd.startswith("claude-a-b-c-") and len(odd) == len("claude-a-b-c-") + 8
    assert odd != session_id("claude", "a b/c\u00e9")
    long = session_id("chatgpt", "x" * 500)
    assert len(long) == limits.MAX_ID_CHARS and long.startswith("chatgpt-xxx")
    for made in (odd, long):
        schemas.IngestRequest(messages=[schemas.MessageIn(content="x")], session_id=made)


def test_a_lone_surrogate_is_replaced_so_the_request_is_valid() -> None:
    (request,) = history_requests(_history(["half an emoji \ud83d here"]))
    assert request.messages[0].content == "half an emoji \ufffd here"
