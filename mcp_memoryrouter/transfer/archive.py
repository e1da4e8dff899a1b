"""The JSONL archive ``mcp-memoryrouter export`` writes and ``import`` reads: one memory a line.

A raw memory (tier 1, the default); only ``content`` is required, ``role`` defaults to
``user`` and an undated line is dated when it is received::

    {"id": "…", "tier": 1, "role": "user", "content": "…", "date": "2026-02-01T04:11:09.000Z",
     "session_id": "…", "consolidated": true}

A reflection (tier 2 or 3), with its coverage and the ``id`` of every source line one tier
below in the same file::

    {"id": "…", "tier": 2, "content": "…", "importance": 7,
     "covers": {"from": "…", "to": "…"}, "sources": ["…", "…"], "sources_deleted": 1,
     "consolidated": false}

``consolidated`` (tiers 1 and 2) says the memory was consolidated even when no reflection
in the file names it (its reflection was deleted); ``sources_deleted`` counts sources that
were deleted before the export. Both are optional (files of earlier versions lack them).

An ``id`` is a reference inside the file; import gives every memory a new one. Reflections
with the same tier, sources and coverage were written by one batch, and are recreated
together. The whole file is read and checked before anything is imported; an error names
its line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from mcp_memoryrouter import limits, schemas
from mcp_memoryrouter.errors import InvalidRequest


def _check_moment(value: str) -> str:
    """An ISO date or datetime, as the vault accepts them (the same patterns)."""
    if not limits.MOMENT.fullmatch(value):
        raise ValueError("must be an ISO date (2026-02-01) or datetime")
    if limits.MOMENT_OFF_THE_EDGE.fullmatch(value):
        raise ValueError("on 0001-01-01 or 9999-12-31 must be in UTC (Z)")
    return value


class ArchiveCovers(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)

    from_: StrictStr = Field(alias="from")
    to: StrictStr

    _moments = field_validator("from_", "to")(_check_moment)


class ArchiveSuperseded(BaseModel):
    """A reflection a later one replaced: when, and the id (in the file) of the later one."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    at: StrictStr
    by: Annotated[StrictStr, Field(min_length=1)]

    _moment = field_validator("at")(_check_moment)


class ArchiveLine(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    id: Annotated[StrictStr, Field(min_length=1)] | None = None
    tier: Literal[1, 2, 3] = 1
    content: StrictStr
    role: schemas.Role | None = None
    date: StrictStr | None = None
    session_id: schemas.SessionId | None = None
    # strict, as the whole line is: an export writes importance as an integer (the REST
    # models also take 7.0 as 7, JSON Schema's integer)
    importance: (
        Annotated[StrictInt, Field(ge=limits.IMPORTANCE_MIN, le=limits.IMPORTANCE_MAX)] | None
    ) = None
    covers: ArchiveCovers | None = None
    sources: list[StrictStr] | None = None
    sources_deleted: Annotated[StrictInt, Field(ge=0, le=limits.MAX_SOURCE_IDS)] | None = None
    consolidated: StrictBool | None = None
    # what stored it in the vault it was exported from: carried for the record; the import
    # stores it as its own (surface "import", the importing key), since another vault's key
    # ids mean nothing here (docs/backup.md)
    stored_by: schemas.StoredBy | None = None
    # reflections: a standing preference ("kind"), replaced by a later one ("superseded")
    kind: schemas.Kind | None = None
    superseded: ArchiveSuperseded | None = None

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("date")
    @classmethod
    def _moment(cls, value: str | None) -> str | None:
        return None if value is None else _check_moment(value)

    @model_validator(mode="after")
    def _fields_of_the_tier(self) -> ArchiveLine:
        if self.tier == 3 and self.consolidated:
            raise ValueError("a tier 3 reflection is never consolidated")
        if self.tier == 1:
            extra = (self.importance, self.covers, self.sources, self.sources_deleted)
            if any(v is not None for v in extra):
                raise ValueError("a tier 1 memory has no importance, covers or sources")
            if self.kind is not None or self.superseded is not None:
                raise ValueError("a tier 1 memory has no kind and is never superseded")
            return self
        if any(v is not None for v in (self.role, self.date, self.session_id)):
            raise ValueError("a reflection has covers instead of role, date or session_id")
        if self.importance is None:
            raise ValueError("a reflection needs an importance (an integer from 1 to 10)")
        if not self.sources and self.covers is None and not self.sources_deleted:
            raise ValueError("a reflection needs sources or covers")
        return self


@dataclass(frozen=True)
class Numbered:
    number: int  # 1-based line number in the file
    line: ArchiveLine


@dataclass(frozen=True)
class ArchivedReflection:
    number: int
    id: str | None
    text: str
    importance: int
    kind: schemas.Kind | None = None
    # the earlier reflections of the file it replaced: (their id in the file, when)
    replaced: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ReflectionGroup:
    """Reflections one batch wrote: same tier, same sources, same coverage."""

    tier: Literal[2, 3]
    sources: tuple[str, ...]
    covers: ArchiveCovers | None
    reflections: tuple[ArchivedReflection, ...]
    sources_deleted: int = 0


@dataclass(frozen=True)
class Archive:
    raw: tuple[Numbered, ...]
    groups: tuple[ReflectionGroup, ...]  # every tier 2 group before any tier 3 group
    referenced: frozenset[str]  # ids some reflection names as a source
    to_mark: frozenset[int] = frozenset()  # lines consolidated, but named by no reflection

    @property
    def size(self) -> int:
        return len(self.raw) + sum(len(g.reflections) for g in self.groups)


def read_archive(lines: Iterable[str]) -> Archive:
    """Parse and cross-check a whole archive; :class:`InvalidRequest` names the bad line."""
    parsed = [Numbered(n, _parse(n, text)) for n, text in enumerate(lines, 1) if text.strip()]
    by_id: dict[str, Numbered] = {}
    for item in parsed:
        if item.line.id is not None:
            earlier = by_id.setdefault(item.line.id, item)
            if earlier is not item:
                raise _bad(item.number, f"id {item.line.id!r} is also on line {earlier.number}")
    groups = _groups([i for i in parsed if i.line.tier > 1], by_id, _replaced(parsed, by_id))
    referenced = frozenset(ref for group in groups for ref in group.sources)
    return Archive(
        raw=tuple(i for i in parsed if i.line.tier == 1),
        groups=groups,
        referenced=referenced,
        to_mark=frozenset(
            i.number
            for i in parsed
            if i.line.consolidated and (i.line.id is None or i.line.id not in referenced)
        ),
    )


def _parse(number: int, text: str) -> ArchiveLine:
    try:
        return ArchiveLine.model_validate(json.loads(text))
    except json.JSONDecodeError as exc:
        raise _bad(number, f"not valid JSON ({json_problem(exc)} at column {exc.colno})") from exc
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise _bad(number, f"{where + ': ' if where else ''}{error['msg']}") from exc


def json_problem(exc: json.JSONDecodeError) -> str:
    """What the parser found, without the "at" some of its messages end with ("Invalid
    control character at"), for a sentence that says where itself."""
    return exc.msg.removesuffix(" at")


def _replaced(
    parsed: list[Numbered], by_id: dict[str, Numbered]
) -> dict[str, tuple[tuple[str, str], ...]]:
    """For each reflection of the file that replaced earlier ones: (their id, when). A
    ``superseded.by`` that names no line is the record of a reflection deleted before the
    export: the earlier one is imported as current."""
    found: dict[str, list[tuple[str, str]]] = {}
    for item in parsed:
        line = item.line
        if line.superseded is None:
            continue
        later = by_id.get(line.superseded.by)
        if later is None:
            continue
        if line.id is None or later.line.tier != line.tier or later.number <= item.number:
            raise _bad(
                item.number,
                f"superseded.by {line.superseded.by!r} must be the id of a later tier "
                f"{line.tier} line of this file, and this line needs an id",
            )
        found.setdefault(line.superseded.by, []).append((line.id, line.superseded.at))
    return {by: tuple(earlier) for by, earlier in found.items()}


def _groups(
    reflections: list[Numbered],
    by_id: dict[str, Numbered],
    replaced: dict[str, tuple[tuple[str, str], ...]],
) -> tuple[ReflectionGroup, ...]:
    grouped: dict[tuple[int, tuple[str, ...], ArchiveCovers | None, int], list[ArchivedReflection]]
    grouped = {}
    consolidated_by: dict[str, Numbered] = {}
    for item in reflections:
        line = item.line
        if line.importance is None:  # the line model already refuses this
            raise _bad(item.number, "a reflection needs an importance")
        sources = tuple(sorted(set(line.sources or ())))
        key = (line.tier, sources, line.covers, line.sources_deleted or 0)
        if key not in grouped:
            _claim(item, sources, by_id, consolidated_by)
        earlier = () if line.id is None else replaced.get(line.id, ())
        reflection = ArchivedReflection(
            item.number, line.id, line.content, line.importance, line.kind, earlier
        )
        grouped.setdefault(key, []).append(reflection)
    groups = [
        ReflectionGroup(2 if tier == 2 else 3, sources, covers, tuple(items), deleted)
        for (tier, sources, covers, deleted), items in grouped.items()
    ]
    return tuple(sorted(groups, key=lambda group: group.tier))


def _claim(
    item: Numbered,
    sources: tuple[str, ...],
    by_id: dict[str, Numbered],
    consolidated_by: dict[str, Numbered],
) -> None:
    """Each source must be a memory one tier below, consolidated by one batch only; a raw
    source needs its date (only a dated message is matched again when it is re-sent)."""
    for ref in sources:
        source = by_id.get(ref)
        if source is None or source.line.tier != item.line.tier - 1:
            raise _bad(
                item.number,
                f"source {ref!r} is not the id of a tier {item.line.tier - 1} line of this file",
            )
        if source.line.tier == 1 and source.line.date is None:
            raise _bad(source.number, "a memory that is the source of a reflection needs a date")
        earlier = consolidated_by.setdefault(ref, item)
        if earlier is not item:
            raise _bad(
                item.number,
                f"source {ref!r} is already a source of the reflection on line {earlier.number}",
            )


def _bad(number: int, message: str) -> InvalidRequest:
    return InvalidRequest(f"line {number}: {message}", {"line": number})
