"""Schemathesis over the vault's own ``/openapi.json``, in-process, with a valid key, valid
and broken data and every built-in check: no route answers 5xx, every answer matches what
the schema declares for it, every request the schema allows is accepted and every request
it forbids is refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import BaseSchema, checks

from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.vault.app import create_vault_app
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
    return _unlimited(fuzzed_vault, tmp_path_factory.mktemp("unlimited"))


def _unlimited(vault: Vault, data_dir: Path) -> BaseSchema:
    # the same service without the rate limit: hundreds of cases must reach the routes
    settings = Settings(data_dir=data_dir, rate_limit_per_minute=0)
    app = create_vault_app(settings, service=vault.service)
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
    # every case as generated: no valid case is skipped or rewritten, so a rule the server
    # keeps and the document does not say fails here
    case.call_and_validate(headers=_key(case, fuzzed_vault), checks=CHECKS)


def _key(case: schemathesis.Case[Any], vault: Vault) -> dict[str, str]:
    """The vault's key, unless the case is about a malformed key header: that one must
    reach the server as generated (and be refused)."""
    positive = case.meta is not None and case.meta.generation.mode.is_positive
    generated = {k.lower(): str(v) for k, v in (case.headers or {}).items()}
    malformed = not positive and "," in generated.get("x-memory-key", "")
    return {} if malformed else {"X-Memory-Key": vault.key}


def test_calls_chained_by_their_answers_stay_within_the_schema(tmp_path: Path) -> None:
    """The stateful run (a key minted then revoked, a batch checked out then committed),
    with the checks that look back at earlier calls: use_after_free and
    ensure_resource_availability among every other. A vault of its own: the run may wipe
    it and revoke keys."""
    for name in ("vault", "unlimited"):
        (tmp_path / name).mkdir()
    vault = make_vault(tmp_path / "vault")
    loaded = _unlimited(vault, tmp_path / "unlimited")

    class Chained(loaded.as_state_machine()):  # type: ignore[misc]
        def get_call_kwargs(self, case: schemathesis.Case[Any]) -> dict[str, Any]:
            return {"headers": _key(case, vault)}

        def validate_response(
            self, response: Any, case: schemathesis.Case[Any], **kwargs: Any
        ) -> None:
            super().validate_response(response, case, additional_checks=CHECKS, **kwargs)

    try:
        Chained.run(
            settings=settings(
                max_examples=15,
                stateful_step_count=6,
                deadline=None,
                suppress_health_check=list(HealthCheck),
                derandomize=True,
            )
        )
    finally:
        vault.http.close()
        vault.store.close()


def test_the_run_uses_every_check_and_both_kinds_of_data(api_schema: BaseSchema) -> None:
    names = {check.__name__ for check in CHECKS}
    assert names >= {
        "positive_data_acceptance",
        "negative_data_rejection",
        "unsupported_method",
        "missing_required_header",
        "ignored_auth",  # it probes without a key and with a wrong one: the schemes say where
        "use_after_free",
        "ensure_resource_availability",
    }
    assert len(names) == len(checks.CHECKS.get_all_names())
    assert set(api_schema.config.generation.modes) == set(schemathesis.GenerationMode)
    # the coverage phase is where unsupported methods and missing headers are tried
    phases = api_schema.config.phases_for(operation=None)
    assert phases.examples.enabled and phases.coverage.enabled and phases.fuzzing.enabled
    assert "securitySchemes" in api_schema.raw_schema["components"]


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
