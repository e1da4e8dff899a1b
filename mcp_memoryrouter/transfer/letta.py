"""Letta's agents: their core memory blocks and conversations, as its exports write them.

Two shapes, in one folder or given alone:

- an agent file (``.af``, what a Letta server's ``GET /v1/agents/{id}/export`` answers: JSON of
  ``agents``, ``blocks``, ``messages`` per agent, ``tools``, …; letta's
  ``schemas/agent_file.py``): each agent's blocks (``block_ids`` into ``blocks``: their
  ``label`` and ``value``; ``description`` and ``limit`` are not kept) and its messages
  (``role``, ``content`` parts of type ``text``, ``tool_calls``, ``created_at``);
- a memory folder (Letta Code's memory filesystem, a git repository of Markdown files:
  ``memory/system/human.md``, …): each file one block, its label the path without ``.md``,
  front matter ``description`` (``limit``, ``read_only``), the body its value.

Core memory is what the agent consolidated about its user and itself: each block becomes one
raw memory of role ``observation`` in the agent's memory session (``letta-`` and the agent's
name, ``-memory``), apart from its conversation: ``human (Letta core memory of Sam): Name:
Chad…``. A block is dated by the agent file's ``created_at``; a memory folder has no dates.

The conversation: user and assistant messages as they were said, in the agent's session
(``letta-`` and its name), dated. An assistant's reply sent through ``send_message`` is that
call's message (the text beside it was the agent's inner thoughts, skipped); a user message
Letta wrapped as JSON (``{"type": "user_message", "message": …}``) is unwrapped, and its
heartbeats, logins and system alerts are skipped, as are system and tool messages (counted).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from mcp_memoryrouter.transfer.archive import json_problem
from mcp_memoryrouter.transfer.moving import Moved, bad, moment_ms
from mcp_memoryrouter.transfer.notes import markdown_files, read_note

PRODUCT: Final = "letta"
_AGENT_FILE = ".af"


def read_letta(path: Path) -> Moved:
    moved = Moved(PRODUCT, ("agent", "agents"))
    if path.is_file():
        _agent_file(path, moved)
        return moved
    if not path.is_dir():
        raise bad(
            path,
            None,
            "neither a file nor a folder: give Letta's agent file (.af) or its memory folder",
        )
    files = sorted(p for p in path.rglob(f"*{_AGENT_FILE}") if not _hidden(p, path))
    for file in files:
        _agent_file(file, moved)
    blocks = [p for p in markdown_files(path) if p.suffix == ".md"]
    if blocks:
        _memory_folder(path, blocks, moved)
    if not files and not blocks:
        raise bad(path, None, "no agent file (.af) and no memory block (.md) in this folder")
    return moved


def _hidden(file: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in file.relative_to(root).parts)


# --- an agent file -----------------------------------------------------------------------


def _agent_file(path: Path, moved: Moved) -> None:
    try:
        value = json.loads(path.read_bytes().decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise bad(path, None, f"not UTF-8 text (byte {exc.start}): an agent file is JSON") from exc
    except json.JSONDecodeError as exc:
        raise bad(
            path, exc.lineno, f"not JSON ({json_problem(exc)} at column {exc.colno})"
        ) from exc
    if not isinstance(value, dict) or not isinstance(value.get("agents"), list):
        raise bad(path, None, 'not a Letta agent file: a JSON object with "agents" (and "blocks")')
    try:
        exported = moment_ms(value.get("created_at"))
    except ValueError as exc:
        raise bad(path, None, f"created_at: {exc}") from exc
    blocks = {str(b.get("id")): b for b in _list(path, value, "blocks", "the file")}
    attached: set[str] = set()
    for n, agent in enumerate(value["agents"], 1):
        if not isinstance(agent, dict):
            raise bad(path, None, f"agents[{n - 1}] is not an object")
        name = str(agent.get("name") or agent.get("id") or f"agent {n}")
        moved.records += 1
        for block_id in agent.get("block_ids") or []:
            attached.add(str(block_id))
            block = blocks.get(str(block_id))
            if block is None:
                raise bad(
                    path, None, f"agent {name}: block {block_id!r} is not among the file's blocks"
                )
            _block(moved, name, block, exported)
        for i, message in enumerate(_list(path, agent, "messages", f"agent {name}")):
            _message(path, f"agent {name}, messages[{i}]", moved, name, message)
    for block_id, block in blocks.items():
        if block_id not in attached:
            _block(moved, "no agent", block, exported)


def _list(path: Path, owner: dict[str, Any], key: str, what: str) -> list[dict[str, Any]]:
    items = owner.get(key) or []
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise bad(path, None, f'{what}: "{key}" is not a list of objects')
    return items


def _block(moved: Moved, agent: str, block: dict[str, Any], date_ms: int | None) -> None:
    moved.records += 1
    value = block.get("value")
    label = str(block.get("label") or block.get("id") or "block")
    if not isinstance(value, str) or not value.strip():
        moved.skip("empty memory blocks")
        return
    text = f"{label} (Letta core memory of {agent}): {value.strip()}"
    moved.session(f"{agent}-memory").add("observation", text, date_ms)


def _message(path: Path, where: str, moved: Moved, agent: str, message: dict[str, Any]) -> None:
    moved.records += 1
    role = message.get("role")
    try:
        date_ms = moment_ms(message.get("created_at"))
    except ValueError as exc:
        raise bad(path, None, f"{where}: created_at: {exc}") from exc
    text = _reply(message) if role == "assistant" else _said(_text(message))
    if text is None or role not in ("user", "assistant"):
        moved.skip("system and tool messages, inner thoughts")
        return
    moved.session(agent).add("user" if role == "user" else "assistant", text, date_ms)


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


def _reply(message: dict[str, Any]) -> str | None:
    """What the assistant said: ``send_message``'s message, else its text when it called no
    tool (a call with text beside it: the text was its inner thoughts)."""
    calls = message.get("tool_calls") or []
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and function.get("name") == "send_message":
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except (json.JSONDecodeError, TypeError):
                return None
            said = arguments.get("message") if isinstance(arguments, dict) else None
            return said if isinstance(said, str) and said.strip() else None
    if calls:
        return None
    text = _text(message)
    return text if text.strip() else None


def _said(text: str) -> str | None:
    """A user's words, unwrapped from the JSON Letta packs them in; None for its heartbeats,
    logins and system alerts."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return stripped or None
    try:
        packed = json.loads(stripped)
    except json.JSONDecodeError:
        return stripped
    if not isinstance(packed, dict) or "type" not in packed:
        return stripped
    said = packed.get("message")
    if packed["type"] == "user_message" and isinstance(said, str) and said.strip():
        return said
    return None


# --- a memory folder ---------------------------------------------------------------------


def _memory_folder(root: Path, files: list[Path], moved: Moved) -> None:
    """Letta Code's memory files: ``~/.letta/agents/<agent id>/memory/system/human.md`` is
    agent ``<agent id>``'s block ``system/human``, whether the folder given is the agents',
    the agent's or its ``memory``."""
    here = root.resolve()
    for file in files:
        parts = file.relative_to(root).with_suffix("").parts
        if "memory" in parts[:-1]:
            at = parts.index("memory")
            agent = parts[at - 1] if at else here.name
            label = "/".join(parts[at + 1 :])
        else:
            agent = here.parent.name if here.name == "memory" else here.name
            label = "/".join(parts)
        note = read_note(file)
        value = "\n".join(line for _, line in note.body)
        _block(moved, agent, {"label": str(note.front.get("label") or label), "value": value}, None)
