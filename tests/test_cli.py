"""The command line: keys create, serve as a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx2
from click.testing import CliRunner, Result

from mcp_memoryrouter import schemas
from mcp_memoryrouter.cli import main
from mcp_memoryrouter.errors import Unauthorized
from mcp_memoryrouter.vault.service import VaultService
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from tests.support import free_port


def test_keys_create_json_prints_a_working_key_and_vault(tmp_path: Path) -> None:
    env = {"MEMORYROUTER_DATA_DIR": str(tmp_path)}
    result = CliRunner().invoke(main, ["keys", "create", "--json", "--name", "ci"], env=env)
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert set(body) == {"key", "vault", "id"}
    assert body["key"].startswith("mk_") and body["vault"].startswith("vr_")
    second = json.loads(CliRunner().invoke(main, ["keys", "create", "--json"], env=env).output)
    assert second["vault"] != body["vault"]


def _keys(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(main, ["keys", *args], env=env)


def _opens(data_dir: Path, key: str) -> str | None:
    """The vault reference ``key`` opens in ``data_dir``, or None when it opens nothing."""
    store = SQLiteStore(data_dir / "vault.sqlite3")
    try:
        return VaultService(store, clock=lambda: 0, lease_seconds=900).authenticate(key).vault_ref
    except Unauthorized:
        return None
    finally:
        store.close()


def test_keys_create_with_vault_adds_a_key_to_that_vault_instead_of_a_new_one(
    tmp_path: Path,
) -> None:
    env = {"MEMORYROUTER_DATA_DIR": str(tmp_path)}
    first = json.loads(_keys(env, "create", "--json").output)
    again = _keys(env, "create", "--vault", first["vault"], "--name", "laptop", "--json")
    assert again.exit_code == 0, again.output
    second = json.loads(again.output)
    assert second["vault"] == first["vault"] and second["key"] != first["key"]
    assert _opens(tmp_path, second["key"]) == first["vault"]
    listing = json.loads(_keys(env, "list", "--json").output)
    assert [v["vault"] for v in listing["vaults"]] == [first["vault"]]
    assert [k["id"] for k in listing["vaults"][0]["keys"]] == [first["id"], second["id"]]
    unknown = _keys(env, "create", "--vault", "vr_0000000000000000")
    assert unknown.exit_code == 1 and "vr_0000000000000000" in unknown.output


def test_keys_list_groups_keys_by_vault_and_never_prints_a_secret(tmp_path: Path) -> None:
    env = {"MEMORYROUTER_DATA_DIR": str(tmp_path)}
    one = json.loads(_keys(env, "create", "--json", "--name", "one").output)
    two = json.loads(_keys(env, "create", "--json", "--read-only", "--name", "two").output)
    text = _keys(env, "list")
    assert text.exit_code == 0, text.output
    assert text.output.index(one["vault"]) < text.output.index(one["id"])
    assert text.output.index(two["vault"]) < text.output.index(two["id"])
    assert "read-only" in text.output and one["key"][:8] in text.output
    assert one["key"] not in text.output and two["key"] not in text.output
    only = json.loads(_keys(env, "list", "--vault", two["vault"], "--json").output)
    (vault,) = only["vaults"]
    (key,) = vault["keys"]
    assert (vault["vault"], key["id"], key["read_only"]) == (two["vault"], two["id"], True)
    assert set(key) == {"id", "name", "prefix", "read_only", "created_at", "last_used_at"}


def test_keys_revoke_stops_the_key_and_warns_when_no_read_write_key_is_left(
    tmp_path: Path,
) -> None:
    env = {"MEMORYROUTER_DATA_DIR": str(tmp_path)}
    first = json.loads(_keys(env, "create", "--json").output)
    spare = json.loads(_keys(env, "create", "--vault", first["vault"], "--json").output)
    revoked = _keys(env, "revoke", spare["id"])
    assert revoked.exit_code == 0, revoked.output
    assert "warning" not in revoked.output
    assert _opens(tmp_path, spare["key"]) is None
    assert _opens(tmp_path, first["key"]) == first["vault"]
    last = _keys(env, "revoke", first["id"])
    assert last.exit_code == 0 and "warning" in last.stderr
    assert f"keys create --vault {first['vault']}" in last.stderr
    assert _opens(tmp_path, first["key"]) is None
    assert _keys(env, "revoke", first["id"]).exit_code == 1  # already gone


def test_help_explains_each_command() -> None:
    for args in (
        ["--help"],
        ["serve", "--help"],
        ["keys", "create", "--help"],
        ["keys", "list", "--help"],
        ["keys", "revoke", "--help"],
    ):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0 and "Usage:" in result.output


def test_serve_runs_a_real_server_and_prints_the_first_key_once(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "MEMORYROUTER_DATA_DIR": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_memoryrouter", "serve", "--port", str(port)],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        while "first-run.key" not in line:
            line = proc.stderr.readline()
            assert line, "serve exited before naming its key file"
        # not a terminal: the key is in a 0600 file, never on the (logged) output
        key = (tmp_path / "first-run.key").read_text().strip()
        assert key.startswith("mk_")
        deadline = time.monotonic() + 20
        while True:
            try:
                health = httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx2.TransportError:
                assert time.monotonic() < deadline, "server did not answer within 20 s"
                time.sleep(0.1)
        assert health.json()["status"] == "ok"
        response = httpx2.post(
            f"http://127.0.0.1:{port}/v1/memory/ingest",
            json={"messages": [{"content": "hello"}]},
            headers={"Authorization": f"Bearer {key}"},
        )
        assert response.status_code == 202
        # A second server on the same data directory refuses to start and says what to do,
        # instead of storing memories the running server's in-memory indexes would never
        # see (stdio goes through the running server instead: tests/mcp/test_stdio.py).
        second = subprocess.run(
            [sys.executable, "-m", "mcp_memoryrouter", "serve", "--port", str(free_port())],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 1
        assert f"already served by process {proc.pid}" in second.stderr
        assert "MEMORYROUTER_API_URL" in second.stderr and "Traceback" not in second.stderr
        # Commands that open the store only for a moment still work beside it.
        created = CliRunner().invoke(main, ["keys", "create", "--json"], env=env)
        assert created.exit_code == 0, created.output
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        if proc.stderr is not None:
            proc.stderr.close()
    # The claim ends with the process.
    SQLiteStore(tmp_path / "vault.sqlite3", serving=True).close()


HOSTILE_NAMES = [
    "\x1b[2J\x1b[Hall clear",  # clears the screen
    "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07",  # OSC 52: writes the clipboard
    "a\x9b31mb",  # C1 CSI
    "del\x7f",
    "\u202eevil\u202c",  # right-to-left override
    "\u2066isolated\u2069",
    "two\u2028lines",
    "tab\there",
]


def test_keys_create_refuses_a_name_with_control_characters_and_makes_nothing(
    tmp_path: Path,
) -> None:
    env = {"MEMORYROUTER_DATA_DIR": str(tmp_path)}
    first = json.loads(_keys(env, "create", "--json").output)
    for name in HOSTILE_NAMES:
        for args in (["--name", name], ["--vault", first["vault"], "--name", name]):
            result = _keys(env, "create", *args)
            assert result.exit_code == 2, (name, result.output)
            assert "--name" in result.output
    (vault,) = json.loads(_keys(env, "list", "--json").output)["vaults"]
    assert [k["id"] for k in vault["keys"]] == [first["id"]]


def test_keys_create_takes_names_in_any_script_with_joiners(tmp_path: Path) -> None:
    env = {"MEMORYROUTER_DATA_DIR": str(tmp_path)}
    for name in (
        "Café ☕",
        "👩\u200d💻 laptop",
        "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",
    ):
        assert _keys(env, "create", "--name", name).exit_code == 0, name


def test_keys_list_and_revoke_never_print_a_stored_name_raw(tmp_path: Path) -> None:
    """Rows written before names were checked may hold escape sequences: the terminal sees
    each control character as <U+...>."""
    env = {"MEMORYROUTER_DATA_DIR": str(tmp_path)}
    first = json.loads(_keys(env, "create", "--json").output)
    store = SQLiteStore(tmp_path / "vault.sqlite3")
    try:
        keyring = VaultService(store, clock=lambda: 0, lease_seconds=900).keys
        planted = [keyring.add_to_vault(first["vault"], n, False)[1] for n in HOSTILE_NAMES]
    finally:
        store.close()
    listed = _keys(env, "list")
    assert listed.exit_code == 0, listed.output
    revoked = _keys(env, "revoke", planted[0].id)
    assert revoked.exit_code == 0, revoked.output
    for printed in (listed.output, revoked.output):
        assert not any(schemas.hidden(c) for c in printed.replace("\n", ""))
    assert "<U+001B>[2J<U+001B>[Hall clear" in listed.output
    assert "<U+202E>evil<U+202C>" in listed.output and "<U+001B>[2J" in revoked.output
    as_json = json.loads(_keys(env, "list", "--json").output)  # JSON escapes them itself
    names = [k["name"] for k in as_json["vaults"][0]["keys"]]
    assert sorted(names) == sorted(["default", *HOSTILE_NAMES[1:]])
