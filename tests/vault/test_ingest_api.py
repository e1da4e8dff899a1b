"""Ingest: dates, roles, sessions, chunking, duplicate-safe retries, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import T0, Vault, make_vault
from tests.support.api import assert_envelope


def rows(vault: Vault) -> list[tuple[object, ...]]:
    return vault.sql("SELECT role, content, date_from, session_id, tier FROM memories ORDER BY seq")


def test_ingest_answers_202_with_ids_and_the_debt_block(vault: Vault) -> None:
    body = vault.ingest("first", "second")
    assert set(body) == {"stored", "duplicates", "ids", "reflection"}
    assert (body["stored"], body["duplicates"], len(body["ids"])) == (2, 0, 2)
    assert body["reflection"]["unconsolidated"]["raw"]["units"] == 2


def test_dates_roles_and_sessions_are_kept(vault: Vault) -> None:
    messages = [
        {"role": "assistant", "content": "a", "date": "2026-02-01"},
        {"role": "observation", "content": "b", "date": "2026-02-01T10:00:00+02:00"},
        {"role": "system", "content": "c"},
        {"content": "d", "date": "2026-02-01T10:00:00.5"},
    ]
    response = vault.post("/v1/memory/ingest", {"messages": messages, "session_id": "s1"})
    assert response.status_code == 202
    stored = rows(vault)
    assert [r[0] for r in stored] == ["assistant", "observation", "system", "user"]
    assert [r[2] for r in stored] == [1769904000000, 1769932800000, T0, 1769940000500]
    assert {r[3] for r in stored} == {"s1"}


def test_session_header_mirrors_session_id(vault: Vault) -> None:
    body = {"messages": [{"content": "x"}]}
    vault.http.post(
        "/v1/memory/ingest", json=body, headers={**vault.headers(), "X-Session-ID": "from-header"}
    )
    assert rows(vault)[0][3] == "from-header"


def test_a_messages_own_session_id_beats_the_requests_and_the_headers(vault: Vault) -> None:
    messages = [
        {"content": "own", "session_id": "s-own", "date": "2026-02-01"},
        {"content": "request's", "date": "2026-02-01"},
        {"content": "other", "session_id": "s-other", "date": "2026-02-01"},
    ]
    response = vault.http.post(
        "/v1/memory/ingest",
        json={"messages": messages, "session_id": "s-request"},
        headers={**vault.headers(), "X-Session-ID": "s-header"},
    )
    assert response.status_code == 202, response.text
    assert [(r[1], r[3]) for r in rows(vault)] == [
        ("own", "s-own"),
        ("request's", "s-request"),
        ("other", "s-other"),
    ]
    only_header = vault.http.post(
        "/v1/memory/ingest",
        json={"messages": [{"content": "header's"}]},
        headers={**vault.headers(), "X-Session-ID": "s-header"},
    )
    assert only_header.status_code == 202
    assert rows(vault)[-1][3] == "s-header"


def test_the_same_message_in_another_session_of_one_request_is_not_a_duplicate(
    vault: Vault,
) -> None:
    message = {"content": "same words", "date": "2026-02-01"}
    body = {"messages": [{**message, "session_id": "a"}, {**message, "session_id": "b"}]}
    first = vault.post("/v1/memory/ingest", body).json()
    assert (first["stored"], first["duplicates"]) == (2, 0)
    again = vault.post("/v1/memory/ingest", body).json()
    assert (again["stored"], again["duplicates"], again["ids"]) == (0, 2, first["ids"])


def test_storage_is_metered_by_each_messages_session(vault: Vault) -> None:
    body = {
        "messages": [
            {"content": "a" * 80, "session_id": "s-1"},
            {"content": "b" * 40, "session_id": "s-2"},
            {"content": "c" * 40},
        ],
        "session_id": "s-1",
    }
    assert vault.post("/v1/memory/ingest", body).status_code == 202
    usage = vault.http.get("/v1/usage", headers=vault.headers()).json()
    assert usage["by_session"]["s-1"]["storage_tokens"] == 30
    assert usage["by_session"]["s-2"]["storage_tokens"] == 10
    assert usage["totals"]["storage_tokens"] == 40


@pytest.mark.parametrize("field", ["sesion_id", "tier", "id"])
def test_an_unknown_field_of_a_message_is_400_naming_it_and_stores_nothing(
    vault: Vault, field: str
) -> None:
    body = {"messages": [{"content": "fine"}, {"content": "x", field: "s-1"}]}
    response = vault.post("/v1/memory/ingest", body)
    assert_envelope(response, 400, "invalid_request")
    assert [e["field"] for e in response.json()["error"]["details"]["errors"]] == [
        f"messages.1.{field}"
    ]
    assert rows(vault) == []


def test_dates_come_back_in_utc_milliseconds_with_z(vault: Vault) -> None:
    vault.ingest("deploy happened", date="2026-02-01T04:11:09.123456-05:00")
    hit = vault.post("/v1/memory/search", {"query": "deploy"}).json()["memories"][0]
    assert hit["date"] == "2026-02-01T09:11:09.123Z"


def test_retrying_the_same_message_is_a_duplicate_with_the_same_id(vault: Vault) -> None:
    first = vault.ingest("the same words", date="2026-02-01")
    again = vault.ingest("the same words", date="2026-02-01")
    assert (again["stored"], again["duplicates"]) == (0, 1)
    assert again["ids"] == first["ids"]
    other_day = vault.ingest("the same words", date="2026-02-02")
    assert other_day["stored"] == 1
    other_session = vault.ingest("the same words", date="2026-02-01", session_id="s2")
    assert other_session["stored"] == 1
    assert len(rows(vault)) == 3
    assert again["reflection"]["unconsolidated"]["raw"]["units"] == 1


def test_long_messages_are_split_into_units_that_share_date_and_role(vault: Vault) -> None:
    text = " ".join(f"Sentence {i} talks about the migration plan." for i in range(200))
    body = vault.ingest(text)
    assert body["stored"] == len(body["ids"]) > 3
    stored = rows(vault)
    assert {(r[0], r[2]) for r in stored} == {("user", 1769940000000)}
    assert all(len(str(r[1])) <= 1800 for r in stored)
    retry = vault.ingest(text)
    assert (retry["stored"], retry["ids"]) == (0, body["ids"])


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"messages": []},
        {"messages": [{"content": ""}]},
        {"messages": [{"content": "   "}]},
        {"messages": [{"content": 5}]},
        {"messages": [{"content": "x", "role": "robot"}]},
        {"messages": [{"content": "x", "date": "last tuesday"}]},
        {"messages": [{"content": "x", "date": 1769940000}]},
        {"messages": "x"},
    ],
)
def test_bad_ingest_bodies_are_400_and_store_nothing(vault: Vault, body: object) -> None:
    assert_envelope(vault.post("/v1/memory/ingest", body), 400, "invalid_request")
    assert rows(vault) == []


def test_a_bad_message_anywhere_in_the_batch_stores_nothing(vault: Vault) -> None:
    body = {"messages": [{"content": "fine"}, {"content": "x", "date": "nope"}]}
    assert vault.post("/v1/memory/ingest", body).status_code == 400
    assert rows(vault) == []


def test_lone_surrogates_are_refused_cleanly(vault: Vault) -> None:
    raw = b'{"messages": [{"content": "broken \\ud800 text"}]}'
    response = vault.http.post(
        "/v1/memory/ingest",
        content=raw,
        headers={**vault.headers(), "content-type": "application/json"},
    )
    assert_envelope(response, 400, "invalid_request")
    assert rows(vault) == []


def test_malformed_json_is_400(vault: Vault) -> None:
    response = vault.http.post(
        "/v1/memory/ingest",
        content=b'{"messages": [',
        headers={**vault.headers(), "content-type": "application/json"},
    )
    assert_envelope(response, 400, "invalid_request")


def test_bodies_over_one_mebibyte_are_413_and_store_nothing(vault: Vault) -> None:
    body = json.dumps({"messages": [{"content": "x" * (1024 * 1024)}]}).encode()
    response = vault.http.post(
        "/v1/memory/ingest",
        content=body,
        headers={**vault.headers(), "content-type": "application/json"},
    )
    assert_envelope(response, 413, "payload_too_large")
    assert rows(vault) == []


def test_streamed_bodies_without_length_are_also_limited(tmp_path: Path) -> None:
    small = make_vault(tmp_path, max_body_bytes=2048)

    def chunks() -> object:
        yield b'{"messages": [{"content": "'
        for _ in range(10):
            yield b"y" * 1000
        yield b'"}]}'

    response = small.http.post(
        "/v1/memory/ingest",
        content=chunks(),  # type: ignore[arg-type]
        headers={**small.headers(), "content-type": "application/json"},
    )
    assert_envelope(response, 413, "payload_too_large")
    small.store.close()


def test_openapi_says_a_message_takes_its_own_session_id_and_no_other_field(
    vault: Vault,
) -> None:
    document = vault.http.get("/openapi.json").json()
    schemas = document["components"]["schemas"]
    items = schemas["IngestRequest"]["properties"]["messages"]["items"]
    assert items == {"$ref": "#/components/schemas/IngestMessage"}
    message = schemas["IngestMessage"]
    assert message["additionalProperties"] is False
    assert set(message["properties"]) == {"role", "content", "date", "session_id"}
