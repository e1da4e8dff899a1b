"""What ``serve`` tells a person at start: where it listens, where the data is, the first
run's key, and the next step for each client.

The text is built by pure functions from what the composition root knows; the only I/O here
is :func:`keep_first_key`, which decides where a new vault's key may go. A key printed on a
service manager's or container's output ends up in its logs, so it goes to a terminal only;
otherwise it is written once to a 0600 file in the data directory and the file is named.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from mcp_memoryrouter.private import open_private

INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
FIRST_KEY_FILE = "first-run.key"
KEY_PLACEHOLDER = "<your memory key>"


@dataclass(frozen=True)
class Listening:
    base_url: str  # the public origin, no trailing slash
    data_dir: Path | None  # None when /mcp proxies to a remote API
    stdio_command: tuple[str, ...]  # how a local client starts this program's `stdio`


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
    if where.data_dir is not None:
        lines.append(f"  data          {where.data_dir}")
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
        "  claude.ai and ChatGPT connectors need this server at a public HTTPS URL",
        "  (README: 'A public HTTPS URL'); they sign in in the browser, no key to paste.",
    ]
