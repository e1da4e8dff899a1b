"""What ``serve`` tells a person at start: where it listens, where the data is, the first
run's key, and the next step for each client.

The text is built by pure functions from what the composition root knows; the only I/O here
is :func:`keep_first_key`, which decides where a new vault's key may go. A key printed on a
service manager's or container's output ends up in its logs, so it goes to a terminal only;
otherwise it is written once to a 0600 file in the data directory and the file is named.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from mcp_memoryrouter.private import open_private

INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
FIRST_KEY_FILE = "first-run.key"
SERVING_FILE = "serving.json"  # which process serves the data directory, and at what URL
KEY_PLACEHOLDER = "<your memory key>"


@dataclass(frozen=True)
class Listening:
    base_url: str  # the public origin, no trailing slash
    data_dir: Path | None  # None when /mcp proxies to a remote API
    stdio_command: tuple[str, ...]  # how a local client starts this program's `stdio`
    explorer: bool = True  # the explorer's pages at /ui
    signin: str = "key"  # how people sign in on the OAuth pages: key | oidc
    ranker: str | None = None  # how search ranks (vault/search/learned.describe), when served here


@dataclass(frozen=True)
class FirstKey:
    """A new vault's key, and where it was put: shown on the terminal, or in ``file``."""

    vault_ref: str
    key: str
    file: Path | None


def stdio_command(argv0: str = sys.argv[0], python: str = sys.executable) -> tuple[str, ...]:
    """The absolute command of this program's ``stdio``: a bare ``mcp-memoryrouter`` is not
    on the PATH of a desktop app that runs outside the virtual environment."""
    path = Path(argv0)
    if path.name in ("mcp-memoryrouter", "mcp-memoryrouter.exe") and path.exists():
        return (str(path.absolute()), "stdio")
    return (str(Path(python).absolute()), "-m", "mcp_memoryrouter", "stdio")


def keep_first_key(vault_ref: str, key: str, data_dir: Path, *, terminal: bool) -> FirstKey:
    if terminal:
        return FirstKey(vault_ref, key, None)
    path = data_dir / FIRST_KEY_FILE
    fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(key + "\n")
    return FirstKey(vault_ref, key, path)


def banner(where: Listening, first: FirstKey | None, version: str) -> str:
    lines = [
        f"mcp-memoryrouter {version}",
        f"  MCP endpoint  {where.base_url}/mcp",
        f"  REST API      {where.base_url}/v1  (schema: {where.base_url}/openapi.json)",
    ]
    if where.explorer:
        lines.append(f"  explorer      {where.base_url}/ui  (open it in a browser)")
    if where.data_dir is not None:
        lines.append(f"  data          {where.data_dir}")
    if where.ranker is not None:
        lines.append(f"  search ranks  {where.ranker}")
    lines += ["", *_first_key_lines(first), *_next_steps(where, _shown_key(first))]
    return "\n".join(lines)


def _shown_key(first: FirstKey | None) -> str | None:
    return first.key if first is not None and first.file is None else None


def _first_key_lines(first: FirstKey | None) -> list[str]:
    if first is None:
        return []
    if first.file is None:
        return [
            f"Created vault {first.vault_ref}. Its memory key is shown only now; keep it safe:",
            f"  {first.key}",
            "",
        ]
    return [
        f"Created vault {first.vault_ref}. Its memory key was written to {first.file}",
        "(readable by you alone, since this output is not a terminal and may be logged):",
        "read it, keep it safe, then delete the file.",
        "",
    ]


def _next_steps(where: Listening, key: str | None) -> list[str]:
    mcp = f"{where.base_url}/mcp"
    shown = key or KEY_PLACEHOLDER
    header = shlex.quote(f"Authorization: Bearer {shown}")
    desktop = {
        "mcpServers": {
            "memoryrouter": {
                "command": where.stdio_command[0],
                "args": list(where.stdio_command[1:]),
                "env": {"MEMORYROUTER_API_URL": where.base_url, "MEMORYROUTER_KEY": shown},
            }
        }
    }
    stdio = " ".join(shlex.quote(part) for part in where.stdio_command)
    return [
        "Connect a client" + ("" if key else f" ({KEY_PLACEHOLDER}: a key of your vault)") + ":",
        "  MCP Inspector (Node 22):",
        f"    npx {INSPECTOR} --cli --transport http --server-url {mcp} \\",
        f"      --header {header} --method tools/list",
        "  Claude Code, over HTTP:",
        f"    claude mcp add --transport http memoryrouter {mcp} --header {header}",
        "  Claude Code, over stdio (through this server):",
        f"    claude mcp add memoryrouter --env MEMORYROUTER_API_URL={where.base_url} \\",
        f"      --env MEMORYROUTER_KEY={shlex.quote(shown)} -- {stdio}",
        "  Claude desktop, in claude_desktop_config.json:",
        f"    {json.dumps(desktop)}",
        *_connector_lines(where, mcp),
    ]


def _connector_lines(where: Listening, mcp: str) -> list[str]:
    """claude.ai's and ChatGPT's custom connectors: the URL to paste once this server is
    public, and how the person signs in there."""
    signing_in = (
        "the person signs in with the identity provider, no key to paste"
        if where.signin == "oidc"
        else "the person signs in once in the browser with a memory key"
    )
    if where.base_url.startswith("https://"):
        return [
            "  claude.ai and ChatGPT: add a custom connector with this URL:",
            f"    {mcp}",
            f"  ({signing_in}).",
        ]
    return [
        "  claude.ai and ChatGPT connectors need this server at a public HTTPS URL",
        f"  (README: 'A public HTTPS URL'); {signing_in}.",
    ]


def announce_serving(data_dir: Path, host: str, port: int, pid: int | None = None) -> Path:
    """Write where this process serves ``data_dir`` (0600), so that ``stdio`` started on
    the same directory goes through it instead of failing: its process id and the URL a
    local client reaches it at (the loopback address when it listens on every one)."""
    reach = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    if ":" in reach and not reach.startswith("["):
        reach = f"[{reach}]"
    path = data_dir / SERVING_FILE
    fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(
            {"pid": os.getpid() if pid is None else pid, "url": f"http://{reach}:{port}"}, handle
        )
    return path


def serving_url(data_dir: Path, pid: str) -> str | None:
    """The URL the process ``pid`` announced for ``data_dir``; None when it announced none
    (an older version, or a process that is not ``serve``)."""
    try:
        found = json.loads((data_dir / SERVING_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict) or str(found.get("pid")) != pid.strip():
        return None
    url = found.get("url")
    return url if isinstance(url, str) and url.startswith("http://") else None


def withdraw_serving(path: Path) -> None:
    """Remove the announcement at exit (a stale one is ignored anyway: its process id no
    longer holds the directory)."""
    with contextlib.suppress(OSError):
        path.unlink()
