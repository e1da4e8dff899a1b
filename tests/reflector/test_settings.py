"""The reflector's settings: a key from a file only the server's user may read, and settings
that describe a reflector that cannot work refused at start, saying what to change."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from mcp_memoryrouter.app import create_server
from mcp_memoryrouter.errors import ConfigError
from tests.reflector.provider import Provider
from tests.reflector.served import PROVIDER_KEY, reflecting, settings


def key_file(tmp_path: Path, mode: int) -> Path:
    path = tmp_path / "provider.key"
    path.write_text(PROVIDER_KEY + "\n", encoding="utf-8")
    os.chmod(path, mode)
    return path


def test_the_key_is_read_from_a_0600_file(tmp_path: Path, provider: tuple[Provider, str]) -> None:
    double, url = provider
    path = key_file(tmp_path, 0o600)
    config = settings(
        tmp_path / "data", url, "anthropic", reflector_key=None, reflector_key_file=path
    )
    with reflecting(config, double) as served:
        served.ingest(10)
        assert served.post("/v1/memory/consolidate/run", {}).status_code == 200
    assert double.received[0].headers["x-api-key"] == PROVIDER_KEY


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"reflector_key": None, "reflector_key_file": "wide"}, "chmod 600"),
        ({"reflector_key_file": "private"}, "not both"),
        ({"reflector_model": None}, "MEMORYROUTER_REFLECTOR_MODEL"),
        ({"api_url": "http://127.0.0.1:9"}, "MEMORYROUTER_API_URL"),
    ],
)
def test_a_reflector_that_cannot_work_stops_the_start(
    tmp_path: Path, extra: dict[str, object], says: str
) -> None:
    files = {"wide": key_file(tmp_path, 0o644), "private": tmp_path / "private.key"}
    files["private"].write_text(PROVIDER_KEY, encoding="utf-8")
    os.chmod(files["private"], 0o600)
    chosen: dict[str, Any] = {
        k: files.get(v, v) if isinstance(v, str) else v for k, v in extra.items()
    }
    with pytest.raises(ConfigError) as refused:
        create_server(settings(tmp_path / "data", "http://127.0.0.1:9", **chosen))
    assert says in str(refused.value)
    assert PROVIDER_KEY not in str(refused.value)
