from __future__ import annotations

import os
import re
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import pytest

from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.reflect.models import CommandModel
from tests.reflect.model_program import RECORD_SEPARATOR
from tests.support import StoreFactory, Vault, live_server, make_vault

PROGRAM = Path(__file__).with_name("model_program.py")
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


@pytest.fixture
def served(tmp_path: Path, new_store: StoreFactory) -> Iterator[Served]:
    """On SQLite, unless the test module's ``store_backend`` says otherwise."""
    vault = make_vault(tmp_path, store=new_store)
    with live_server(vault.app) as url:
        yield Served(vault, url)
    vault.http.close()
    vault.store.close()


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


@pytest.fixture
def program(tmp_path: Path) -> ModelProgram:
    return ModelProgram(
        tmp_path / "model-inputs.log", {"REFLECT_TEST_LOG": str(tmp_path / "model-inputs.log")}
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The consolidation directory (``~/.memoryrouter`` in real use)."""
    return tmp_path / "home"


@pytest.fixture
def clock() -> Seconds:
    return Seconds()


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
