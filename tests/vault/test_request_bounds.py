"""Bounds the product document sets on request fields, refused at the edge with 400 and
stated in /openapi.json."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import Vault
from tests.support.api import CHECKOUT, COMMIT, assert_envelope, seed


@pytest.mark.parametrize("context_limit", [0, 51, -1])
def test_prepare_refuses_a_context_limit_outside_1_to_50(vault: Vault, context_limit: int) -> None:
    body = {"query": "postgres", "context_limit": context_limit}
    response = vault.post("/v1/memory/prepare", body)
    assert_envelope(response, 400, "invalid_request")
    assert "context_limit" in response.json()["error"]["message"]


def test_prepare_takes_a_context_limit_of_1_and_of_50(vault: Vault) -> None:
    vault.ingest("We chose Postgres for auth.")
    for context_limit in (1, 50):
        body = {"query": "postgres", "context_limit": context_limit}
        assert vault.post("/v1/memory/prepare", body).status_code == 200


def test_the_schema_states_the_context_limit_bounds(vault: Vault) -> None:
    document = vault.http.get("/openapi.json").json()
    field = document["components"]["schemas"]["PrepareRequest"]["properties"]["context_limit"]
    bounds = next(option for option in field["anyOf"] if option.get("type") == "integer")
    assert (bounds["minimum"], bounds["maximum"]) == (1, 50)


# JSON Schema's integer, which /openapi.json declares: 7.0 is the number 7 (a JSON parser may
# read it as a float), while 7.5, "7" and true are no integers.


def test_a_whole_number_written_with_a_fraction_is_that_integer(vault: Vault) -> None:
    [memory] = seed(vault, 1)
    search = vault.post("/v1/memory/search", {"query": "memory", "limit": 1.0, "tiers": [1.0]})
    assert search.status_code == 200, search.text
    assert len(search.json()["memories"]) == 1
    prepare = {"query": "memory", "context_limit": 3.0, "max_tokens": 500.0, "importance": 2.0}
    assert vault.post("/v1/memory/prepare", prepare).status_code == 200
    inspect = vault.post("/v1/memory/inspect", {"memory_id": memory, "offset": 0.0})
    assert inspect.status_code == 200, inspect.text
    batch = vault.post(CHECKOUT, {"tier": 1.0})
    assert batch.status_code == 200, batch.text
    entries = [{"text": "A reflection.", "importance": 7.0}]
    committed = vault.post(COMMIT, {"batch_id": batch.json()["batch_id"], "entries": entries})
    assert committed.status_code == 200, committed.text
    assert committed.json()["created"][0]["importance"] == 7


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/memory/search", {"query": "memory", "limit": 7.5}),
        ("/v1/memory/search", {"query": "memory", "limit": "7"}),
        ("/v1/memory/search", {"query": "memory", "limit": True}),
        ("/v1/memory/search", {"query": "memory", "tiers": [True]}),
        ("/v1/memory/prepare", {"query": "memory", "context_limit": 1e300}),
        (CHECKOUT, {"tier": True}),
        (CHECKOUT, {"tier": 1.5}),
    ],
)
def test_a_fraction_a_text_or_a_boolean_is_no_integer(
    vault: Vault, path: str, body: dict[str, Any]
) -> None:
    assert_envelope(vault.post(path, body), 400, "invalid_request")
