from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import Vault
from tests.support.vaults import LimitedVault, Owned, fill


@pytest.fixture
def limited(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[LimitedVault]:
    """``@pytest.mark.parametrize("limited", [(per_minute, burst)], indirect=True)``."""
    per_minute, burst = getattr(request, "param", (60, 3))
    vault = LimitedVault(tmp_path, per_minute, burst)
    yield vault
    vault.close()


@pytest.fixture
def owned(vault: Vault) -> Owned:
    return fill(vault, vault.key)
