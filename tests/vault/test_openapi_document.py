"""``/openapi.json`` says what the server checks: entry counts, lengths and ids, tiers,
dates, this server's embedding models, one-value key headers, key names, closed bodies; and
the server checks what it says (an unknown model is refused wherever it is named). Where a
rule is a pattern, the validator schemathesis reads the document with (``jsonschema_rs``)
and the server agree on every sample."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import jsonschema_rs
import pytest

from mcp_memoryrouter.errors import InvalidRequest
from mcp_memoryrouter.limits import ENTRY_CHARS_MAX, MOMENT, MOMENT_OFF_THE_EDGE
from mcp_memoryrouter.vault.rules.contract import check_entries
from mcp_memoryrouter.vault.rules.dates import parse_moment
from mcp_memoryrouter.vault.rules.domain import Entry
from mcp_memoryrouter.vault.search.embeddings import Embedder, Embedders
from tests.support import Vault, make_vault

ISO_MOMENT = {
    "pattern": f"^({MOMENT.pattern})$",
    "not": {"pattern": f"^({MOMENT_OFF_THE_EDGE.pattern})$"},
}


def never_built() -> Embedder:
    raise AssertionError("describing the server must not load a model")


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Vault]:
    # one vault for the module: the tests read the document or send requests it refuses
    # (the key-name samples mint a key each, which no other test counts)
    path = tmp_path_factory.mktemp("openapi-document")
    opened = make_vault(path, embedders=Embedders({"local": never_built}, "none"))
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
    assert string_branch(window["from"]).items() >= ISO_MOMENT.items()
    assert string_branch(window["to"]).items() >= ISO_MOMENT.items()
    for model in ("SearchRequest", "PrepareRequest"):
        as_of = component(vault, model)["properties"]["as_of"]
        assert string_branch(as_of).items() >= ISO_MOMENT.items(), model
    for model, field in (("IngestMessage", "date"), ("CoversIn", "from"), ("CoversIn", "to")):
        moment = component(vault, model)["properties"][field]
        assert string_branch(moment).items() >= ISO_MOMENT.items(), model
    usage = document(vault)["paths"]["/v1/usage"]["get"]["parameters"]
    for parameter in (p for p in usage if p["in"] == "query"):
        assert string_branch(parameter["schema"]).items() >= ISO_MOMENT.items()
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


def test_every_route_but_health_asks_for_a_key_in_any_of_its_three_headers(vault: Vault) -> None:
    described = document(vault)
    assert described["components"]["securitySchemes"] == {
        "memoryKey": {"type": "apiKey", "in": "header", "name": "X-Memory-Key"},
        "bearer": {"type": "http", "scheme": "bearer"},
        "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"},
    }
    any_key: list[dict[str, list[str]]] = [{"memoryKey": []}, {"bearer": []}, {"apiKey": []}]
    for path, item in described["paths"].items():
        for method, operation in item.items():
            if path == "/healthz":
                assert "security" not in operation
                continue
            assert operation["security"] == any_key, (method, path)
            # and the route refuses a request without one
            response = vault.http.request(method, path.replace("{key_id}", "key_x"))
            assert response.status_code == 401, (method, path, response.text)


def test_headers_are_strings_and_a_key_header_holds_one_value(vault: Vault) -> None:
    for name in ("X-Memory-Key", "Authorization", "x-api-key", "X-Session-ID"):
        schema = header(vault, "/v1/memory/search", name)
        assert "anyOf" not in schema and schema["type"] == "string", name  # no "null" text
    assert header(vault, "/v1/memory/search", "Authorization")["pattern"] == "^[^,]*$"


TEXTS = [
    "a",
    "See 7c9e6679-7425-40de-944b-E07FC1F90AE7 for details.",
    "From batch cb_9f2c0a1b2c3d.",
    "glued:xcb_9f2c0a1b2c3d",
    "cb_ alone, or cb_short",
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
    schema = component(vault, "EntryIn")["properties"]["text"]
    try:
        check_entries([Entry(text, 5)])
        accepted = True
    except InvalidRequest:
        accepted = False
    assert bool(re.search(schema["pattern"], text)) is accepted or "not" in schema
    assert jsonschema_rs.validator_for(schema).is_valid(text) is accepted


MOMENTS = [
    "2026-02-01",
    "2024-02-29",
    "2023-02-29",
    "1900-02-29",
    "2000-02-29",
    "0001-01-01",
    "0000-01-01",
    "9999-12-31",
    "2026-02-01T04:11:09Z",
    "2026-02-01T04:11:09.123456789+05:30",
    "2026-02-01 04:11",
    "2026-02-01T04:11:09",  # no offset: UTC
    "2026-02-01T24:00:00Z",
    "2026-02-01T04:11:60Z",
    "2026-02-01t04:11:09z",
    "2026-02-01T04:11:09+0530",
    "2026-02-01T04",
    "20260201",
    " 2026-02-01",
    "2026-02-01\n",
    "0001-01-01T00:00:00+00:00",
    "0001-01-01T00:00:00+05:00",
    "0001-01-01T23:00:00-00:30",
    "9999-12-31T23:59:59.999Z",
    "9999-12-31T00:00:00-01:00",
    "yesterday",
]


@pytest.mark.parametrize("moment", MOMENTS, ids=range(len(MOMENTS)))
def test_the_moment_pattern_allows_exactly_what_the_server_reads(vault: Vault, moment: str) -> None:
    schema = string_branch(component(vault, "DateSearchRequest")["properties"]["to"])
    try:
        parse_moment(moment, field="to")
        accepted = True
    except InvalidRequest:
        accepted = False
    assert jsonschema_rs.validator_for(schema).is_valid(moment) is accepted
    window = {"from": "2026-01-01", "to": moment}
    assert (vault.post("/v1/memory/date-search", window).status_code == 200) is accepted


NAMES = ["laptop", "caf\u00e9 \u0645\u0631\u062d\u0628\u0627", "\u200c\u200d joiners", "\U0001f600"]
NAMES += ["tab\there", "esc\x1b[31m", "del\x7f", "nel\x85", "soft\u00adhyphen", "rtl\u202e"]
NAMES += ["line\u2028sep", "bom\ufeff", "tag\U000e0041", "end\n"]


@pytest.mark.parametrize("name", NAMES, ids=range(len(NAMES)))
def test_the_key_name_pattern_allows_exactly_what_the_server_takes(vault: Vault, name: str) -> None:
    schema = string_branch(component(vault, "KeyCreateRequest")["properties"]["name"])
    minted = vault.post("/v1/keys", {"name": name})
    assert minted.status_code in (201, 400), minted.text
    assert jsonschema_rs.validator_for(schema).is_valid(name) is (minted.status_code == 201)


def test_a_key_id_in_a_path_has_the_shape_of_the_ids_the_vault_makes(vault: Vault) -> None:
    operation = document(vault)["paths"]["/v1/keys/{key_id}"]["delete"]
    [key_id] = [p for p in operation["parameters"] if p["in"] == "path"]
    shape = jsonschema_rs.validator_for(key_id["schema"])
    vault.post("/v1/keys", {"name": "shaped"})
    listed = vault.http.get("/v1/keys", headers=vault.headers()).json()["keys"]
    assert len(listed) >= 2 and all(shape.is_valid(k["id"]) for k in listed)
    # /v1/keys/current is another resource, and an id of another shape names no key
    for other in ("current", "key_x", "KEY_0123456789ABCDEF"):
        assert not shape.is_valid(other)
        assert vault.http.delete(f"/v1/keys/{other}", headers=vault.headers()).status_code in (
            404,
            405,
        )


def test_every_method_of_a_resource_is_named_when_another_is_refused(vault: Vault) -> None:
    options = vault.http.options("/v1/keys", headers=vault.headers())
    assert options.status_code == 405 and options.headers["allow"] == "GET, POST"
    # /v1/keys/current is its own resource, not a key id
    delete = vault.http.delete("/v1/keys/current", headers=vault.headers())
    assert delete.status_code == 405 and delete.headers["allow"] == "GET"
    assert delete.json()["error"]["code"] == "method_not_allowed"
    unknown = vault.http.delete("/v1/keys/key_0000000000000000", headers=vault.headers())
    assert unknown.status_code == 404
