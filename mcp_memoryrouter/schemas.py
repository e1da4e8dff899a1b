"""Wire models of the REST API, shared by the vault (server side) and ``client.py``.

Requests are validated strictly at the edge (an importance of ``7.5``, ``"7"`` or ``true`` is
not an integer; ``7.0`` is 7, as JSON Schema counts it); responses are exactly what the
product document shows.
"""

from __future__ import annotations

import unicodedata
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    model_validator,
)

from mcp_memoryrouter import limits

Role = Literal["user", "assistant", "system", "observation"]
TierNumber = Literal[1, 2, 3]
# What stored a memory (``stored_by.surface``): the REST API, an MCP tool, the chat proxy, the
# explorer, an import, a consolidation loop (the CLI's, a connector's) and the server's own
# reflector. A caller names its surface in SURFACE_HEADER (default ``rest``) and its client
# in CLIENT_HEADER: labels it claims, checked against this list; the key id is what the vault
# vouches for (docs/api.md, "Where each memory came from").
Surface = Literal["rest", "mcp", "proxy", "explorer", "import", "consolidator", "reflector"]
SURFACES: tuple[Surface, ...] = (
    "rest", "mcp", "proxy", "explorer", "import", "consolidator", "reflector",
)  # fmt: skip
SURFACE_HEADER = "X-MemoryRouter-Surface"
CLIENT_HEADER = "X-MemoryRouter-Client"


def client_label(name: str | None) -> str | None:
    """A client's name as ``stored_by.client`` keeps it: its printable characters, trimmed,
    at most ``MAX_CLIENT_NAME_CHARS`` (None when nothing is left). A label, so cleaned
    rather than refused."""
    shown = "".join(c for c in name or "" if c.isprintable()).strip()
    return shown[: limits.MAX_CLIENT_NAME_CHARS].strip() or None


Dedupe = Literal["exact", "near"]


def _omit_none(value: object) -> bool:
    return value is None


def _omit_empty(value: object) -> bool:
    return not value


def _unicode(text: str) -> str:
    """Refuse lone surrogates: JSON can escape them, UTF-8 cannot carry them."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text must be valid Unicode: it holds a lone surrogate") from None
    return text


# Unicode's control, format and separator characters (Cc, Cf, Zl, Zp), but the joiners
# (Persian, the Indic scripts and emoji sequences need them): ESC sequences and OSC 52, C1
# controls, DEL, and the bidi embeddings, overrides, isolates and marks (Unicode TR9) that
# reorder what follows them. A key name holds none: operators read names on a terminal
# (`keys list`), which acts on them instead of showing them. auth/display.py shows the same
# set on the sign-in pages.
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})
JOINERS = frozenset({"\u200c", "\u200d"})


def hidden(char: str) -> bool:
    """Whether ``char`` is one a terminal or a page acts on instead of showing."""
    return unicodedata.category(char) in HIDDEN_CATEGORIES and char not in JOINERS


def _showable(text: str) -> str:
    for position, char in enumerate(text):
        if hidden(char):
            raise ValueError(
                f"must not hold control or formatting characters (U+{ord(char):04X} at "
                f"position {position}): use letters, digits, spaces and punctuation"
            )
    return text


def _tiers(value: list[int]) -> list[int]:
    if not value or any(t not in limits.TIERS for t in value):
        raise ValueError("tiers must be a non-empty subset of [1, 2, 3]")
    return value


def _whole(value: Any) -> Any:
    """JSON Schema's integer (the rule ``/openapi.json`` is read by): ``7.0`` is the number
    7, so it is taken as 7. ``7.5``, ``"7"`` and ``true`` are still refused."""
    if isinstance(value, bool):
        raise ValueError("must be an integer, not true or false")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _number(value: Any) -> Any:
    if isinstance(value, bool) or (value is not None and not isinstance(value, int | float)):
        raise ValueError("max_tokens must be a number")
    return value


# The field types of the requests, each rule written once. The MCP tools take their
# arguments in these same types, so a tool's schema and the REST model cannot disagree.
Text = Annotated[StrictStr, AfterValidator(_unicode)]
# last in an integer's metadata, after its bounds: JSON Schema keeps minimum and maximum
WHOLE = BeforeValidator(_whole)
Query = Annotated[Text, Field(min_length=1, max_length=limits.MAX_QUERY_CHARS)]
OptionalQuery = Annotated[Text, Field(max_length=limits.MAX_QUERY_CHARS)]
Id = Annotated[Text, Field(min_length=1, max_length=limits.MAX_ID_CHARS)]
SessionId = Id
KeyName = Annotated[Id, AfterValidator(_showable)]
Limit = Annotated[StrictInt, Field(ge=1, le=limits.SEARCH_LIMIT_MAX), WHOLE]
Importance = Annotated[StrictInt, Field(ge=limits.IMPORTANCE_MIN, le=limits.IMPORTANCE_MAX), WHOLE]
Tiers = Annotated[
    list[Annotated[StrictInt, WHOLE]],
    AfterValidator(_tiers),
    Field(json_schema_extra={"minItems": 1, "items": {"type": "integer", "enum": [1, 2, 3]}}),
]
Ids = Annotated[
    list[Annotated[Text, Field(max_length=limits.MAX_ID_CHARS)]],
    Field(min_length=1, max_length=limits.MAX_DELETE_IDS),
]
# a token budget: any number, clamped by the vault (rules/selection.clamp_budget)
TokenLimit = Annotated[StrictInt | float, BeforeValidator(_number)]
ContextLimit = Annotated[StrictInt, Field(ge=1, le=limits.CONTEXT_LIMIT_MAX), WHOLE]
PrepareTokens = Annotated[StrictInt, Field(ge=1, le=limits.PREPARE_MAX_TOKENS), WHOLE]
Order = Literal["newest_first", "oldest_first"]
Kind = Literal["preference"]  # limits.KINDS
Kinds = Annotated[list[Kind], Field(min_length=1, max_length=len(limits.KINDS))]
# Version 2 of the reflection contract (docs/consolidation.md#contract-2-facts-that-stay-current)
Contract = Annotated[Literal[1, 2], WHOLE]
Label = Annotated[Text, Field(pattern=limits.RELATED_LABEL)]
Line = Annotated[StrictInt, Field(ge=1), WHOLE]
AsOf = Annotated[
    Text | None,
    Field(
        description="When the question is asked (ISO; default now). A time the query names "
        "('last month', 'in May') counts from it and ranks what happened then higher."
    ),
]


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")


def wire(body: BaseModel) -> dict[str, Any]:
    """A request model as it travels: JSON types, wire names, unset options left out (what
    the client sends, and what the in-process carrier measures against the body limit)."""
    return body.model_dump(mode="json", by_alias=True, exclude_none=True)


# --- requests ---------------------------------------------------------------------------


class MessageIn(_Request):
    role: Role = "user"
    content: Annotated[Text, Field(min_length=1)]
    date: Text | None = None


class IngestMessage(MessageIn):
    """A message to store. Its own session_id beats the request's session_id and the
    X-Session-ID header, so one request may carry messages of several sessions. A field
    other than role, content, date and session_id is refused (400 naming it), not ignored."""

    # from_attributes: a MessageIn built in this process is taken as a message of no session
    model_config = ConfigDict(extra="forbid", from_attributes=True)

    session_id: SessionId | None = None


class IngestRequest(_Request):
    messages: Annotated[
        list[IngestMessage], Field(min_length=1, max_length=limits.MAX_INGEST_MESSAGES)
    ]
    session_id: SessionId | None = None
    model: Text | None = None
    embeddings: Text | None = None
    # "exact" (the default): a message repeated with its date, role and session is stored
    # once; "near": a message whose text is a near-duplicate of a memory already in the
    # vault is not stored either (the answer's ``skipped`` names what it matched)
    dedupe: Dedupe = "exact"


class SearchRequest(_Request):
    query: Query
    limit: Limit = limits.SEARCH_LIMIT_DEFAULT
    tiers: Tiers | None = None
    importance: Importance | None = None
    session_id: SessionId | None = None
    embeddings: Text | None = None
    as_of: AsOf = None
    # true: reflections a later one replaced are left out (by default they follow it)
    current: StrictBool | None = None
    # only memories of these kinds (["preference"]: the standing preferences)
    kinds: Kinds | None = None


class PrepareRequest(_Request):
    """``query``, or the conversation so far in ``messages`` (its last three are the query)."""

    messages: Annotated[list[MessageIn], Field(max_length=limits.MAX_INGEST_MESSAGES)] | None = None
    query: OptionalQuery | None = None
    session_id: SessionId | None = None
    density: Literal["low", "default", "high", "xhigh"] = "default"
    context_limit: ContextLimit | None = None
    max_tokens: PrepareTokens | None = None
    tiers: Tiers | None = None
    importance: Importance | None = None
    embeddings: Text | None = None
    as_of: AsOf = None
    # Whose memories the block may hold (vault/rules/writers.py): by default only what a
    # current key of the vault stored in full mode, never what a :write key or a revoked one
    # stored; "any" as search finds them.
    stored_by: Literal["trusted", "any"] = "trusted"
    # false: the block may hold reflections a later one replaced (marked as replaced);
    # by default it holds only current ones
    current: StrictBool | None = None


class DateSearchRequest(_Request):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    from_: Text = Field(alias="from")
    to: Text | None = None
    query: OptionalQuery | None = None
    tiers: Tiers | None = None
    importance: Importance | None = None
    max_tokens: TokenLimit | None = None
    order: Order = "newest_first"
    session_id: SessionId | None = None
    embeddings: Text | None = None
    current: StrictBool | None = None  # true: replaced reflections left out


class CheckoutRequest(_Request):
    tier: Annotated[Literal[1, 2], WHOLE]
    # 2: the contract also shows the related reflections the vault holds, labelled R1, R2, ...
    contract: Contract = 1
    max_tokens: TokenLimit | None = None
    session_id: SessionId | None = None
    embeddings: Text | None = None


class EntryIn(_Request):
    # One reflection. Its length (once trimmed) and the absence of ids are checked by the
    # vault's reflection contract (rules/contract.check_entries), so the description says them.
    text: Annotated[
        Text,
        Field(
            description=f"Standalone prose, {limits.ENTRY_CHARS_MIN}-{limits.ENTRY_CHARS_MAX} "
            "characters; no ids or scores."
        ),
    ]
    importance: Annotated[Importance, Field(description="1 routine ... 10 defining.")]
    # contract 2 (docs/consolidation.md#contract-2-facts-that-stay-current); an empty list is
    # not sent
    # (the contract's instructions say what each means: rules/contract.py)
    replaces: Annotated[list[Label], Field(max_length=limits.REPLACES_MAX)] = Field(
        default_factory=list, exclude_if=_omit_empty
    )
    cites: Annotated[list[Line], Field(max_length=limits.CITES_MAX)] = Field(
        default_factory=list, exclude_if=_omit_empty
    )
    kind: Kind | None = Field(default=None, exclude_if=_omit_none)


Entries = Annotated[
    list[EntryIn], Field(min_length=limits.ENTRIES_MIN, max_length=limits.ENTRIES_MAX)
]


class CommitRequest(_Request):
    batch_id: Id
    entries: Entries
    session_id: SessionId | None = None
    embeddings: Text | None = None


class CoversIn(_Request):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    from_: Text = Field(alias="from")
    to: Text


class ReplacedIn(_Request):
    """An import: a reflection imported before that entry ``entry`` of this request replaced,
    and when (its ``superseded`` in the export)."""

    id: Id
    at: Text
    entry: Annotated[StrictInt, Field(ge=0, lt=limits.ENTRIES_MAX), WHOLE]


class ImportReflectionsRequest(_Request):
    """Recreate reflections from an export, linked to sources one tier below."""

    tier: Annotated[Literal[2, 3], WHOLE]
    entries: Entries
    source_ids: Annotated[list[Text], Field(max_length=limits.MAX_SOURCE_IDS)] = []
    covers: CoversIn | None = None
    # sources the exported reflections had lost: inspect keeps counting them as deleted
    sources_deleted: Annotated[StrictInt, Field(ge=0, le=limits.MAX_SOURCE_IDS), WHOLE] = 0
    # reflections imported before that these entries replaced: marked superseded by them
    replaced: Annotated[
        list[ReplacedIn], Field(max_length=limits.ENTRIES_MAX * limits.RELATED_MAX)
    ] = Field(default_factory=list, exclude_if=_omit_empty)


class MarkConsolidatedRequest(_Request):
    """Restore the consolidated flag of memories an export marked so (an import)."""

    ids: Ids


class InspectRequest(_Request):
    memory_id: Id
    offset: Annotated[StrictInt, Field(ge=0), WHOLE] = 0
    # "similarity": sources most similar to the memory first, each with its score
    order: Literal["date", "similarity"] = "date"
    session_id: SessionId | None = None


class DeleteIdsRequest(_Request):
    ids: Ids
    derived: StrictBool | Literal["evidence"] = Field(
        default=False,
        description="true: also delete every reflection, at every tier above, built from "
        'any of the ids; "evidence": only those whose own evidence includes one (a '
        "reflection with no evidence recorded follows true). Their other sources return to "
        "the unconsolidated pool, so the next consolidation rebuilds them without what was "
        "forgotten.",
    )
    dry_run: StrictBool = Field(
        default=False, description="Answer what would go, changing nothing."
    )


class KeyCreateRequest(_Request):
    """Unknown fields are refused, not ignored: ``{"mode": "read"}`` must not mint a
    read-write key."""

    name: KeyName | None = None
    read_only: StrictBool = False

    @model_validator(mode="before")
    @classmethod
    def _known_fields_only(cls, value: Any) -> Any:
        if isinstance(value, dict):
            unknown = sorted(str(k) for k in value if k not in ("name", "read_only"))
            if unknown:
                raise ValueError(
                    f"unknown field(s) {', '.join(unknown)}: a key takes only name and "
                    "read_only (for a key that never writes, send read_only: true)"
                )
        return value


# --- responses --------------------------------------------------------------------------


class RawDebt(BaseModel):
    units: int
    est_tokens: int
    importance_equiv: int


class Tier2Debt(BaseModel):
    count: int
    importance: int
    est_tokens: int


class Unconsolidated(BaseModel):
    raw: RawDebt
    tier2: Tier2Debt


class Reflection(BaseModel):
    """The reflection-debt block that rides on responses."""

    unconsolidated: Unconsolidated
    threshold_tokens: int
    threshold_importance: int
    suggestion: str | None


class Covers(BaseModel):
    from_: str = Field(alias="from")
    to: str

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)


class Similar(BaseModel):
    """A memory already in the vault that a stored text nearly repeats: its id and the
    cosine of the two (1.0 for the same text where the vault has no embeddings)."""

    id: str
    score: float


class Skipped(BaseModel):
    """A message ``dedupe: near`` did not store (its index in the request), and the memory
    it nearly repeats."""

    index: int
    id: str
    score: float


class IngestResponse(BaseModel):
    stored: int
    duplicates: int
    ids: list[str]
    reflection: Reflection
    # near-duplicates of the stored texts among the memories already in the vault (each
    # once, best first); with dedupe "near", the messages not stored for one
    similar: list[Similar] | None = Field(default=None, exclude_if=_omit_none)
    skipped: list[Skipped] | None = Field(default=None, exclude_if=_omit_none)


class SupersededBy(BaseModel):
    """A reflection a later one replaced: when it stopped being current and the id of the
    reflection that replaced it (docs/consolidation.md#contract-2-facts-that-stay-current)."""

    at: str
    by: str


class StoredBy(BaseModel):
    """What stored a memory: the key (its public id, and its name when it was stored), the
    surface it came through and, for MCP and OAuth, the client's name. Absent on memories
    stored before it was kept."""

    surface: Surface
    key_id: str
    key_name: str | None = Field(default=None, exclude_if=_omit_none)
    client: str | None = Field(default=None, exclude_if=_omit_none)


class MemoryRow(BaseModel):
    """A search hit: raw rows carry ``date`` and ``role``; reflections ``covers`` and
    ``importance``."""

    id: str
    tier: TierNumber
    content: str
    score: float | None = Field(default=None, exclude_if=_omit_none)
    date: str | None = Field(default=None, exclude_if=_omit_none)
    covers: Covers | None = Field(default=None, exclude_if=_omit_none)
    role: Role | None = Field(default=None, exclude_if=_omit_none)
    importance: int | None = Field(default=None, exclude_if=_omit_none)
    # reflections: how much of the support is gone (orphaned: every source deleted)
    sources_total: int | None = Field(default=None, exclude_if=_omit_none)
    sources_deleted: int | None = Field(default=None, exclude_if=_omit_none)
    orphaned: bool | None = Field(default=None, exclude_if=_omit_none)
    stored_by: StoredBy | None = Field(default=None, exclude_if=_omit_none)
    # reflections: replaced by a later one (absent while current), and the kind when set
    superseded: SupersededBy | None = Field(default=None, exclude_if=_omit_none)
    kind: Kind | None = Field(default=None, exclude_if=_omit_none)


class PrepareResponse(BaseModel):
    context: str = Field(description="Plain text to put before the model's input.")
    memories_found: int
    est_tokens: int
    reflection: Reflection


class DateSearchResponse(BaseModel):
    """Rows of the window; ``returned`` is the part of the window this page covers."""

    memories: list[MemoryRow]
    returned: Covers
    truncated: bool
    reflection: Reflection


class SearchResponse(BaseModel):
    memories: list[MemoryRow]
    reflection: Reflection


class CheckoutMemory(BaseModel):
    text: str
    date: str
    # contract 2: the line's number, what an entry's "cites" names
    line: int | None = Field(default=None, exclude_if=_omit_none)


class ReflectionContract(BaseModel):
    version: int
    target_tier: int
    instructions: str
    entry_schema: dict[str, str]
    min_entries: int
    max_entries: int
    recommended_entries: str
    # contract 2: the labels of the related reflections its instructions show
    labels: list[str] | None = Field(default=None, exclude_if=_omit_none)


class TierDefinitions(BaseModel):
    target_tier: int
    instruction: str


class CheckoutResponse(BaseModel):
    """A leased batch, or the termination signal ``{batch_id: null, count: 0, message}``."""

    batch_id: str | None
    count: int
    tier: int | None = Field(default=None, exclude_if=_omit_none)
    est_tokens: int | None = Field(default=None, exclude_if=_omit_none)
    covers: Covers | None = Field(default=None, exclude_if=_omit_none)
    lease_expires_at: str | None = Field(default=None, exclude_if=_omit_none)
    memories: list[CheckoutMemory] | None = Field(default=None, exclude_if=_omit_none)
    source_ids: list[str] | None = Field(default=None, exclude_if=_omit_none)
    reflection_contract: ReflectionContract | None = Field(default=None, exclude_if=_omit_none)
    tier_definitions: TierDefinitions | None = Field(default=None, exclude_if=_omit_none)
    message: str | None = Field(default=None, exclude_if=_omit_none)


class CreatedReflection(BaseModel):
    id: str
    importance: int
    # true: no source of its batch supports it well (docs/consolidation.md); absent otherwise
    weak_support: bool | None = Field(default=None, exclude_if=_omit_none)


class CommitResponse(BaseModel):
    batch_id: str
    committed: bool
    already_committed: bool
    tier: TierNumber
    created: list[CreatedReflection]
    sources_consolidated: int
    reflection: Reflection


class ConsolidateRunRequest(_Request):
    max_tokens: Annotated[
        TokenLimit | None,
        Field(
            description="Each batch's token cap, clamped to "
            f"{limits.CHECKOUT_TOKENS_MIN:,}-{limits.CHECKOUT_TOKENS_MAX:,} as checkout's; "
            f"default {limits.CONSOLIDATE_NOW_TOKENS:,}."
        ),
    ] = None


class ConsolidateRunResponse(BaseModel):
    """What the server's reflector did for this vault now (docs/reflector.md)."""

    batches: int = Field(description="Batches committed.")
    reflections: int = Field(description="Reflections those batches created.")
    memories: int = Field(description="Memories those batches consolidated.")
    stopped: str = Field(
        description="Why the run ended: nothing_to_consolidate, all_leased, batch_limit, "
        "below_threshold, batch_failed (docs/consolidation.md)."
    )
    message: str = Field(description="What happened, in a sentence.")
    reflection: Reflection


class ServerReflector(BaseModel):
    """The server's reflector and this vault (docs/reflector.md)."""

    configured: bool = Field(description="Whether this server has a reflector at all.")
    enabled: bool = Field(
        description="Whether it may consolidate this vault (false: its owner consolidates "
        "with their own model)."
    )
    running: bool = Field(description="Whether a run holds the vault now.")
    last_run: str | None
    last_outcome: str | None = Field(description="The last run's stop reason.")
    last_error: str | None = Field(description="Why the last run failed (null after a good one).")
    last_batches: int
    last_reflections: int
    failures: int = Field(description="Failed runs in a row.")
    next_run_after: str | None = Field(
        description="No run on the debt suggestion before then (the cooldown, or the backoff)."
    )


class ServerReflectorRequest(_Request):
    enabled: StrictBool


class ImportReflectionsResponse(BaseModel):
    created: list[CreatedReflection]
    reflection: Reflection


class EvidenceMark(BaseModel):
    """A source's place in the inspected reflection's own evidence: its rank (1 first), the
    score of reflection and source, and whether the entry cited its line."""

    rank: int
    score: float
    cited: bool


class LineageRow(BaseModel):
    id: str
    tier: TierNumber
    content: str
    role: Role | None
    importance: int | None
    date: str
    covers: Covers | None = Field(default=None, exclude_if=_omit_none)
    score: float | None = Field(default=None, exclude_if=_omit_none)
    sources_total: int | None = Field(default=None, exclude_if=_omit_none)
    sources_deleted: int | None = Field(default=None, exclude_if=_omit_none)
    orphaned: bool | None = Field(default=None, exclude_if=_omit_none)
    stored_by: StoredBy | None = Field(default=None, exclude_if=_omit_none)
    # reflections: replaced by a later one (absent while current), and the kind when set
    superseded: SupersededBy | None = Field(default=None, exclude_if=_omit_none)
    kind: Kind | None = Field(default=None, exclude_if=_omit_none)
    # a source of the inspected reflection that is part of its own evidence
    evidence: EvidenceMark | None = Field(default=None, exclude_if=_omit_none)


class InspectResponse(BaseModel):
    memory_id: str
    tier: TierNumber
    content: str
    date: str
    role: Role | None = Field(default=None, exclude_if=_omit_none)
    importance: int | None = Field(default=None, exclude_if=_omit_none)
    batch_id: str | None = Field(default=None, exclude_if=_omit_none)
    covers: Covers | None = Field(default=None, exclude_if=_omit_none)
    sources: list[LineageRow] | None = Field(default=None, exclude_if=_omit_none)
    sources_total: int | None = Field(default=None, exclude_if=_omit_none)
    sources_deleted: int | None = Field(default=None, exclude_if=_omit_none)
    orphaned: bool | None = Field(default=None, exclude_if=_omit_none)
    truncated: bool | None = Field(default=None, exclude_if=_omit_none)
    offset: int | None = Field(default=None, exclude_if=_omit_none)
    next_offset: int | None = Field(default=None, exclude_if=_omit_none)
    consolidated_into: list[LineageRow] | None = Field(default=None, exclude_if=_omit_none)
    stored_by: StoredBy | None = Field(default=None, exclude_if=_omit_none)
    # a reflection: how many of its sources are its own evidence (listed first), and true
    # when its best support is weak
    evidence_total: int | None = Field(default=None, exclude_if=_omit_none)
    weak_support: bool | None = Field(default=None, exclude_if=_omit_none)
    # reflections: replaced by a later one (absent while current), and the kind when set
    superseded: SupersededBy | None = Field(default=None, exclude_if=_omit_none)
    kind: Kind | None = Field(default=None, exclude_if=_omit_none)
    # a reflection that replaced earlier ones: those (each superseded by it), newest first
    replaced: list[LineageRow] | None = Field(default=None, exclude_if=_omit_none)


class DeleteChoice(BaseModel):
    """What one way of following derived reflections would take."""

    by_tier: dict[str, list[str]]
    returned_to_pool: dict[str, int]


class DeleteIdsResponse(BaseModel):
    requested: int
    deleted: int
    do_deleted: int
    not_found: int
    legacy_fallback_used: int
    failed: list[str]
    # with derived or dry_run: the ids that went (would go) at each tier, and how many
    # sources returned (would return) to the unconsolidated pool at each tier
    dry_run: bool | None = Field(default=None, exclude_if=_omit_none)
    by_tier: dict[str, list[str]] | None = Field(default=None, exclude_if=_omit_none)
    returned_to_pool: dict[str, int] | None = Field(default=None, exclude_if=_omit_none)
    # a derived dry run: what following lineage (true) and evidence would each take
    choices: dict[Literal["lineage", "evidence"], DeleteChoice] | None = Field(
        default=None, exclude_if=_omit_none
    )
    reflection: Reflection


class WipeResponse(BaseModel):
    deleted: int
    reflection: Reflection


class TierStats(BaseModel):
    count: int
    est_tokens: int
    importance: int | None = Field(default=None, exclude_if=_omit_none)


class StatsResponse(BaseModel):
    vault: str
    total_memories: int
    total_tokens: int
    tiers: dict[str, TierStats]
    oldest: str | None
    newest: str | None
    pending_embeddings: int = Field(description="Rows still waiting for their vectors.")
    preferences: int = Field(
        default=0,
        description="Current standing preferences and instructions (reflections of kind "
        '"preference"): prepare puts them first.',
    )
    reflection: Reflection
    server_reflector: ServerReflector | None = None


BucketSize = Literal["day", "week", "month"]


class TimelineBucket(BaseModel):
    start: str = Field(
        description="The bucket's first day, an ISO date (UTC): weeks start on Monday, "
        "months on the 1st."
    )
    tiers: dict[str, int] = Field(description='Memories per tier: always "1", "2" and "3".')


class TimelineResponse(BaseModel):
    """The vault's memories per period and tier: non-empty buckets only, oldest first. A
    memory is counted at its date (a reflection at the start of its coverage)."""

    vault: str
    bucket: BucketSize
    buckets: list[TimelineBucket]
    last_reflection_at: str | None = Field(
        default=None,
        description="When the newest reflection was made (the last consolidation); null "
        "when the vault holds none.",
    )


class UsageBucket(BaseModel):
    events: int
    retrieval_tokens: int
    storage_tokens: int
    deletion_tokens: int


class ReflectorUsage(BaseModel):
    """What the server's reflector sent its model provider and received back: not part of
    the vault's metered tokens (``totals``); the provider bills them to the operator."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


class UsageResponse(BaseModel):
    vault: str
    period: Covers
    totals: UsageBucket
    by_endpoint: dict[str, UsageBucket]
    by_session: dict[str, UsageBucket]
    reflector: ReflectorUsage = Field(default_factory=ReflectorUsage)


class MarkConsolidatedResponse(BaseModel):
    marked: int
    reflection: Reflection


class KeyCreated(BaseModel):
    id: str
    key: str
    name: str
    read_only: bool
    created_at: str


class KeyListed(BaseModel):
    """One key of the vault, never its secret: ``prefix`` is its first characters (null for
    keys made before prefixes were kept); ``last_used_at`` moves at most once a minute."""

    id: str
    name: str
    prefix: str | None
    read_only: bool
    created_at: str
    last_used_at: str | None


class KeyList(BaseModel):
    vault: str
    keys: list[KeyListed]


class KeyRevoked(BaseModel):
    id: str
    revoked: Literal[True] = True


class KeyInfo(BaseModel):
    """What the presented key may do: its vault reference, never the key."""

    vault: str
    read_only: bool
    mode: Literal["full", "read", "write", "off"]


class Health(BaseModel):
    status: Literal["ok"]
    store: str
    version: str


class ErrorBody(BaseModel):
    code: str
    message: str
    details: dict[str, Any]


class ErrorEnvelope(BaseModel):
    error: ErrorBody
