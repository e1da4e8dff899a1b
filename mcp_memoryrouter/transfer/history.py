"""Chat histories exported by ChatGPT and Claude, read into conversations of plain messages.

Both exports are a ``conversations.json`` holding a JSON array of conversations. This module
only reads the loaded JSON value (no I/O); ``transfer.importer.import_history`` sends what it
returns. The whole value is checked: anything that is not the named format raises
:class:`InvalidRequest` naming the conversation (1-based, with its id) and what is wrong.

**ChatGPT**: each conversation holds its messages as a tree (``mapping``: node id to
``{parent, children, message}``); edits and regenerations are branches. The path the user
last saw is the one kept: from ``current_node`` up through the parents to the root,
reversed. Kept: user and assistant messages of content type ``text`` or
``multimodal_text`` addressed to the conversation (``recipient`` ``all``). Their string
parts are the text (and the text of a voice message's transcription part); any other part
(an image, a file) is an attachment, skipped and counted. Skipped and counted as
system/tool messages: system and tool messages, messages hidden from the conversation
(``metadata.is_visually_hidden_from_conversation``), calls to a tool, and every other
content type (code sent to a tool, reasoning, custom instructions). A message's date is its
``create_time``, else the conversation's.

**Claude**: each conversation holds ``chat_messages`` in order; ``human`` is the user.
A message's text is its ``text`` blocks of ``content`` joined by a blank line, else its
``text`` field. ``attachments`` and ``files`` are skipped and counted. When messages carry
``parent_message_uuid`` the conversation has branches, and the path kept is the newest
leaf's ancestry. A message's date is its ``created_at``, else the conversation's.

Both: messages with no text are dropped (not counted), dates become UTC ISO with
milliseconds, a lone surrogate (half an emoji cut by the exporter) becomes U+FFFD, and each
conversation is one session, named by :func:`session_id`.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from mcp_memoryrouter import limits
from mcp_memoryrouter.errors import InvalidRequest

Source = Literal["chatgpt", "claude"]
SOURCES: tuple[Source, ...] = ("chatgpt", "claude")
Role = Literal["user", "assistant"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_UNSAFE = re.compile(r"[^A-Za-z0-9._:-]+")
_SURROGATE = re.compile("[\ud800-\udfff]")
_CHATGPT_TEXT = ("text", "multimodal_text")
_CLAUDE_ROLES: dict[str, Role] = {"human": "user", "user": "user", "assistant": "assistant"}


@dataclass(frozen=True)
class HistoryMessage:
    # an observation: a fact another memory product kept (transfer.moving), not a message
    role: Role | Literal["observation"]
    text: str
    date: str  # UTC ISO with milliseconds: 2026-02-01T04:11:09.000Z


@dataclass(frozen=True)
class Conversation:
    id: str  # the export's conversation id
    session_id: str
    title: str
    messages: tuple[HistoryMessage, ...]


@dataclass
class Skipped:
    attachments: int = 0  # images and files attached to messages
    system: int = 0  # system, tool and hidden messages, and content that is not text


@dataclass(frozen=True)
class History:
    source: str  # chatgpt, claude, or a product moved from (transfer.moving)
    conversations: tuple[Conversation, ...]  # those with at least one message
    skipped: Skipped = field(default_factory=Skipped)

    @property
    def size(self) -> int:
        return sum(len(c.messages) for c in self.conversations)


def read_history(source: Source, value: object) -> History:
    """The conversations of a loaded ``conversations.json`` of ``source``."""
    if not isinstance(value, list):
        raise InvalidRequest(
            f"not a {_NAMES[source]} export: conversations.json holds a JSON array of "
            f"conversations, this file holds {_kind(value)}"
        )
    skipped = Skipped()
    read = _read_chatgpt if source == "chatgpt" else _read_claude
    conversations = []
    for number, item in enumerate(value, 1):
        conversation = read(_Where(number, source), item, skipped)
        if conversation.messages:
            conversations.append(conversation)
    return History(source, tuple(conversations), skipped)


def session_id(source: str, conversation_id: str) -> str:
    """``chatgpt-`` or ``claude-`` (or another source's name) and the conversation id,
    when that is a valid session id of letters, digits and ``._:-``; else the id with every
    other run of characters made ``-``, cut to fit, and 8 hex digits of its hash so two ids
    never meet."""
    prefix = f"{source}-"
    clean = _UNSAFE.sub("-", conversation_id)
    if clean == conversation_id and len(prefix + clean) <= limits.MAX_ID_CHARS:
        return prefix + clean
    digest = hashlib.sha256(conversation_id.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    room = limits.MAX_ID_CHARS - len(prefix) - len(digest) - 1
    stem = clean[:room].strip("-")
    return f"{prefix}{stem}-{digest}" if stem else prefix + digest


# --- shared -----------------------------------------------------------------------------

_NAMES: dict[Source, str] = {"chatgpt": "ChatGPT", "claude": "Claude"}


@dataclass(frozen=True)
class _Where:
    number: int
    source: Source
    conversation_id: str | None = None

    def named(self, conversation_id: str) -> _Where:
        return _Where(self.number, self.source, conversation_id)

    def bad(self, problem: str) -> InvalidRequest:
        named = f" ({self.conversation_id})" if self.conversation_id else ""
        return InvalidRequest(
            f"conversation {self.number}{named}: {problem}", {"conversation": self.number}
        )


def _kind(value: object) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    return "null" if value is None else "a number"


def _object(where: _Where, value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise where.bad(f"{what} must be an object, not {_kind(value)}")
    return value


def _id(where: _Where, conversation: dict[str, Any], *keys: str) -> str:
    for key in keys:
        value = conversation.get(key)
        if isinstance(value, str) and value:
            return value
    raise where.bad(f"no {' or '.join(keys)} (a non-empty string)")


def _title(conversation: dict[str, Any], key: str) -> str:
    title = conversation.get(key)
    return title if isinstance(title, str) else ""


def _clean(text: str) -> str:
    return _SURROGATE.sub("\ufffd", text)


def format_ms(ms: int) -> str:
    """UTC milliseconds as the vault writes a date: ``2026-02-01T04:11:09.000Z``."""
    return _format_ms(ms)


def _format_ms(ms: int) -> str:
    moment = _EPOCH + timedelta(milliseconds=ms)
    stamp = f"{moment.year:04d}-" + moment.strftime("%m-%dT%H:%M:%S.")
    return stamp + f"{moment.microsecond // 1000:03d}Z"


def _epoch_ms(where: _Where, value: object, what: str) -> int | None:
    """Epoch seconds (ChatGPT) as UTC milliseconds; ``None`` when absent."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise where.bad(f"{what} must be a number of epoch seconds, not {value!r}")
    ms = math.floor(value * 1000)
    if not 0 <= ms < 253_402_300_800_000:  # up to the end of year 9999
        raise where.bad(f"{what} is outside the years 1970 to 9999: {value!r}")
    return ms


def _iso_ms(where: _Where, value: object, what: str) -> int | None:
    """An ISO datetime (Claude) as UTC milliseconds (UTC when it has no offset)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise where.bad(f"{what} must be an ISO datetime, not {_kind(value)}")
    try:
        moment = datetime.fromisoformat(value.strip())
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        delta = moment.astimezone(UTC) - _EPOCH
    except (ValueError, OverflowError) as exc:
        raise where.bad(f"{what} is not an ISO datetime: {value!r}") from exc
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _message(role: Role, text: str, date_ms: int) -> HistoryMessage:
    return HistoryMessage(role, _clean(text), _format_ms(date_ms))


# --- ChatGPT ----------------------------------------------------------------------------


def _read_chatgpt(where: _Where, item: object, skipped: Skipped) -> Conversation:
    conversation = _object(where, item, "a conversation")
    if "chat_messages" in conversation and "mapping" not in conversation:
        raise where.bad("this is a Claude export (chat_messages, no mapping): use --from claude")
    where = where.named(_id(where, conversation, "conversation_id", "id"))
    mapping = _object(where, conversation.get("mapping"), "mapping")
    default_ms = _epoch_ms(where, conversation.get("create_time"), "create_time")
    if default_ms is None:
        default_ms = _epoch_ms(where, conversation.get("update_time"), "update_time")
    messages = []
    for node_id in _visible_path(where, mapping, conversation.get("current_node")):
        node = mapping[node_id]
        if node.get("message") is None:
            continue
        found = _chatgpt_message(where.named(f"{where.conversation_id}, node {node_id}"), node)
        kept = _chatgpt_kept(found, default_ms, where, node_id, skipped)
        if kept is not None:
            messages.append(kept)
    return Conversation(
        where.conversation_id or "",
        session_id("chatgpt", where.conversation_id or ""),
        _title(conversation, "title"),
        tuple(messages),
    )


def _visible_path(where: _Where, mapping: dict[str, Any], current: object) -> list[str]:
    """Node ids from the root to ``current``: the branch the user saw last."""
    if not mapping and current is None:
        return []  # a conversation without a message
    if not isinstance(current, str) or current not in mapping:
        raise where.bad(f"current_node {current!r} is not a node of mapping")
    path: list[str] = []
    seen: set[str] = set()
    node_id: object = current
    while isinstance(node_id, str) and node_id in mapping:
        if node_id in seen:
            raise where.bad(f"mapping has a cycle through node {node_id}")
        seen.add(node_id)
        path.append(node_id)
        node = _object(where, mapping[node_id], f"node {node_id}")
        node_id = node.get("parent")
        if node_id is not None and not isinstance(node_id, str):
            raise where.bad(f"node {path[-1]}: parent must be a node id, not {_kind(node_id)}")
    path.reverse()
    return path


@dataclass(frozen=True)
class _Found:
    role: str
    visible: bool  # a text message of user or assistant, to the conversation, not hidden
    texts: tuple[str, ...]
    attachments: int
    date_ms: int | None


def _chatgpt_message(where: _Where, node: dict[str, Any]) -> _Found:
    message = _object(where, node["message"], "message")
    author = _object(where, message.get("author"), "author")
    role = author.get("role")
    if not isinstance(role, str):
        raise where.bad(f"author.role must be a string, not {_kind(role)}")
    content = _object(where, message.get("content"), "content")
    kind = content.get("content_type")
    if not isinstance(kind, str):
        raise where.bad(f"content.content_type must be a string, not {_kind(kind)}")
    metadata = message.get("metadata") or {}
    hidden = isinstance(metadata, dict) and metadata.get("is_visually_hidden_from_conversation")
    recipient = message.get("recipient")
    visible = (
        role in ("user", "assistant")
        and kind in _CHATGPT_TEXT
        and recipient in (None, "all")
        and hidden is not True
    )
    texts: list[str] = []
    attachments = 0
    if visible:
        parts = content.get("parts")
        if not isinstance(parts, list):
            raise where.bad(f"content.parts must be an array, not {_kind(parts)}")
        for part in parts:
            if isinstance(part, str):
                texts.append(part)
            elif _transcription(part):
                texts.append(part["text"])
            else:
                attachments += 1
    date_ms = _epoch_ms(where, message.get("create_time"), "create_time")
    return _Found(role, visible, tuple(texts), attachments, date_ms)


def _transcription(part: object) -> bool:
    return (
        isinstance(part, dict)
        and part.get("content_type") == "audio_transcription"
        and isinstance(part.get("text"), str)
    )


def _chatgpt_kept(
    found: _Found, default_ms: int | None, where: _Where, node_id: str, skipped: Skipped
) -> HistoryMessage | None:
    if not found.visible:
        skipped.system += 1
        return None
    skipped.attachments += found.attachments
    text = "\n".join(t for t in found.texts if t.strip())
    if not text.strip():
        return None
    date_ms = found.date_ms if found.date_ms is not None else default_ms
    if date_ms is None:
        raise where.bad(f"node {node_id}: no create_time, and none for the conversation")
    return _message("user" if found.role == "user" else "assistant", text, date_ms)


# --- Claude -----------------------------------------------------------------------------


def _read_claude(where: _Where, item: object, skipped: Skipped) -> Conversation:
    conversation = _object(where, item, "a conversation")
    if "mapping" in conversation and "chat_messages" not in conversation:
        raise where.bad("this is a ChatGPT export (mapping, no chat_messages): use --from chatgpt")
    where = where.named(_id(where, conversation, "uuid"))
    listed = conversation.get("chat_messages")
    if not isinstance(listed, list):
        raise where.bad(f"chat_messages must be an array, not {_kind(listed)}")
    default_ms = _iso_ms(where, conversation.get("created_at"), "created_at")
    dated = [_claude_dated(where, n, m, default_ms) for n, m in enumerate(listed, 1)]
    messages = []
    for message, date_ms in _claude_path(where, dated):
        kept = _claude_kept(where, message, date_ms, skipped)
        if kept is not None:
            messages.append(kept)
    conversation_id = where.conversation_id or ""
    return Conversation(
        conversation_id,
        session_id("claude", conversation_id),
        _title(conversation, "name"),
        tuple(messages),
    )


def _claude_dated(
    where: _Where, number: int, item: object, default_ms: int | None
) -> tuple[dict[str, Any], int]:
    message = _object(where, item, f"message {number}")
    date_ms = _iso_ms(where, message.get("created_at"), f"message {number}: created_at")
    if date_ms is None:
        date_ms = default_ms
    if date_ms is None:
        raise where.bad(f"message {number}: no created_at, and none for the conversation")
    return message, date_ms


def _claude_path(
    where: _Where, dated: Sequence[tuple[dict[str, Any], int]]
) -> Sequence[tuple[dict[str, Any], int]]:
    """The messages in order; with branches, the newest leaf and its ancestors."""
    if not any("parent_message_uuid" in message for message, _ in dated):
        return dated
    by_uuid: dict[str, tuple[int, tuple[dict[str, Any], int]]] = {}
    for position, pair in enumerate(dated):
        uuid = pair[0].get("uuid")
        if not isinstance(uuid, str) or not uuid:
            raise where.bad(f"message {position + 1}: a branched conversation needs uuid")
        by_uuid[uuid] = (position, pair)
    parents = {pair[0].get("parent_message_uuid") for pair in dated}
    leaves = [entry for uuid, entry in by_uuid.items() if uuid not in parents]
    if not leaves:
        raise where.bad("chat_messages form a cycle through parent_message_uuid")
    _, leaf = max(leaves, key=lambda entry: (entry[1][1], entry[0]))
    path = [leaf]
    seen = {id(leaf[0])}
    parent = leaf[0].get("parent_message_uuid")
    while isinstance(parent, str) and parent in by_uuid:
        _, pair = by_uuid[parent]
        if id(pair[0]) in seen:
            raise where.bad(f"chat_messages form a cycle through message {parent}")
        seen.add(id(pair[0]))
        path.append(pair)
        parent = pair[0].get("parent_message_uuid")
    path.reverse()
    return path


def _claude_kept(
    where: _Where, message: dict[str, Any], date_ms: int, skipped: Skipped
) -> HistoryMessage | None:
    sender = message.get("sender")
    if not isinstance(sender, str):
        raise where.bad(f"message {message.get('uuid')}: sender must be a string")
    role = _CLAUDE_ROLES.get(sender)
    if role is None:
        skipped.system += 1
        return None
    for key in ("attachments", "files"):
        files = message.get(key)
        if isinstance(files, list):
            skipped.attachments += len(files)
        elif files is not None:
            raise where.bad(f"message {message.get('uuid')}: {key} must be an array")
    text = _claude_text(where, message)
    return _message(role, text, date_ms) if text.strip() else None


def _claude_text(where: _Where, message: dict[str, Any]) -> str:
    blocks = message.get("content")
    if blocks is not None and not isinstance(blocks, list):
        raise where.bad(f"message {message.get('uuid')}: content must be an array")
    texts = [
        block["text"]
        for block in blocks or ()
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
        and block["text"].strip()
    ]
    if texts:
        return "\n\n".join(texts)
    text = message.get("text")
    if text is not None and not isinstance(text, str):
        raise where.bad(f"message {message.get('uuid')}: text must be a string")
    return text or ""
