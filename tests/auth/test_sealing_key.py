"""The sealing key from MEMORYROUTER_SEALING_KEY_FILE or MEMORYROUTER_SEALING_KEY (what
replicas share) instead of the data directory's file."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from mcp.server.request_state import RequestStateSecurity

from mcp_memoryrouter.app import create_server, request_state_key
from mcp_memoryrouter.auth.state import REQUEST_STATE_KEY_FILE
from mcp_memoryrouter.auth.state.sealing import SEALING_KEY_FILE, SealedElsewhere, Sealer
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.errors import ConfigError
from mcp_memoryrouter.ui.sessions import UiSessions
from tests.support.oauth import grant_tokens, oauth_server_at, refresh


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


@pytest.mark.anyio
async def test_a_replica_with_another_sealing_key_fails_loudly_and_revokes_nothing(
    tmp_path: Path,
) -> None:
    """A grant it cannot open is a server error on that replica: the refresh token is not
    spent and the grant not revoked, so the person's connector keeps working where the key
    is right."""
    right, wrong = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    with oauth_server_at(tmp_path, sealing_key=right) as server:
        client_id, tokens = await grant_tokens(server)
    with oauth_server_at(tmp_path, sealing_key=wrong) as other:
        answer = refresh(other, client_id, tokens["refresh_token"])
        assert answer.status_code == 500
        assert tokens["refresh_token"] not in answer.text
    with oauth_server_at(tmp_path, sealing_key=right) as server:
        answer = refresh(server, client_id, tokens["refresh_token"])
        assert answer.status_code == 200, answer.text


def test_an_explorer_session_sealed_elsewhere_is_an_error_and_stays(tmp_path: Path) -> None:
    right, wrong = Sealer(Fernet.generate_key()), Sealer(Fernet.generate_key())
    sessions = UiSessions.in_dir(tmp_path, right)
    session = sessions.start("vr_x", "mk_secret", False, 1000.0)
    elsewhere = UiSessions.in_dir(tmp_path, wrong)
    with pytest.raises(SealedElsewhere, match="MEMORYROUTER_SEALING_KEY_FILE"):
        elsewhere.find(session.secret, 1001.0)
    found = sessions.find(session.secret, 1002.0)
    assert found is not None and found.key == "mk_secret"
    sessions.close()
    elsewhere.close()


@pytest.mark.parametrize("how", ["file", "value"])
def test_replicas_given_one_sealing_key_share_the_mcp_request_state_key(
    tmp_path: Path, how: str
) -> None:
    """A multi-round MCP call's state, sealed on one replica, opens on another: the key is
    derived from the sealing key they share (and is not that key); without one, each data
    directory keeps its own."""
    key = Fernet.generate_key()
    path = tmp_path / "sealing.key"
    path.write_bytes(key + b"\n")
    given = {"sealing_key_file": path} if how == "file" else {"sealing_key": key.decode()}
    a = request_state_key(Settings(data_dir=tmp_path / "a", **given))
    b = request_state_key(Settings(data_dir=tmp_path / "b", **given))
    assert a == b and key not in a
    assert not (tmp_path / "a" / REQUEST_STATE_KEY_FILE).exists()
    other = request_state_key(
        Settings(data_dir=tmp_path / "a", sealing_key=Fernet.generate_key().decode())
    )
    assert other != a
    alone_a = request_state_key(Settings(data_dir=tmp_path / "c"))
    alone_b = request_state_key(Settings(data_dir=tmp_path / "d"))
    assert alone_a != alone_b and alone_a != a
    assert request_state_key(Settings(data_dir=tmp_path / "c")) == alone_a  # kept on restart
    # what the SDK seals with one replica's key, the other opens
    sealed = RequestStateSecurity(keys=[a]).codec.seal(b"round 2")
    assert RequestStateSecurity(keys=[b]).codec.unseal(sealed) == b"round 2"
