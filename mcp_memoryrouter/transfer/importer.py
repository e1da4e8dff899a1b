"""Import an archive (see :mod:`transfer.archive`), or a chat history (see
:mod:`transfer.history`, :func:`import_history` at the end), into a vault.

Raw memories go through ``POST /v1/memory/ingest`` with their dates, roles and sessions (each
message names its own), in requests of at most 500 messages (and well under the 1 MiB body
limit) whatever the order of their sessions. Reflections are then
recreated tier by tier with ``POST /v1/memory/import-reflections``, one request per batch
group, linked to the new ids of their sources and keeping their coverage (and as many
deleted sources as the export counted). Last, memories the export marks consolidated
that no reflection of the file names are marked so with
``POST /v1/memory/import-consolidated``.

The archive is checked as a whole (and every message against the request size) before
the first request. An archive with reflections or consolidated memories goes into an empty
vault only, and one that is not is refused before anything is sent (409 ``conflict``):
merged into memories already there, its lineage could meet sources already consolidated.
Plain message lines go into any vault (a message already there is a duplicate). A failure
the server reports afterwards (an unreachable vault) stops the import where it is: wipe the
vault before trying again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from mcp_memoryrouter import limits, schemas
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.errors import Conflict, InvalidRequest
from mcp_memoryrouter.transfer.archive import Archive, Numbered, ReflectionGroup
from mcp_memoryrouter.transfer.history import History
from mcp_memoryrouter.words import counted

MAX_MESSAGES_PER_REQUEST = 500
MAX_MARK_IDS = limits.MAX_DELETE_IDS  # ids the vault takes per import-consolidated request
MAX_REQUEST_BYTES = 768 * 1024


@dataclass
class ImportReport:
    stored: int = 0
    duplicates: int = 0
    reflections: dict[int, int] = field(default_factory=lambda: {2: 0, 3: 0})


async def import_archive(
    client: VaultClient, archive: Archive, on_progress: Callable[[int], None] | None = None
) -> ImportReport:
    for item in archive.raw:
        if _size(item) > MAX_REQUEST_BYTES:
            raise InvalidRequest(
                f"line {item.number}: the message is too large to send in one request",
                {"line": item.number},
            )
    client = client.as_surface("import")  # what it stores is the import's (stored_by)
    if archive.groups or archive.to_mark:
        await _require_empty(client)
    report = ImportReport()
    ids = _NewIds()
    for chunk in _chunks(archive.raw):
        await _ingest(client, chunk, archive, ids, report)
        if on_progress is not None:
            on_progress(len(chunk))
    for group in archive.groups:
        await _recreate(client, group, ids, report)
        if on_progress is not None:
            on_progress(len(group.reflections))
    marked = [memory_id for line in sorted(archive.to_mark) for memory_id in ids.by_line[line]]
    for start in range(0, len(marked), MAX_MARK_IDS):
        chunk_ids = marked[start : start + MAX_MARK_IDS]
        await client.import_consolidated(schemas.MarkConsolidatedRequest(ids=chunk_ids))
    return report


async def _require_empty(client: VaultClient) -> None:
    """An archive's reflections are rebuilt on its own memories, and only an empty vault
    holds none of them already consolidated (the same file imported twice, a backup restored
    onto its live vault): refused before anything is sent, rather than half-way through."""
    held = (await client.stats()).total_memories
    if held:
        raise Conflict(
            f"the vault already holds {counted(held, 'memory', 'memories')}, and this archive "
            "has reflections (or consolidated memories): it is imported into an empty vault "
            "only. Import it into a new vault (`mcp-memoryrouter keys create` makes one and "
            "prints its key), or wipe this one first (DELETE /v1/memory, see docs/backup.md). "
            "Plain message lines, and chat histories, import into any vault.",
            {"memories": held},
        )


@dataclass
class _NewIds:
    """The ids the vault gave each memory of the file: by archive id and by line number."""

    by_id: dict[str, list[str]] = field(default_factory=dict)
    by_line: dict[int, list[str]] = field(default_factory=dict)

    def add(self, number: int, archive_id: str | None, memory_ids: list[str]) -> None:
        self.by_line[number] = memory_ids
        if archive_id is not None:
            self.by_id[archive_id] = memory_ids


def _message(item: Numbered) -> schemas.IngestMessage:
    line = item.line
    return schemas.IngestMessage(
        role=line.role or "user", content=line.content, date=line.date, session_id=line.session_id
    )


def _size(item: Numbered) -> int:
    """An upper bound of the message's share of a request body: ASCII-escaped JSON is never
    shorter than the UTF-8 actually sent; 100 bytes cover role, date and punctuation."""
    return len(json.dumps(item.line.content)) + _session_size(item.line.session_id) + 100


def _session_size(session: str | None) -> int:
    """What ``"session_id": "…",`` adds to a message (nothing without one)."""
    return 0 if session is None else len(json.dumps(session)) + 16


def _chunks(raw: Sequence[Numbered]) -> Iterator[list[Numbered]]:
    """Consecutive lines, at most 500 messages and ~768 KiB per request, whatever their
    sessions: each message names its own."""
    chunk: list[Numbered] = []
    size = 0
    for item in raw:
        item_size = _size(item)
        if chunk and (
            len(chunk) >= MAX_MESSAGES_PER_REQUEST or size + item_size > MAX_REQUEST_BYTES
        ):
            yield chunk
            chunk, size = [], 0
        chunk.append(item)
        size += item_size
    if chunk:
        yield chunk


async def _ingest(
    client: VaultClient,
    chunk: list[Numbered],
    archive: Archive,
    ids: _NewIds,
    report: ImportReport,
) -> None:
    done = await client.ingest(schemas.IngestRequest(messages=[_message(i) for i in chunk]))
    report.stored += done.stored
    report.duplicates += done.duplicates
    if len(done.ids) == len(chunk):
        for item, memory_id in zip(chunk, done.ids, strict=True):
            ids.add(item.number, item.line.id, [memory_id])
        return
    # The vault split a long message into several units, so ids no longer line up with
    # lines. Sending a line again alone is a duplicate that answers its ids.
    for item in chunk:
        if item.number in archive.to_mark or (
            item.line.id is not None and item.line.id in archive.referenced
        ):
            again = await client.ingest(schemas.IngestRequest(messages=[_message(item)]))
            ids.add(item.number, item.line.id, again.ids)


async def _recreate(
    client: VaultClient,
    group: ReflectionGroup,
    ids: _NewIds,
    report: ImportReport,
) -> None:
    covers = group.covers
    done = await client.import_reflections(
        schemas.ImportReflectionsRequest(
            tier=group.tier,
            entries=[
                schemas.EntryIn(text=r.text, importance=r.importance, kind=r.kind)
                for r in group.reflections
            ],
            source_ids=[memory_id for ref in group.sources for memory_id in ids.by_id[ref]],
            covers=None if covers is None else schemas.CoversIn(from_=covers.from_, to=covers.to),
            sources_deleted=group.sources_deleted,
            replaced=[
                schemas.ReplacedIn(id=ids.by_id[earlier][0], at=at, entry=index)
                for index, r in enumerate(group.reflections)
                for earlier, at in r.replaced
                if earlier in ids.by_id  # imported before it (an export's order)
            ],
        )
    )
    for reflection, created in zip(group.reflections, done.created, strict=True):
        ids.add(reflection.number, reflection.id, [created.id])
    report.reflections[group.tier] += len(done.created)


# --- chat histories (see :mod:`transfer.history`) ----------------------------------------

# role, date, session id (at most 200 characters, ASCII: history.session_id) and punctuation
_OVERHEAD = 100 + _session_size("-" * limits.MAX_ID_CHARS)
_PIECE_CHARS = MAX_REQUEST_BYTES - _OVERHEAD - 2  # escaped characters of one piece
_WIDEST_ESCAPE = 12  # one character escaped as JSON: at most two \uXXXX


@dataclass
class HistoryReport:
    messages: int  # messages the file holds to import (a piece of a huge one counts once)
    conversations: int  # conversations with at least one
    attachments: int  # skipped
    system: int  # system, tool and hidden messages skipped
    stored: int = 0  # memories the vault stored (it splits a long message into several)
    duplicates: int = 0  # memories it already held


def history_requests(history: History) -> list[schemas.IngestRequest]:
    """The whole import as ingest requests of at most 500 messages and ~768 KiB, each
    message naming its conversation's session: a few requests per thousand messages, however
    short the conversations. A message too large for one request is sent as consecutive
    pieces (cut at line ends, else anywhere), each under the limit, with the message's role,
    date and session."""
    requests: list[schemas.IngestRequest] = []
    batch: list[schemas.IngestMessage] = []
    size = 0
    for conversation in history.conversations:
        session = conversation.session_id
        for message in conversation.messages:
            for piece in _pieces(message.text):
                piece_size = len(json.dumps(piece)) + _OVERHEAD
                if batch and (
                    len(batch) >= MAX_MESSAGES_PER_REQUEST or size + piece_size > MAX_REQUEST_BYTES
                ):
                    requests.append(schemas.IngestRequest(messages=batch))
                    batch, size = [], 0
                batch.append(
                    schemas.IngestMessage(
                        role=message.role, content=piece, date=message.date, session_id=session
                    )
                )
                size += piece_size
    if batch:
        requests.append(schemas.IngestRequest(messages=batch))
    return requests


def _pieces(text: str) -> list[str]:
    if len(json.dumps(text)) + _OVERHEAD <= MAX_REQUEST_BYTES:
        return [text]
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.splitlines(keepends=True):
        step = _PIECE_CHARS // _WIDEST_ESCAPE
        bits = [line] if len(json.dumps(line)) - 2 <= _PIECE_CHARS else _cut(line, step)
        for bit in bits:
            bit_size = len(json.dumps(bit)) - 2
            if current and size + bit_size > _PIECE_CHARS:
                pieces.append("".join(current))
                current, size = [], 0
            current.append(bit)
            size += bit_size
    pieces.append("".join(current))
    return [piece for piece in pieces if piece.strip()]


def _cut(line: str, step: int) -> list[str]:
    return [line[start : start + step] for start in range(0, len(line), step)]


@dataclass(frozen=True)
class HistoryPlan:
    history: History
    requests: tuple[schemas.IngestRequest, ...]

    @property
    def size(self) -> int:
        """Messages to send (a piece of a huge message counts as one)."""
        return sum(len(request.messages) for request in self.requests)


def plan_history(history: History) -> HistoryPlan:
    """Every request of the import, built (and so checked) before the first is sent."""
    return HistoryPlan(history, tuple(history_requests(history)))


async def import_history(
    client: VaultClient, plan: HistoryPlan, on_progress: Callable[[int], None] | None = None
) -> HistoryReport:
    """Send a planned chat history.

    The vault skips a message it already holds (same role, session, date and text), so the
    same file imported again stores nothing, and an interrupted import run again stores only
    what it had not reached."""
    history = plan.history
    report = HistoryReport(
        messages=history.size,
        conversations=len(history.conversations),
        attachments=history.skipped.attachments,
        system=history.skipped.system,
    )
    client = client.as_surface("import")  # what it stores is the import's (stored_by)
    for request in plan.requests:
        done = await client.ingest(request)
        report.stored += done.stored
        report.duplicates += done.duplicates
        if on_progress is not None:
            on_progress(len(request.messages))
    return report
