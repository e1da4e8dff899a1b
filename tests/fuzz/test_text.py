"""Invalid UTF-8 and lone surrogates in memory text, and dates outside what can be
rendered: a clear 400 (REST) or tool error (MCP), and nothing stored."""

from __future__ import annotations

import pytest

from tests.support import Vault
from tests.support.api import assert_envelope
from tests.support.tools import ToolHarness, assert_clean, call

JSON = {"Content-Type": "application/json"}
BAD_BODIES = [
    b'{"messages": [{"content": "caf\xe9 au lait"}]}',  # Latin-1, not UTF-8
    b'{"messages": [{"content": "\xff\xfe\xfd"}]}',
    b'{"messages": [{"content": "cut \xe2\x82"}]}',  # a truncated sequence
    b'{"messages": [{"content": "\xed\xa0\x80 encoded surrogate"}]}',
    b'{"messages": [{"content": "lone \\ud800 high"}]}',
    b'{"messages": [{"content": "lone \\udfff low"}]}',
    b'{"messages": [{"content": "reversed \\udc00\\ud800 pair"}]}',
    b'{"messages": [{"content": "fine", "date": "\\ud800"}]}',
    b'{"messages": [{"content": "fine"}], "session_id": "s-\\udc80"}',
]


def memories(vault: Vault) -> int:
    return int(vault.sql("SELECT count(*) FROM memories")[0][0])


@pytest.mark.parametrize("body", BAD_BODIES)
def test_text_that_is_not_unicode_is_400_and_stores_nothing(vault: Vault, body: bytes) -> None:
    response = vault.http.post(
        "/v1/memory/ingest", content=body, headers={**vault.headers(), **JSON}
    )
    assert_envelope(response, 400, "invalid_request")
    assert memories(vault) == 0


def test_a_surrogate_pair_escaped_in_json_is_one_character_and_is_stored(vault: Vault) -> None:
    body = b'{"messages": [{"content": "emoji \\ud83d\\ude00", "date": "2026-02-01"}]}'
    response = vault.http.post(
        "/v1/memory/ingest", content=body, headers={**vault.headers(), **JSON}
    )
    assert response.status_code == 202
    found = vault.post("/v1/memory/search", {"query": "emoji"}).json()["memories"]
    assert [m["content"] for m in found] == ["emoji \U0001f600"]


@pytest.mark.parametrize(
    "moment",
    [
        "9999-12-31T23:00:00-05:00",  # year 10000 in UTC
        "0001-01-01T00:00:00+05:00",  # year 0 in UTC
    ],
)
def test_a_date_outside_the_renderable_years_is_400_and_stores_nothing(
    vault: Vault, moment: str
) -> None:
    body = {"messages": [{"content": "a fact", "date": moment}]}
    assert_envelope(vault.post("/v1/memory/ingest", body), 400, "invalid_request")
    assert memories(vault) == 0
    window = {"from": moment}
    assert_envelope(vault.post("/v1/memory/date-search", window), 400, "invalid_request")


def test_years_before_1000_render_with_four_digits(vault: Vault) -> None:
    vault.ingest("an old fact", date="0999-03-04")
    found = vault.post("/v1/memory/date-search", {"from": "0001-01-01"}).json()
    assert [m["date"] for m in found["memories"]] == ["0999-03-04T00:00:00.000Z"]
    assert found["returned"]["from"] == "0001-01-01T00:00:00.000Z"


@pytest.mark.parametrize(
    "arguments",
    [
        {"content": "lone \ud800 high"},
        {"content": "lone \udfff low"},
        {"content": "a fact", "date": "2026-02-01\udc80"},
    ],
)
def test_store_memory_refuses_lone_surrogates_and_stores_nothing(
    tools: ToolHarness, arguments: dict[str, str]
) -> None:
    before = memories(tools.vault)
    result = call(tools, "store_memory", arguments)
    assert result.is_error
    assert_clean("store_memory", result)
    assert memories(tools.vault) == before
