"""What the server's reflector commits is the reflector's (``stored_by.surface``), with the
key of the request that asked for the run, whatever surface that request came through: a
real server on loopback, the provider double."""

from __future__ import annotations

from pathlib import Path

from tests.reflector.provider import Provider
from tests.reflector.served import reflecting, settings


def test_a_run_now_commits_reflections_stored_by_the_reflector(
    tmp_path: Path, provider: tuple[Provider, str]
) -> None:
    double, url = provider
    with reflecting(settings(tmp_path, url), double) as served:
        served.ingest(10)
        done = served.post("/v1/memory/consolidate/run", {"max_tokens": 1000})
        assert done.status_code == 200, done.text
        assert done.json()["reflections"] >= 1
        window = served.post("/v1/memory/date-search", {"from": "0001-01-01", "tiers": [2]}).json()[
            "memories"
        ]
        keys = served.get("/v1/keys")["keys"]
    assert window
    for row in window:
        assert row["stored_by"]["surface"] == "reflector"
        assert row["stored_by"]["key_id"] in {k["id"] for k in keys}
