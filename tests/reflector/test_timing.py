"""How long a vault waits between the server's reflector's runs, and where each format's
call goes (pure: no server)."""

from __future__ import annotations

import pytest

from mcp_memoryrouter.reflect.batch import BatchResult
from mcp_memoryrouter.reflect.loop import RunReport
from mcp_memoryrouter.reflector.provider import Provider
from mcp_memoryrouter.reflector.runs import Timing

TIMING = Timing(cooldown_seconds=1800, backoff_seconds=60, backoff_max_seconds=21_600)
GOOD = BatchResult(1, "cb_00000001", 10, 2)
BAD = BatchResult(1, "cb_00000002", 10, failure="ProviderFailure: HTTP 500")


def test_a_run_that_committed_waits_the_cooldown_and_one_that_found_nothing_none() -> None:
    assert TIMING.wait(RunReport((GOOD,), "below_threshold", None), 0, None) == 1800
    assert TIMING.wait(RunReport((), "nothing_to_consolidate", None), 3, None) == 0


@pytest.mark.parametrize(
    ("failures", "retry_after", "wait"),
    [(0, None, 60), (1, None, 120), (3, None, 480), (20, None, 21_600), (0, 120.0, 120)],
)
def test_a_failed_run_backs_off_doubling_up_to_the_cap_and_at_least_retry_after(
    failures: int, retry_after: float | None, wait: float
) -> None:
    failed = RunReport((GOOD, BAD), "batch_failed", None)
    assert TIMING.wait(failed, failures, retry_after) == wait
    assert TIMING.wait(None, failures, retry_after) == wait  # the vault unreachable


@pytest.mark.parametrize(
    ("fmt", "url", "endpoint"),
    [
        ("openai", "http://127.0.0.1:11434", "http://127.0.0.1:11434/v1/chat/completions"),
        ("openai", "https://api.example.com/v1/", "https://api.example.com/v1/chat/completions"),
        ("anthropic", "https://api.anthropic.com", "https://api.anthropic.com/v1/messages"),
        ("google", "https://g.example", "https://g.example/v1beta/models/m:generateContent"),
        ("google", "https://g.example/v1", "https://g.example/v1/models/m:generateContent"),
    ],
)
def test_each_format_posts_where_its_provider_answers(fmt: str, url: str, endpoint: str) -> None:
    provider = Provider(url, fmt, "m", "sk-x")  # type: ignore[arg-type]
    assert provider.endpoint() == endpoint
    headers, body = provider.request("the input")
    assert "sk-x" in "".join(headers.values())
    assert "the input" in repr(body)
    assert "sk-x" not in repr(provider)
