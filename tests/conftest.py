from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import Vault, make_vault


@pytest.fixture
def vault(tmp_path: Path) -> Iterator[Vault]:
    v = make_vault(tmp_path)
    yield v
    v.http.close()
    v.store.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
