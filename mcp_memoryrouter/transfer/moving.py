"""Memories moved in from another memory product, in one command: what the readers share.

Each reader turns its input, read and checked whole, into :class:`Moved`: sessions of
:class:`Item` (role, text, date or none), the records it read and what it skipped and why.
:mod:`.graph` reads ``@modelcontextprotocol/server-memory``'s JSONL knowledge graph,
:mod:`.mem0` mem0's and OpenMemory's exports, :mod:`.notes` basic-memory's Markdown notes and
:mod:`.letta` Letta's agent files and memory blocks. :func:`import_moved` sends the result
as tier-1 memories through ``POST /v1/memory/ingest`` (the chat importer's requests, see
:func:`transfer.importer.plan_history`).

Provenance: the vault keeps no metadata beside a memory's role, date and session, so every
memory carries its source in its session id (``server-memory-``, ``mem0-``,
``basic-memory-``, ``letta-`` and the source's own name) and, where a product consolidated
it (a fact, a core memory block, a note), the role ``observation``.

Dates: a record the file dates keeps its date. A record without one takes the date its
session already has in the vault (an earlier import of the same file, read from the vault's
export), else the import's own: so the same file imported again, or an interrupted import run
again, meets the vault's duplicate check (same role, session, date and text) and stores only
what is new.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Literal

from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.errors import InvalidRequest
from mcp_memoryrouter.transfer.history import (
    Conversation,
    History,
    HistoryMessage,
    format_ms,
    session_id,
)
from mcp_memoryrouter.transfer.importer import import_history, plan_history

Product = Literal["server-memory", "mem0", "basic-memory", "letta"]
PRODUCTS: tuple[Product, ...] = ("server-memory", "mem0", "basic-memory", "letta")
Role = Literal["user", "assistant", "observation"]

_MAX_MS = 253_402_300_800_000  # the end of year 9999
_SURROGATE = re.compile("[\ud800-\udfff]")  # half an emoji a JSON escape cut


@dataclass(frozen=True)
class Item:
    role: Role
    text: str
    date_ms: int | None  # None: the file has no date for it


@dataclass
class Session:
    id: str  # the vault's session id
    items: list[Item] = field(default_factory=list)

    def add(self, role: Role, text: str, date_ms: int | None) -> None:
        text = _SURROGATE.sub("\ufffd", text.strip())
        if text:
            self.items.append(Item(role, text, date_ms))


@dataclass
class Moved:
    """What a reader found: the sessions to import, and what it skipped and why."""

    product: Product
    noun: tuple[str, str]  # what a session is in this product: ("entity", "entities")
    records: int = 0  # records read from the input (entities and relations, memories, …)
    sessions: dict[str, Session] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)

    def session(self, name: str) -> Session:
        """The session of ``name`` (an entity, a user, a note, an agent), made once."""
        found = self.sessions.get(name)
        if found is None:
            found = self.sessions[name] = Session(session_id(self.product, name))
        return found

    def skip(self, reason: str, n: int = 1) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + n

    @property
    def size(self) -> int:
        return sum(len(s.items) for s in self.sessions.values())


def bad(path: Path, line: int | None, problem: str) -> InvalidRequest:
    """The refusal of an input: the file, the line where known, and what is wrong."""
    where = f"{path}, line {line}" if line is not None else str(path)
    return InvalidRequest(f"{where}: {problem}", {"file": str(path), "line": line})


def moment_ms(value: object) -> int | None:
    """An ISO datetime (UTC without an offset), a YAML date or datetime, or epoch seconds,
    as UTC milliseconds; ``None`` when absent. Raises ``ValueError`` saying what it is not."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"not a date: {value!r}")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError(f"not a date: {value!r}")
        return _checked(math.floor(value * 1000), value)
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError as exc:
            raise ValueError(f"not an ISO datetime: {value!r}") from exc
    else:
        raise ValueError(f"not a date: {value!r}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        delta = moment.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)
    except OverflowError as exc:
        raise ValueError(f"a date out of range: {value!r}") from exc
    return _checked(
        (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000, value
    )


def _checked(ms: int, value: object) -> int:
    if not 0 <= ms < _MAX_MS:
        raise ValueError(f"a date outside the years 1970 to 9999: {value!r}")
    return ms


# --- sending ------------------------------------------------------------------------------


@dataclass
class MoveReport:
    product: str
    records: int  # read from the input
    sessions: int
    memories: int  # memories the input holds to import
    skipped: dict[str, int]
    undated: int  # of those, without a date in the input
    dated_earlier: int  # of the undated: the date of an earlier import of their session
    import_date: str | None  # the date the other undated ones took (None: there were none)
    stored: int = 0
    duplicates: int = 0


async def held_dates(client: VaultClient, sessions: set[str]) -> dict[str, str]:
    """The earliest date the vault holds for each of ``sessions`` (its raw memories), read
    from its export: the date an earlier import gave that session's undated records."""
    earliest: dict[str, str] = {}
    async for line in client.export_lines():
        session = line.get("session_id")
        day = line.get("date")
        if (
            session in sessions
            and line.get("tier") == 1
            and isinstance(day, str)
            and (session not in earliest or day < earliest[session])
        ):
            earliest[session] = day
    return earliest


def dated(moved: Moved, held: dict[str, str], now_ms: int) -> tuple[History, MoveReport]:
    """The sessions as a chat history the importer sends, every record dated: its own
    date, else its session's date in the vault, else ``now_ms``."""
    now = format_ms(now_ms)
    report = MoveReport(
        product=moved.product,
        records=moved.records,
        sessions=0,
        memories=0,
        skipped=dict(moved.skipped),
        undated=0,
        dated_earlier=0,
        import_date=None,
    )
    conversations = []
    for name, session in moved.sessions.items():
        if not session.items:
            continue
        earlier = held.get(session.id)
        messages = []
        for item in session.items:
            if item.date_ms is not None:
                day = format_ms(item.date_ms)
            else:
                report.undated += 1
                if earlier is None:
                    report.import_date = day = now
                else:
                    report.dated_earlier += 1
                    day = earlier
            messages.append(HistoryMessage(item.role, item.text, day))
        conversations.append(Conversation(name, session.id, name, tuple(messages)))
    report.sessions = len(conversations)
    report.memories = sum(len(c.messages) for c in conversations)
    return History(moved.product, tuple(conversations)), report


async def import_moved(
    client: VaultClient,
    moved: Moved,
    now_ms: int,
    on_progress: Callable[[int], None] | None = None,
) -> MoveReport:
    """Date the undated records (reading the vault's export only when there are some),
    then send everything as the chat importer does."""
    undated = {s.id for s in moved.sessions.values() if any(i.date_ms is None for i in s.items)}
    held = await held_dates(client, undated) if undated else {}
    history, report = dated(moved, held, now_ms)
    sent = await import_history(client, plan_history(history), on_progress=on_progress)
    report.stored, report.duplicates = sent.stored, sent.duplicates
    return report


def words(kind: str) -> str:
    """A relation type in words: ``works_at`` → ``works at``."""
    return " ".join(kind.replace("_", " ").split())
