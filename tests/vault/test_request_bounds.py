"""Bounds the product document sets on request fields, refused at the edge with 400 and
stated in /openapi.json."""

from __future__ import annotations

import pytest

from tests.support import Vault
from tests.vault.test_keys_api import assert_envelope


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
