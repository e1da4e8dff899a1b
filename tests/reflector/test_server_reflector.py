"""The server's reflector (docs/reflector.md): on the debt suggestion a real server
consolidates the vault in the background with a provider it calls over HTTP, in each of the
three formats; the contract reaches the provider verbatim and no id does; a provider that
fails loses nothing and is tried again after the backoff; an opted-out vault is never
touched."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from mcp_memoryrouter import limits
from tests.reflector.provider import TOKENS_IN, TOKENS_OUT, Provider
from tests.reflector.served import (
    PAST_THRESHOLD,
    PROVIDER_KEY,
    reflecting,
    settings,
)
from tests.support.reflect import contract_rules

PATHS = {
    "openai": "/v1/chat/completions",
    "anthropic": "/v1/messages",
    "google": "/v1beta/models/reflector-model:generateContent",
}
KEY_HEADERS = {
    "openai": ("authorization", f"Bearer {PROVIDER_KEY}"),
    "anthropic": ("x-api-key", PROVIDER_KEY),
    "google": ("x-goog-api-key", PROVIDER_KEY),
}


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "google"])
def test_a_vault_past_the_threshold_is_consolidated_within_one_trigger(
    tmp_path: Path, provider: tuple[Provider, str], fmt: str
) -> None:
    double, url = provider
    with reflecting(settings(tmp_path, url, fmt), double) as served:
        ids = served.ingest(PAST_THRESHOLD)  # one write: the suggestion appears on its answer
        state = served.settled()
        assert state["last_outcome"] == "below_threshold", state
        assert state["last_batches"] == 1 and state["last_error"] is None
        assert served.reflections() == state["last_reflections"] == 100
        assert state["next_run_after"] is not None  # the cooldown
        assert served.stats()["reflection"]["suggestion"] is None

        [call] = double.received
        assert call.path == PATHS[fmt]
        header, value = KEY_HEADERS[fmt]
        assert call.headers[header] == value
        # the contract verbatim (version 2), then the memories as numbered [date] text, and
        # no id at all
        assert call.prompt.startswith(contract_rules(1) + "\n\n")
        assert "\n1. [2026-01-01T00:00:00.000Z] moment 00000 " in call.prompt
        assert not any(memory_id in call.prompt for memory_id in ids)
        assert not limits.holds_an_id(call.prompt)

        usage = served.get("/v1/usage")
        assert usage["reflector"] == {
            "calls": 1,
            "input_tokens": TOKENS_IN,
            "output_tokens": TOKENS_OUT,
        }
        assert set(usage["by_endpoint"]) >= {"ingest", "checkout", "commit"}
        assert "reflector" not in usage["by_endpoint"]


FAILURES = {
    "500": "answered HTTP 500",
    "429": "rate limiting (HTTP 429, Retry-After 120 s)",
    "slow": "gave no answer within 2 s",
    "garbage": "answered no text",
}


@pytest.mark.parametrize("mode", list(FAILURES))
def test_a_failing_provider_loses_nothing_and_is_tried_again_after_the_backoff(
    tmp_path: Path, provider: tuple[Provider, str], mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    double, url = provider
    double.mode = mode
    config = settings(tmp_path, url, lease_seconds=3, reflector_backoff_seconds=1)
    with reflecting(config, double) as served:
        served.ingest(PAST_THRESHOLD)
        state = served.settled("batch_failed")
        assert FAILURES[mode] in state["last_error"], state
        assert PROVIDER_KEY not in state["last_error"]
        assert FAILURES[mode] in caplog.text and PROVIDER_KEY not in caplog.text  # logged
        assert state["failures"] == 1 and state["last_batches"] == 0
        assert served.reflections() == 0  # nothing partial
        assert served.stats()["tiers"]["1"]["count"] == PAST_THRESHOLD
        next_run = datetime.fromisoformat(state["next_run_after"].replace("Z", "+00:00"))
        wait = (next_run - datetime.fromtimestamp(served.clock(), UTC)).total_seconds()
        assert 100 < wait <= 120 if mode == "429" else wait <= 1
        if mode == "429":
            return
        calls = len(double.received)

        double.mode = "ok"
        served.ingest(1, first=PAST_THRESHOLD)  # within the backoff: no run
        assert len(double.received) == calls
        assert served.reflector()["last_run"] == state["last_run"]

        served.clock.advance(3.2)  # the backoff is over, and the failed batch's lease has run out
        served.ingest(1, first=PAST_THRESHOLD + 1)
        again = served.settled("below_threshold")
        assert again["failures"] == 0 and again["last_error"] is None
        assert served.reflections() == 100
        # the batch that failed is the one consolidated now: the oldest 1,000 memories
        assert "] moment 00000 " in double.received[-1].prompt
        raw = served.stats()["reflection"]["unconsolidated"]["raw"]
        assert raw["units"] == PAST_THRESHOLD + 2 - 1000


def test_a_vault_opted_out_is_never_touched(tmp_path: Path, provider: tuple[Provider, str]) -> None:
    double, url = provider
    with reflecting(settings(tmp_path, url), double) as served:
        off = served.post("/v1/memory/consolidate/server", {"enabled": False})
        assert off.status_code == 200, off.text
        assert off.json()["enabled"] is False and off.json()["configured"] is True
        served.ingest(PAST_THRESHOLD)
        assert served.stats()["reflection"]["suggestion"] is not None
        now = served.post("/v1/memory/consolidate/run", {})
        assert now.status_code == 409
        assert now.json()["error"]["details"] == {"reason": "opted_out"}
        assert "POST /v1/memory/consolidate/server" in now.json()["error"]["message"]
        other = served.another_vault()  # woken after it: once its run ended, the first
        other.ingest(PAST_THRESHOLD)  # vault's notice was long handled (and refused)
        other.settled("below_threshold")
        assert len(double.received) == 1  # the other vault's batch, nothing of this one
        state = served.reflector()
        assert state["last_run"] is None and state["enabled"] is False
        assert served.stats()["server_reflector"] == state
        assert served.reflections() == 0
