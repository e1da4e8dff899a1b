from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import StoreFactory, live_server, make_vault
from tests.support.reflect import (
    ModelProgram,
    Seconds,
    Served,
)


@pytest.fixture
def served(tmp_path: Path, new_store: StoreFactory) -> Iterator[Served]:
    """On SQLite, unless the test module's ``store_backend`` says otherwise."""
    vault = make_vault(tmp_path, store=new_store)
    with live_server(vault.app) as url:
        yield Served(vault, url)
    vault.http.close()
    vault.store.close()


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
