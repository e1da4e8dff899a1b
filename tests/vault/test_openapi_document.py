"""``/openapi.json`` says what the server checks: entry counts and lengths, tiers, dates,
this server's embedding models, one-value key headers, closed bodies; and the server
checks what it says (an unknown model is refused wherever it is named)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_memoryrouter.errors import InvalidRequest
from mcp_memoryrouter.limits import ENTRY_CHARS_MAX
from mcp_memoryrouter.vault.rules.contract import check_entries
from mcp_memoryrouter.vault.rules.domain import Entry
from mcp_memoryrouter.vault.search.embeddings import Embedder, Embedders
from tests.support import Vault, make_vault

ISO_MOMENT = {"anyOf": [{"format": "date"}, {"format": "date-time"}]}


def never_built() -> Embedder:
    raise AssertionError("describing the server must not load a model")


@pytest.fixture
def vault(tmp_path: Path) -> Iterator[Vault]:
    opened = make_vault(tmp_path, embedders=Embedders({"local": never_built}, "none"))
    yield opened
    opened.http.close()
    opened.store.close()


def document(vault: Vault) -> dict[str, Any]:
    body: dict[str, Any] = vault.http.get("/openapi.json").json()
    return body


def component(vault: Vault, name: str) -> dict[str, Any]:
    schema: dict[str, Any] = document(vault)["components"]["schemas"][name]
    return schema


def string_branch(schema: dict[str, Any]) -> dict[str, Any]:
    if schema.get("type") == "string":
        return schema
    return next(b for b in schema["anyOf"] if b.get("type") == "string")


def header(vault: Vault, path: str, name: str) -> dict[str, Any]:
    operation = document(vault)["paths"][path]["post"]
    found = [p for p in operation["parameters"] if p["name"].lower() == name.lower()]
    schema: dict[str, Any] = found[0]["schema"]
    return schema


def test_the_embedding_models_are_this_servers_own_and_the_empty_default(vault: Vault) -> None:
    names = ["", "none", "local"]
    for model in ("IngestRequest", "SearchRequest", "PrepareRequest", "DateSearchRequest"):
        embeddings = component(vault, model)["properties"]["embeddings"]
        assert string_branch(embeddings)["enum"] == names, model
    assert header(vault, "/v1/memory/search", "X-Embedding-Model")["enum"] == names


def test_an_unknown_model_in_the_header_is_refused_even_when_the_body_names_a_known_one(
    vault: Vault,
) -> None:
    response = vault.http.post(
        "/v1/memory/search",
        json={"query": "tea", "embeddings": "none"},
        headers={**vault.headers(), "X-Embedding-Model": "no-such-model"},
    )
    assert response.status_code == 400, response.text
    assert "no-such-model" in response.json()["error"]["message"]


def test_a_request_that_embeds_nothing_still_refuses_an_unknown_model(vault: Vault) -> None:
    window = {"from": "2026-01-01", "query": "", "embeddings": "no-such-model"}
    assert vault.post("/v1/memory/date-search", window).status_code == 400
    prepare = {"messages": [{"content": "hi"}], "query": "", "embeddings": "no-such-model"}
    assert vault.post("/v1/memory/prepare", prepare).status_code == 400


def test_entries_tiers_and_dates_carry_the_bounds_the_server_enforces(vault: Vault) -> None:
    for model in ("CommitRequest", "ImportReflectionsRequest"):
        entries = component(vault, model)["properties"]["entries"]
        assert (entries["minItems"], entries["maxItems"]) == (1, 100), model
    importance = component(vault, "EntryIn")["properties"]["importance"]
    assert (importance["minimum"], importance["maximum"]) == (1, 10)
    tiers = next(b for b in component(vault, "SearchRequest")["properties"]["tiers"]["anyOf"])
    assert tiers["minItems"] == 1 and tiers["items"]["enum"] == [1, 2, 3]
    window = component(vault, "DateSearchRequest")["properties"]
    assert string_branch(window["from"])["anyOf"] == ISO_MOMENT["anyOf"]
    assert string_branch(window["to"])["anyOf"] == ISO_MOMENT["anyOf"]
    for model in ("SearchRequest", "PrepareRequest"):
        as_of = component(vault, model)["properties"]["as_of"]
        assert string_branch(as_of)["anyOf"] == ISO_MOMENT["anyOf"], model
    usage = document(vault)["paths"]["/v1/usage"]["get"]["parameters"]
    for parameter in (p for p in usage if p["in"] == "query"):
        assert string_branch(parameter["schema"])["anyOf"] == ISO_MOMENT["anyOf"]
    assert component(vault, "KeyCreateRequest")["additionalProperties"] is False


def test_the_timeline_bucket_is_one_of_the_sizes_the_server_accepts(vault: Vault) -> None:
    operation = document(vault)["paths"]["/v1/memory/timeline"]["get"]
    [bucket] = [p for p in operation["parameters"] if p["in"] == "query"]
    assert (bucket["name"], bucket["required"]) == ("bucket", False)
    assert bucket["schema"]["enum"] == ["day", "week", "month"]
    assert bucket["schema"]["default"] == "month"
    assert operation["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/TimelineResponse"
    }
    assert "400" in operation["responses"]
    for size in bucket["schema"]["enum"]:
        response = vault.http.get(f"/v1/memory/timeline?bucket={size}", headers=vault.headers())
        assert response.status_code == 200, response.text


def test_headers_are_strings_and_a_key_header_holds_one_value(vault: Vault) -> None:
    for name in ("X-Memory-Key", "Authorization", "x-api-key", "X-Session-ID"):
        schema = header(vault, "/v1/memory/search", name)
        assert "anyOf" not in schema and schema["type"] == "string", name  # no "null" text
    assert header(vault, "/v1/memory/search", "Authorization")["pattern"] == "^[^,]*$"


TEXTS = [
    "a",
    "  a  ",
    "",
    "   ",
    "\x1c\x1f",  # trimmed by the server, though not every regex dialect calls it a space
    "\x85a\u3000",
    "\ufeff",  # not trimmed
    "a" * ENTRY_CHARS_MAX,
    " " + "a" * ENTRY_CHARS_MAX + "\n",
    "a" * (ENTRY_CHARS_MAX + 1),
]


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_the_entry_text_pattern_allows_exactly_what_the_contract_accepts(
    vault: Vault, text: str
) -> None:
    pattern = component(vault, "EntryIn")["properties"]["text"]["pattern"]
    try:
        check_entries([Entry(text, 5)], "cb_0123456789abcdef")
        accepted = True
    except InvalidRequest:
        accepted = False
    assert bool(re.search(pattern, text)) is accepted


def test_every_method_of_a_resource_is_named_when_another_is_refused(vault: Vault) -> None:
    options = vault.http.options("/v1/keys", headers=vault.headers())
    assert options.status_code == 405 and options.headers["allow"] == "GET, POST"
    # /v1/keys/current is its own resource, not a key id
    delete = vault.http.delete("/v1/keys/current", headers=vault.headers())
    assert delete.status_code == 405 and delete.headers["allow"] == "GET"
    assert delete.json()["error"]["code"] == "method_not_allowed"
    unknown = vault.http.delete("/v1/keys/key_0000000000000000", headers=vault.headers())
    assert unknown.status_code == 404
