"""Schemathesis over the vault's own ``/openapi.json``, in-process, with a valid key: no
route answers 5xx, and every answer matches what the schema declares for it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import BaseSchema, checks

from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.vault.app import create_vault_app
from tests.support import Vault, make_vault

CHECKS: list[schemathesis.CheckFunction] = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.response_headers_conformance,
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
    derandomize=True,
)
def test_every_route_answers_within_its_declared_schema(
    case: schemathesis.Case[Any], fuzzed_vault: Vault
) -> None:
    case.call_and_validate(headers={"X-Memory-Key": fuzzed_vault.key}, checks=CHECKS)


ENVELOPE_STATUSES = {"400", "401", "403", "404", "409", "413", "429", "503"}


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
