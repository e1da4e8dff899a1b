"""A vault behind a real uvicorn for the consolidation and transfer commands, the model
program they drive, and the chat exports they import."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import pytest

from mcp_memoryrouter import schemas
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.errors import TransportFailure
from mcp_memoryrouter.reflect.models import CommandModel
from mcp_memoryrouter.vault.rules.contract import reflection_contract
from mcp_memoryrouter.vault.rules.domain import SourceTier
from tests.reflect.model_program import RECORD_SEPARATOR
from tests.support import Vault

PROGRAM = Path(__file__).parents[1] / "reflect" / "model_program.py"


UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


START = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Served:
    """A vault behind a real uvicorn on loopback; its lease clock is ``vault.clock``."""

    vault: Vault
    url: str

    @property
    def key(self) -> str:
        return self.vault.key

    def client(self) -> VaultClient:
        return VaultClient(self.url, self.key)

    def http(self) -> httpx2.Client:
        headers = {"Authorization": f"Bearer {self.key}"}
        return httpx2.Client(base_url=self.url, headers=headers, timeout=60)

    def stats(self) -> dict[str, Any]:
        with self.http() as http:
            body: dict[str, Any] = http.get("/v1/memory/stats").json()
            return body

    def ingest(self, count: int, *, chars: int = 200, first: int = 0) -> list[str]:
        """``count`` raw memories of ``chars`` characters (``chars / 4`` tokens) each, one
        minute apart, in requests of 1,000 messages."""
        ids: list[str] = []
        with self.http() as http:
            for start in range(first, first + count, 1000):
                messages = [
                    {
                        "role": "user" if i % 2 else "assistant",
                        "content": moment(i, chars),
                        "date": (START + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    }
                    for i in range(start, min(first + count, start + 1000))
                ]
                response = http.post("/v1/memory/ingest", json={"messages": messages})
                assert response.status_code == 202, response.text
                ids += response.json()["ids"]
        return ids


def moment(i: int, chars: int) -> str:
    sentence = f"Moment {i}: Ana reviewed feature {i % 17} and fixed bug {i * 7 % 101}. "
    return (sentence * (chars // len(sentence) + 1))[: chars - 1] + "."


@dataclass
class ModelProgram:
    """``model_program.py`` and the record of every input it received."""

    log: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def command(self) -> str:
        return f"{shlex.quote(sys.executable)} {shlex.quote(str(PROGRAM))}"

    def model(self, **env: str) -> CommandModel:
        return CommandModel(self.command, timeout=60, env=self.environ(**env))

    def environ(self, **env: str) -> dict[str, str]:
        return {**os.environ, **self.env, **env}

    def inputs(self) -> list[str]:
        if not self.log.exists():
            return []
        return self.log.read_text(encoding="utf-8").split(RECORD_SEPARATOR)[:-1]


def assert_no_ids(inputs: list[str]) -> None:
    """What a model was shown never holds a memory id or a batch id."""
    assert inputs
    for text in inputs:
        assert not UUID.search(text)
        assert "cb_" not in text


class Seconds:
    """An injectable clock in unix seconds."""

    def __init__(self, start: float = 1_767_225_600.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def wait_until(condition: Callable[[], object], timeout: float = 30.0) -> None:
    """Bounded polling: return once ``condition()`` is truthy, fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


FIXTURES = Path(__file__).parents[1] / "reflect" / "fixtures"


CHATGPT = FIXTURES / "chatgpt_conversations.json"


CLAUDE = FIXTURES / "claude_conversations.json"


GPT_1 = "chatgpt-6650a1b2-0000-4000-8000-00000000c001"
GPT_2 = "chatgpt-6650a1b2-0000-4000-8000-00000000c002"
CLAUDE_1 = "claude-c1a0d0e0-0000-4000-8000-000000000001"
CLAUDE_2 = "claude-c1a0d0e0-0000-4000-8000-000000000002"

CHATGPT_STORED = [
    (GPT_1, "user", "Plan a weekend in Lisbon for me.", "2024-06-01T08:21:00.500Z"),
    (
        GPT_1,
        "assistant",
        "Day one: Alfama and the castle. Day two: Belém.",
        "2024-06-01T08:22:00.250Z",
    ),
    # the edited question and the regenerated answer, not the first versions
    (GPT_1, "user", "What about Porto in May?", "2024-06-01T08:26:00.000Z"),
    (
        GPT_1,
        "assistant",
        "In May Porto is mild, and the São João festival is still ahead.",
        "2024-06-01T08:27:40.000Z",
    ),
    # beside an image; no create_time of its own, so the conversation's
    (GPT_1, "user", "Is this the Dom Luís I bridge?", "2024-06-01T08:20:00.000Z"),
    (
        GPT_1,
        "assistant",
        "Yes, that is the Dom Luís I bridge over the Douro.",
        "2024-06-01T08:29:20.000Z",
    ),
    (GPT_2, "user", "How long should sourdough proof?", "2024-06-10T06:13:20.000Z"),
    (GPT_2, "assistant", "Four to six hours at room temperature.", "2024-06-10T06:13:50.000Z"),
]


CLAUDE_STORED = [
    (
        CLAUDE_1,
        "user",
        "Here is my reading list: which book first?",
        "2024-05-02T09:00:05.123Z",
    ),
    # the text blocks of content; +02:00 in the export
    (
        CLAUDE_1,
        "assistant",
        "Let me check the list.\n\nStart with Emma, then Dune.",
        "2024-05-02T09:00:10.000Z",
    ),
    (CLAUDE_1, "user", "Thanks!", "2024-05-02T09:00:00.000Z"),  # the conversation's date
    (CLAUDE_2, "user", "Suggest a name for a grey cat.", "2024-05-03T18:00:01.000Z"),
    (CLAUDE_2, "assistant", "Ash, Smoke or Pebble.", "2024-05-03T18:00:03.000Z"),
    (CLAUDE_2, "user", "Something Portuguese?", "2024-05-03T18:02:00.000Z"),
    (CLAUDE_2, "assistant", "Cinzento, or Nuvem.", "2024-05-03T18:02:02.000Z"),
]


def stored(served: Served) -> list[tuple[str | None, str, str, str]]:
    """Every memory of the vault in storage order: (session id, role, content, date)."""
    with served.http() as http:
        response = http.get("/v1/memory/export")
    assert response.status_code == 200, response.text
    lines = [json.loads(line) for line in response.text.splitlines()]
    return [(x.get("session_id"), x["role"], x["content"], x["date"]) for x in lines]


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4  # not UTF-8, as the real attachments


def build_zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def chatgpt_zip(path: Path, **extra: bytes) -> Path:
    return build_zip(
        path,
        {
            "chat.html": b"<html><script>var jsonData = [];</script></html>",
            "user.json": b'{"id": "user-1", "email": "ana@example.com"}',
            "message_feedback.json": b"[]",
            "file-6QnPkmKZ9Vd2aD0p4cU7Xb-IMG_0412.png": PNG,
            "dalle-generations/file-9XyZ-a-grey-cat.webp": PNG,
            "conversations.json": CHATGPT.read_bytes(),
            **extra,
        },
    )


# What str.splitlines() splits on, every other C0 control but NUL (which PostgreSQL text
# cannot hold), DEL, the C1 controls and the bidirectional overrides and isolates.
SEPARATORS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


CONTROLS = "".join(map(chr, [*range(1, 0x20), 0x7F, *range(0x80, 0xA0)]))


BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


EVERY = SEPARATORS + CONTROLS + BIDI


@contextmanager
def connection_dropped_after_one_ingest(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Within: the first ingest request goes through, every later one fails as a dropped
    connection does (an import cut half-way)."""
    real_ingest = VaultClient.ingest
    calls = 0

    async def cut_after_the_first_request(
        self: VaultClient, body: schemas.IngestRequest
    ) -> schemas.IngestResponse:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise TransportFailure("the connection dropped")
        return await real_ingest(self, body)

    with monkeypatch.context() as patch:
        patch.setattr(VaultClient, "ingest", cut_after_the_first_request)
        yield


def contract_rules(tier: SourceTier) -> str:
    """What every consolidator's model input starts with: the version-2 contract's
    instructions up to what the vault already holds (which differs batch to batch)."""
    instructions: str = reflection_contract(tier, 2)["instructions"]
    return instructions.rsplit("\n\n", 1)[0]
