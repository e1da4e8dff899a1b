"""The sealing key from MEMORYROUTER_SEALING_KEY_FILE or MEMORYROUTER_SEALING_KEY (what
replicas share) instead of the data directory's file."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from mcp_memoryrouter.app import create_server
from mcp_memoryrouter.auth.sealing import SEALING_KEY_FILE
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.errors import ConfigError


def test_a_missing_sealing_key_file_stops_the_server(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path / "data", embeddings="none", sealing_key_file=tmp_path / "nowhere.key"
    )
    with pytest.raises(ConfigError, match="MEMORYROUTER_SEALING_KEY_FILE"):
        create_server(settings)


@pytest.mark.parametrize("how", ["file", "value"])
def test_a_given_sealing_key_is_used_and_none_made(tmp_path: Path, how: str) -> None:
    key = Fernet.generate_key()
    path = tmp_path / "sealing.key"
    path.write_bytes(key + b"\n")
    given = {"sealing_key_file": path} if how == "file" else {"sealing_key": key.decode()}
    data = tmp_path / "data"
    server = create_server(Settings(data_dir=data, embeddings="none", **given))
    assert server.oauth is not None
    sealed = server.oauth.provider.seal("mr_secret")
    assert Fernet(key).decrypt(sealed.encode()) == b"mr_secret"
    assert not (data / SEALING_KEY_FILE).exists()
    assert server.service is not None
    server.service.close()
    server.oauth.store.close()
