"""A key's rate-limit budget is shared by every replica over one PostgreSQL: requests spread
over three servers on loopback are throttled at the budget, exactly (the bucket lives in the
database and refills by the database's clock), through HTTP and through the in-process
carrier alike."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx2
import pytest

from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.errors import RateLimited
from mcp_memoryrouter.vault.app import build_service, create_vault_app, front_of, in_process
from mcp_memoryrouter.vault.http.api import VaultApp
from mcp_memoryrouter.vault.http.ratelimit import SharedBuckets, TokenBuckets
from mcp_memoryrouter.vault.service import VaultService
from tests import pg
from tests.support import live_server

BUDGET = 6
pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_url(postgres_databases: pg.Databases) -> Iterator[str]:
    url = postgres_databases.create()
    yield url
    postgres_databases.release(url)


Replica = tuple[str, VaultApp, VaultService]


def replicas(url: str, tmp_path: Path, count: int, stack: ExitStack) -> list[Replica]:
    """``count`` vault servers over one database: (base URL, app, service) each."""
    served: list[Replica] = []
    for i in range(count):
        settings = Settings(
            database_url=url,
            data_dir=tmp_path / f"replica-{i}",
            embeddings="none",
            rate_limit_per_minute=BUDGET,
        )
        service, kind = build_service(settings, start_worker=False)
        stack.callback(service.close)
        app = create_vault_app(settings, service=service, store_kind=kind)
        served.append((stack.enter_context(live_server(app)), app, service))
    return served


def key_on(service: VaultService) -> str:
    key, _ = service.create_vault()
    return key


def test_a_key_gets_its_budget_once_across_three_replicas(pg_url: str, tmp_path: Path) -> None:
    with ExitStack() as stack:
        servers = replicas(pg_url, tmp_path, 3, stack)
        assert all(isinstance(front_of(app).budgets, SharedBuckets) for _, app, _ in servers)
        key = key_on(servers[0][2])
        other = key_on(servers[1][2])
        statuses = []
        for base, *_ in itertools.islice(itertools.cycle(servers), BUDGET + 3):
            answer = httpx2.get(
                base + "/v1/memory/stats", headers={"Authorization": f"Bearer {key}"}
            )
            statuses.append(answer.status_code)
            if answer.status_code == 429:
                assert int(answer.headers["retry-after"]) >= 1
        # the burst is the budget: six pass, whichever replica they reach, then every one waits
        assert statuses == [200] * BUDGET + [429] * 3
        # the same key with a mode suffix spends the same budget; another key has its own
        read = httpx2.get(
            servers[2][0] + "/v1/memory/stats", headers={"Authorization": f"Bearer {key}:read"}
        )
        assert read.status_code == 429
        for base, *_ in servers:
            fresh = httpx2.get(
                base + "/v1/memory/stats", headers={"Authorization": f"Bearer {other}"}
            )
            assert fresh.status_code == 200


@pytest.mark.anyio
async def test_the_in_process_carrier_spends_the_same_shared_budget(
    pg_url: str, tmp_path: Path
) -> None:
    with ExitStack() as stack:
        (base, _, service), (_, twin, _) = replicas(pg_url, tmp_path, 2, stack)
        key = key_on(service)
        carried = VaultClient(
            "http://vault.internal",
            key,
            carrier=in_process(twin),
            longest_wait=0,
        )
        for _ in range(BUDGET // 2):  # half the budget over HTTP on one replica
            answer = httpx2.get(base + "/v1/memory/stats", headers={"X-Memory-Key": key})
            assert answer.status_code == 200
        for _ in range(BUDGET - BUDGET // 2):  # the other half carried in-process on the other
            await carried.stats()
        with pytest.raises(RateLimited):
            await carried.stats()
        await carried.aclose()


def test_sqlite_keeps_budgets_in_memory(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, embeddings="none", rate_limit_per_minute=BUDGET)
    service, kind = build_service(settings, start_worker=False)
    try:
        app = create_vault_app(settings, service=service, store_kind=kind)
        assert isinstance(front_of(app).budgets, TokenBuckets)
    finally:
        service.close()
