"""The model adapters: a command over stdin/stdout, an OpenAI-compatible chat endpoint."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import anyio
import httpx2
import pytest

from mcp_memoryrouter.errors import ModelFailure
from mcp_memoryrouter.reflect.batch import BatchResult, consolidate_batch
from mcp_memoryrouter.reflect.models import (
    ChatModel,
    CommandModel,
    chat_completions_url,
    model_key_from,
)
from tests.reflect.model_program import entries
from tests.support.reflect import Served, assert_no_ids

pytestmark = pytest.mark.anyio
PYTHON = shlex.quote(sys.executable)


def python(code: str) -> str:
    return f"{PYTHON} -c {shlex.quote(code)}"


async def test_a_command_reads_the_input_on_stdin_and_answers_on_stdout() -> None:
    model = CommandModel(python("import sys; print(sys.stdin.read().upper(), end='')"))
    assert await model("héllo\nworld") == "HÉLLO\nWORLD"


async def test_a_command_that_fails_names_its_status_and_stderr() -> None:
    model = CommandModel(python("import sys; sys.stderr.write('no quota'); sys.exit(3)"))
    with pytest.raises(ModelFailure, match=r"status 3: no quota"):
        await model("x")


async def test_a_command_that_fails_saying_why_on_stdout_names_that() -> None:
    """As ``claude -p`` does when signed out: the reason on stdout, status 1."""
    code = "print('Not logged in · Please run /login'); raise SystemExit(1)"
    with pytest.raises(ModelFailure, match=r"status 1: Not logged in"):
        await CommandModel(python(code))("x")


async def test_a_command_that_answers_without_reading_its_input_is_heard() -> None:
    """A megabyte of input the command never reads: its answer counts, as with
    ``subprocess.run`` (the unread input is dropped, never an error of ours)."""
    model = CommandModel(python("print('[]', flush=True)"))
    assert (await model("x" * 1_048_576)).strip() == "[]"


async def test_a_cancelled_call_kills_the_command(tmp_path: Path) -> None:
    """What a stopping ``auto --watch`` relies on: no model command runs on unread."""
    pid_file = tmp_path / "pid"
    code = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    model = CommandModel(python(code))
    with anyio.move_on_after(30) as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(model, "x")
            while not pid_file.exists() or not pid_file.read_text():
                await anyio.sleep(0.02)
            group.cancel_scope.cancel()
    assert not scope.cancelled_caught  # cancelled at once, not after the 30 s
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_a_command_that_does_not_answer_in_time_is_a_model_failure() -> None:
    model = CommandModel(python("import threading; threading.Event().wait()"), timeout=0.5)
    with pytest.raises(ModelFailure, match=r"within 0\.5 s"):
        await model("x")


async def test_a_missing_command_is_a_model_failure_naming_the_exception() -> None:
    with pytest.raises(ModelFailure, match="FileNotFoundError"):
        await CommandModel("/nonexistent/model --flag")("x")


def test_an_empty_command_is_refused_up_front() -> None:
    with pytest.raises(ValueError, match="empty"):
        CommandModel("   ")


def chat_answer(content: object) -> dict[str, object]:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}


async def test_the_chat_adapter_posts_one_user_message_with_the_key() -> None:
    seen: list[httpx2.Request] = []

    def endpoint(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, json=chat_answer('[{"text": "t", "importance": 3}]'))

    model = ChatModel(
        "https://llm.example/", "small-1", "sk-test", transport=httpx2.MockTransport(endpoint)
    )
    assert await model("the input") == '[{"text": "t", "importance": 3}]'
    await model.aclose()
    (request,) = seen
    assert str(request.url) == "https://llm.example/v1/chat/completions"
    assert request.headers["Authorization"] == "Bearer sk-test"
    assert json.loads(request.content) == {
        "model": "small-1",
        "messages": [{"role": "user", "content": "the input"}],
    }


@pytest.mark.parametrize(
    ("response", "match"),
    [
        (httpx2.Response(429, json={"error": "slow down"}), "HTTP 429"),
        (httpx2.Response(200, json={"choices": []}), "IndexError"),
        (httpx2.Response(200, text="not json"), "no chat message"),
        (httpx2.Response(200, json=chat_answer(None)), "without text"),
    ],
)
async def test_a_chat_endpoint_without_a_usable_answer_is_a_model_failure(
    response: httpx2.Response, match: str
) -> None:
    model = ChatModel("http://llm", "m", transport=httpx2.MockTransport(lambda request: response))
    with pytest.raises(ModelFailure, match=match):
        await model("x")
    await model.aclose()


async def test_an_unreachable_chat_endpoint_names_the_exception() -> None:
    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("")

    model = ChatModel("http://llm", "m", transport=httpx2.MockTransport(refuse))
    with pytest.raises(ModelFailure, match="ConnectError"):
        await model("x")
    await model.aclose()


def test_a_base_url_ending_in_v1_is_not_doubled() -> None:
    assert chat_completions_url("http://h:8080") == "http://h:8080/v1/chat/completions"
    assert chat_completions_url("https://api.x/v1/") == "https://api.x/v1/chat/completions"


def test_the_model_key_comes_from_memoryrouter_model_key_then_openai_api_key() -> None:
    assert model_key_from({"OPENAI_API_KEY": "b", "MEMORYROUTER_MODEL_KEY": "a"}) == "a"
    assert model_key_from({"OPENAI_API_KEY": "b"}) == "b"
    assert model_key_from({}) is None


async def test_a_chat_endpoint_model_consolidates_a_batch_of_a_real_vault(served: Served) -> None:
    prompts: list[str] = []

    def provider(request: httpx2.Request) -> httpx2.Response:
        prompt = json.loads(request.content)["messages"][0]["content"]
        prompts.append(prompt)
        return httpx2.Response(
            200, json=chat_answer(f"```json\n{json.dumps(entries(prompt))}\n```")
        )

    served.ingest(30)
    model = ChatModel("http://llm", "m", "k", transport=httpx2.MockTransport(provider))
    client = served.client()
    result = await consolidate_batch(client, model, 1)
    await client.aclose()
    await model.aclose()
    assert isinstance(result, BatchResult) and result.committed
    assert (result.memories, result.reflections) == (30, 3)
    assert_no_ids(prompts)
