"""Two replicas over one PostgreSQL database, both woken by writes while a run is under way,
consolidate the vault once: the run's hold on the vault is a row every replica shares."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from mcp_memoryrouter.config import Settings
from tests import pg
from tests.reflector.provider import Provider
from tests.reflector.served import reflecting, settings, wait_until


@pytest.fixture
def pg_url(postgres_databases: pg.Databases) -> Iterator[str]:
    url = postgres_databases.create()
    yield url
    postgres_databases.release(url)


def test_two_replicas_woken_at_once_consolidate_the_vault_once(
    tmp_path: Path, provider: tuple[Provider, str], pg_url: str
) -> None:
    double, url = provider
    double.mode, double.delay = "slow", 4.0  # the first run is still waiting on its model...

    def replica(n: int) -> Settings:
        return settings(
            tmp_path / f"replica{n}",
            url,
            database_url=pg_url,
            db_pool_min=0,
            db_pool_max=2,
            reflector_timeout_seconds=20,
        )

    with ExitStack() as stack:
        one = stack.enter_context(reflecting(replica(1), double))
        two = stack.enter_context(reflecting(replica(2), double, one.key))
        one.ingest(1_000)  # 50,000 tokens: the suggestion, and replica 1's run
        wait_until(lambda: double.received, 10)
        two.ingest(1, first=1_000)  # ...when replica 2 is woken too
        assert two.stats()["reflection"]["suggestion"] is not None
        state = one.settled("below_threshold")
        assert two.reflector() == state
        assert len(double.received) == 1
        assert one.reflections() == 100
        assert two.stats()["reflection"]["unconsolidated"]["raw"]["units"] == 1
