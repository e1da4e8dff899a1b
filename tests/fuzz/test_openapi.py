"""Schemathesis over the vault's own ``/openapi.json``, in-process, with a valid key, valid
and broken data and every built-in check: no route answers 5xx, every answer matches what
the schema declares for it, every request the schema allows is accepted and every request
it forbids is refused."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, assume, settings
from schemathesis import BaseSchema, checks

from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.errors import InvalidRequest
from mcp_memoryrouter.vault.app import create_vault_app
from mcp_memoryrouter.vault.rules.dates import parse_moment
from tests.support import Vault, make_vault

checks.load_all_checks()
# every built-in check (max_response_time only runs with a limit, and none is set)
CHECKS: list[schemathesis.CheckFunction] = [
    check for check in checks.CHECKS.get_all() if not checks.is_check_class(check)
]


@pytest.fixture(scope="module")
def fuzzed_vault(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Vault]:
    vault = make_vault(tmp_path_factory.mktemp("openapi"))
    vault.ingest("We chose Postgres for auth.", "Ana prefers tea.")
    yield vault
    vault.http.close()
    vault.store.close()


@pytest.fixture(scope="module")
def api_schema(fuzzed_vault: Vault, tmp_path_factory: pytest.TempPathFactory) -> BaseSchema:
    # the same service without the rate limit: hundreds of cases must reach the routes
    settings = Settings(data_dir=tmp_path_factory.mktemp("unlimited"), rate_limit_per_minute=0)
    app = create_vault_app(settings, service=fuzzed_vault.service)
    loaded = schemathesis.openapi.from_asgi("/openapi.json", app)
    # valid bodies and broken ones (wrong types, missing fields, out-of-range values)
    loaded.config.generation.update(modes=list(schemathesis.GenerationMode))
    return loaded


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,  # the same cases on every run
)
def test_every_route_answers_within_its_declared_schema(
    case: schemathesis.Case[Any], fuzzed_vault: Vault
) -> None:
    positive = case.meta is not None and case.meta.generation.mode.is_positive
    if positive:
        case.body = _without_whole_floats(case.body, _body_schema(case), case.operation.schema)
        assume(_moments_are_servable(case, fuzzed_vault.clock()))
    generated = {k.lower(): str(v) for k, v in (case.headers or {}).items()}
    # the fuzzed vault's key, unless the case is about a malformed key header: then it
    # must reach the server as generated
    malformed = not positive and "," in generated.get("x-memory-key", "")
    headers = {} if malformed else {"X-Memory-Key": fuzzed_vault.key}
    case.call_and_validate(headers=headers, checks=CHECKS)


# --- what valid data the schema cannot tell apart from data the server refuses ----------
#
# JSON Schema counts 7.0 as an integer, and the generator sends such floats for integer
# fields; the server refuses them on purpose (an importance is an integer, not a float, a
# bool or a string) and the schema has no way to say "no 7.0". Valid cases send them as
# the integers they equal. A window whose ``from`` is after its ``to`` (or after now, when
# ``to`` is left out), and an offset that moves a moment outside the years 0001-9999 in
# UTC, are refused with 400 too and have no JSON Schema spelling either: such valid cases
# are skipped, as are reflections whose text holds their own batch id. docs/security.md
# (Input) says so.


def _body_schema(case: schemathesis.Case[Any]) -> Any:
    document = case.operation.schema.raw_schema
    operation = document["paths"][case.operation.path][case.operation.method.lower()]
    content = operation.get("requestBody", {}).get("content", {})
    return content.get("application/json", {}).get("schema")


def _resolve(schema: Any, api: BaseSchema) -> Any:
    while isinstance(schema, dict) and "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = api.raw_schema["components"]["schemas"][name]
    return schema


def _without_whole_floats(value: Any, schema: Any, api: BaseSchema) -> Any:
    """``value`` with every whole-number float that stands for an ``integer`` (and only an
    integer) made that integer; anything else unchanged."""
    schema = _resolve(schema, api)
    if not isinstance(schema, dict):
        return value
    branches = [schema, *(_resolve(b, api) for b in schema.get("anyOf", []))]
    kinds = {b["type"] for b in branches if isinstance(b, dict) and "type" in b} - {"null"}
    if isinstance(value, float) and value.is_integer() and kinds == {"integer"}:
        return int(value)
    for branch in branches:
        if isinstance(value, dict) and "properties" in branch:
            properties = branch["properties"]
            return {k: _without_whole_floats(v, properties.get(k), api) for k, v in value.items()}
        if isinstance(value, list) and "items" in branch:
            return [_without_whole_floats(v, branch["items"], api) for v in value]
    return value


def _moments_are_servable(case: schemathesis.Case[Any], now_ms: int) -> bool:
    body: dict[str, Any] = case.body if isinstance(case.body, dict) else {}
    windows: list[Any] = [case.query or {}, body, body.get("covers") or {}]
    messages: list[Any] = body.get("messages") or []
    entries: list[Any] = body.get("entries") or []
    try:
        for message in messages:
            if isinstance(message.get("date"), str):
                parse_moment(message["date"], field="date")
        if isinstance(body.get("as_of"), str):
            parse_moment(body["as_of"], field="as_of")
        for window in windows:
            start, end = window.get("from"), window.get("to")
            low = parse_moment(start, field="from") if isinstance(start, str) else None
            high = now_ms if end is None else parse_moment(end, field="to", end_of_day=True)
            if low is not None and low > high:
                return False
    except InvalidRequest:
        return False
    # a reflection's text must not name its batch (contract.check_entries)
    batch = body.get("batch_id")
    return not (isinstance(batch, str) and any(batch in str(e.get("text")) for e in entries))


def test_the_run_uses_every_check_and_both_kinds_of_data(api_schema: BaseSchema) -> None:
    names = {check.__name__ for check in CHECKS}
    assert names >= {"positive_data_acceptance", "negative_data_rejection", "unsupported_method"}
    assert len(names) == len(checks.CHECKS.get_all_names())
    assert set(api_schema.config.generation.modes) == set(schemathesis.GenerationMode)


ENVELOPE_STATUSES = {"400", "401", "403", "404", "405", "409", "413", "429", "503"}


def test_every_operation_declares_the_error_envelope_and_never_422(fuzzed_vault: Vault) -> None:
    document = fuzzed_vault.http.get("/openapi.json").json()
    envelope = {"$ref": "#/components/schemas/ErrorEnvelope"}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            responses = operation["responses"]
            assert "422" not in responses, (method, path)
            assert set(responses) >= ENVELOPE_STATUSES, (method, path)
            for status in ENVELOPE_STATUSES:
                body = responses[status]["content"]["application/json"]["schema"]
                assert body == envelope, (method, path, status)
    assert (
        "Retry-After"
        in document["paths"]["/v1/memory/search"]["post"]["responses"]["429"]["headers"]
    )
    ingest = document["paths"]["/v1/memory/ingest"]["post"]["responses"]
    assert "202" in ingest and "200" not in ingest
    assert "HTTPValidationError" not in document["components"]["schemas"]
