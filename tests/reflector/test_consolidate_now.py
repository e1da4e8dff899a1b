"""Consolidate now (``POST /v1/memory/consolidate/run``, ``consolidate-now``): a vault below
the threshold is consolidated on request with the server's reflector, in batches as small as
1,000 tokens; when nothing can be done, the answer says why."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from mcp_memoryrouter.commands import main
from tests.reflector.provider import MEMORY_LINE, Provider
from tests.reflector.served import Reflecting, reflecting, settings
from tests.support import free_port


def consolidate(served: Reflecting, *args: str) -> tuple[int, str]:
    env = {"MEMORYROUTER_API_URL": served.url, "MEMORYROUTER_KEY": served.key}
    done = CliRunner().invoke(main, list(args), env=env)
    return done.exit_code, done.output


def test_a_small_vault_is_consolidated_now_in_batches_of_1000_tokens(
    tmp_path: Path, provider: tuple[Provider, str]
) -> None:
    double, url = provider
    with reflecting(settings(tmp_path, url), double) as served:
        served.ingest(24)  # 1,200 tokens: far below the threshold
        assert served.stats()["reflection"]["suggestion"] is None
        done = served.post("/v1/memory/consolidate/run", {"max_tokens": 1000})
        assert done.status_code == 200, done.text
        answer = done.json()
        assert (answer["batches"], answer["memories"], answer["reflections"]) == (2, 24, 3)
        assert answer["stopped"] == "nothing_to_consolidate"
        assert answer["reflection"]["unconsolidated"]["raw"]["units"] == 0
        assert served.reflections() == 3
        lines = [[n for n in p.splitlines() if MEMORY_LINE.match(n)] for p in double.prompts()]
        assert [len(shown) for shown in lines] == [20, 4]
        assert lines[1][0].startswith("1. [")  # numbered: what an entry's cites name

        again = served.post("/v1/memory/consolidate/run", {})
        assert again.status_code == 200
        assert (again.json()["batches"], again.json()["stopped"]) == (0, "nothing_to_consolidate")
        assert len(double.received) == 2


def test_the_command_consolidates_now_and_turns_the_reflector_off(
    tmp_path: Path, provider: tuple[Provider, str]
) -> None:
    double, url = provider
    with reflecting(settings(tmp_path, url), double) as served:
        served.ingest(10)
        code, output = consolidate(served, "consolidate-now", "--json")
        assert code == 0, output
        assert json.loads(output)["reflections"] == 1

        code, output = consolidate(served, "server-reflector", "off")
        assert code == 0, output
        assert "for this vault: off" in output
        served.ingest(10, first=10)
        code, output = consolidate(served, "consolidate-now")
        assert code == 1
        assert "opted_out" in output
        assert len(double.received) == 1

        code, output = consolidate(served, "server-reflector", "on", "--json")
        assert code == 0 and json.loads(output)["enabled"] is True
        code, output = consolidate(served, "consolidate-now")
        assert code == 0 and "1 batch committed: 1 reflection of 10 memories" in output


def test_without_a_reflector_the_answer_says_so(tmp_path: Path) -> None:
    with reflecting(settings(tmp_path, None), Provider()) as served:
        served.ingest(10)
        refused = served.post("/v1/memory/consolidate/run", {})
        assert refused.status_code == 409
        assert refused.json()["error"]["details"] == {"reason": "no_reflector"}
        assert "MEMORYROUTER_REFLECTOR_URL" in refused.json()["error"]["message"]
        assert served.stats()["server_reflector"]["configured"] is False
        code, output = consolidate(served, "consolidate-now")
        assert code == 1 and "no reflector" in output


def test_a_run_now_is_for_a_read_write_key_and_a_valid_body(
    tmp_path: Path, provider: tuple[Provider, str]
) -> None:
    double, url = provider
    with reflecting(settings(tmp_path, url), double) as served:
        served.ingest(10)
        minted = served.post("/v1/keys", {"read_only": True})
        assert minted.status_code == 201, minted.text
        reader = minted.json()["key"]
        for key in (reader, served.key + ":read", served.key + ":write"):
            assert served.post("/v1/memory/consolidate/run", {}, key).status_code == 403
        assert (
            served.post("/v1/memory/consolidate/server", {"enabled": False}, reader).status_code
            == 403
        )
        bad = served.post("/v1/memory/consolidate/run", {"max_tokens": "lots"})
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_request"
        assert served.post("/v1/memory/consolidate/server", {"enabled": "no"}).status_code == 400
        assert double.received == []
        assert served.reflections() == 0


def test_a_failing_provider_is_a_502_and_commits_nothing(
    tmp_path: Path, provider: tuple[Provider, str]
) -> None:
    double, url = provider
    double.mode = "429"
    with reflecting(settings(tmp_path, url), double) as served:
        served.ingest(10)
        failed = served.post("/v1/memory/consolidate/run", {})
        assert failed.status_code == 502
        error = failed.json()["error"]
        assert error["code"] == "model_failure"
        assert error["details"] == {"retry_after": 120.0}
        assert served.reflections() == 0
        state = served.reflector()
        assert state["last_outcome"] == "batch_failed" and "HTTP 429" in state["last_error"]


def test_a_provider_nobody_answers_at_is_a_502_naming_it(tmp_path: Path) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    with reflecting(settings(tmp_path, closed), Provider()) as served:
        served.ingest(10)
        failed = served.post("/v1/memory/consolidate/run", {})
        assert failed.status_code == 502
        assert f"cannot reach the model provider at {closed}" in failed.json()["error"]["message"]
        assert served.reflections() == 0
        assert served.reflector()["failures"] == 1
