"""The vault's vocabulary: frozen records passed between the service and the store."""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass, field
from typing import Literal

Tier = Literal[1, 2, 3]
SourceTier = Literal[1, 2]
Role = Literal["user", "assistant", "system", "observation"]
WriteMode = Literal["full", "write"]  # how a key that stores was presented (``:write``)
Kind = Literal["preference"]  # an entry's kind (limits.KINDS): a lasting preference
# what a delete takes beside the ids: nothing, every reflection built from them (True), or
# only those whose own evidence includes them ("evidence")
Derived = bool | Literal["evidence"]
Follow = Literal["lineage", "evidence"]  # the two ways a dry run shows side by side
UsageKind = Literal["storage", "retrieval", "deletion", "provider_input", "provider_output"]
# what the server's reflector sent its model provider and received back, metered apart from
# the vault's own calls (``UsageResponse.reflector``) under this endpoint
REFLECTOR_ENDPOINT = "reflector"
ROLES: tuple[Role, ...] = ("user", "assistant", "system", "observation")


def reflection_tier(source: SourceTier) -> Tier:
    """The tier a batch of ``source`` memories is consolidated into: raw into reflections,
    reflections into high-level reflections."""
    return 2 if source == 1 else 3


_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def new_memory_id() -> str:
    """Memory ids are UUIDs: one public namespace across tiers and vaults, never reused."""
    return str(uuid.uuid4())


def new_batch_id() -> str:
    """``cb_`` and 128 random bits."""
    return "cb_" + secrets.token_hex(16)


def new_vault_id() -> str:
    return str(uuid.uuid4())


def new_vault_ref() -> str:
    """The opaque public name of a vault, shown by status tools instead of any key."""
    return "vr_" + secrets.token_hex(8)


def new_memory_key() -> str:
    """``mk_`` and 43 base62 characters (about 256 bits)."""
    return "mk_" + "".join(secrets.choice(_BASE62) for _ in range(43))


def new_key_id() -> str:
    """The public id of a memory key: what lists and revocations name, never the secret."""
    return "key_" + secrets.token_hex(8)


def key_prefix(key: str) -> str:
    """The first characters of a key, to recognise it by (about 30 of its 256 bits)."""
    return key[:8]


@dataclass(frozen=True)
class KeyRecord:
    vault_id: str
    vault_ref: str
    name: str
    read_only: bool
    created_ms: int
    id: str = ""
    prefix: str | None = None  # None for keys created before prefixes were kept
    last_used_ms: int | None = None


@dataclass(frozen=True)
class Writer:
    """Which key stored a memory: its public id (never the key), and whether it was
    presented in full or narrowed to ``:write`` (a key that stores but may not read)."""

    key_id: str
    mode: WriteMode
    # where it came from (``stored_by``): the key's name when it stored, the surface the
    # write came through and the client the surface names (None: not known)
    key_name: str | None = None
    surface: str | None = None
    client: str | None = None


@dataclass(frozen=True)
class Memory:
    id: str
    tier: Tier
    content: str
    tokens: int
    date_from: int
    date_to: int
    role: Role | None = None
    importance: int | None = None
    session_id: str | None = None
    batch_id: str | None = None
    seq: int = 0  # storage order: consecutive raw memories of a conversation are neighbours
    # a reflection's support, when the reader asked for it: sources linked and deleted since
    support: Support | None = None
    # what stored it, when the reader asked for it (None: not asked, or stored before kept)
    stored_by: Writer | None = None
    # a reflection a later one replaced (None: current, or not asked), and its kind
    superseded: Superseded | None = None
    kind: Kind | None = None


@dataclass(frozen=True)
class Superseded:
    """When a reflection stopped being current (ms) and the id of the one that replaced it."""

    at: int
    by: str


@dataclass(frozen=True)
class Support:
    """How much of a reflection's support is gone: ``deleted`` of its ``total`` sources
    (orphaned when every one is)."""

    total: int
    deleted: int

    @property
    def orphaned(self) -> bool:
        return self.total > 0 and self.deleted >= self.total


@dataclass(frozen=True)
class ExportedMemory:
    """One memory as a backup holds it: with whether it was consolidated, and for a
    reflection the ids of its sources still present and how many were deleted since."""

    memory: Memory
    consolidated: bool
    sources: tuple[str, ...] = ()
    sources_deleted: int = 0


@dataclass(frozen=True)
class NewRaw:
    """One raw memory about to be ingested (a whole message or one unit of it)."""

    id: str
    role: Role
    content: str
    tokens: int
    date_ms: int
    session_id: str | None
    dedup: str
    created_ms: int


@dataclass(frozen=True)
class Candidate:
    """A row free for checkout, as the selection rules see it."""

    id: str
    tokens: int
    importance: int | None
    date_from: int
    date_to: int
    content: str


@dataclass(frozen=True)
class Counters:
    """Per-vault counters kept exact in the same transaction as every write."""

    raw_units: int = 0
    raw_tokens: int = 0
    t2_count: int = 0
    t2_importance: int = 0
    t2_tokens: int = 0


@dataclass(frozen=True)
class TierTotals:
    count: int
    tokens: int
    importance: int


@dataclass(frozen=True)
class Stats:
    vault_ref: str
    totals: dict[int, TierTotals]
    oldest_ms: int | None
    newest_ms: int | None
    counters: Counters


@dataclass(frozen=True)
class ReflectorRuns:
    """The server's reflector and one vault (docs/reflector.md): whether it may consolidate
    the vault, whether a run holds it now, when the next triggered run may start, and what
    the last run did."""

    enabled: bool = True
    held_until_ms: int = 0  # a run holds the vault until then
    next_after_ms: int = 0  # no triggered run before then (the cooldown, or the backoff)
    failures: int = 0  # failed runs in a row
    last_run_ms: int | None = None
    last_outcome: str | None = None  # the last run's stop reason
    last_error: str | None = None  # why the last failed run failed (none after a good run)
    last_batches: int = 0
    last_reflections: int = 0


@dataclass(frozen=True)
class RunOutcome:
    """What one run of the server's reflector reports when it ends."""

    outcome: str  # its stop reason (the consolidation loop's), or why it did not run
    error: str | None = None  # None: no batch failed
    batches: int = 0  # batches committed
    reflections: int = 0
    calls: tuple[tuple[int, int], ...] = ()  # tokens sent and received, per provider call


@dataclass(frozen=True)
class RunEnded:
    """What one run of the server's reflector did, as it is kept for stats."""

    at_ms: int
    outcome: str
    next_after_ms: int
    error: str | None = None  # None: the run succeeded (and the failures in a row end)
    batches: int = 0
    reflections: int = 0


@dataclass(frozen=True)
class Backlog:
    """Every vault of a store at once, as an operator watches it (docs/metrics.md): nothing
    of any one vault, only counts and sums."""

    vaults: int
    consolidation_due: int  # vaults whose debt reached the threshold at either tier
    raw_tokens: int  # unconsolidated raw tokens, summed over the vaults
    tier2_importance: int  # unconsolidated tier-2 importance, summed over the vaults
    pending_embeddings: int  # rows waiting for vectors (each vault's pending_embeddings, summed)


@dataclass(frozen=True)
class Entry:
    """A committed reflection. Contract 2 adds the labels of the shown reflections it
    replaces, the batch lines (1-based) it cites, and its kind."""

    text: str
    importance: int
    replaces: tuple[str, ...] = ()
    cites: tuple[int, ...] = ()
    kind: Kind | None = None


@dataclass(frozen=True)
class Related:
    """An existing reflection a version-2 checkout shows the model: its label (``R1``...),
    never its id, with the span it covers and its text."""

    label: str
    covers_from: int
    covers_to: int
    text: str


@dataclass(frozen=True)
class Batch:
    batch_id: str
    tier: SourceTier
    est_tokens: int
    covers_from: int
    covers_to: int
    lease_until: int
    sources: tuple[Candidate, ...]
    contract: int = 1  # the reflection contract's version it was checked out with
    related: tuple[Related, ...] = ()  # what a version-2 checkout shows, in label order


@dataclass(frozen=True)
class EmptyCheckout:
    leased: int


@dataclass(frozen=True)
class Created:
    id: str
    importance: int
    # no source of its batch supports it well (rules/evidence.py): flagged in the answer
    weak_support: bool = False


@dataclass(frozen=True)
class CommitOutcome:
    batch_id: str
    target_tier: Tier
    created: tuple[Created, ...]
    sources_consolidated: int
    already_committed: bool


@dataclass(frozen=True)
class Lineage:
    """What inspect shows of one memory: sources below it, reflections above it."""

    memory: Memory
    sources: tuple[Memory, ...] = ()
    sources_total: int = 0
    sources_deleted: int = 0
    consolidated_into: tuple[Memory, ...] = ()
    # with sources ordered by similarity: each source's cosine to the memory (None: no vector)
    scores: tuple[float | None, ...] = ()
    # a reflection's own evidence, shown first: each source's place in it (None: the rest of
    # the batch), how many of its sources are evidence, and whether its support is weak
    marks: tuple[Mark | None, ...] = ()
    evidence_total: int = 0
    weak_support: bool = False


@dataclass(frozen=True)
class Mark:
    """A source's place in a reflection's evidence: its rank (1 first), the score of entry
    and source, and whether the entry cited it."""

    rank: int
    score: float
    cited: bool


@dataclass(frozen=True)
class DeleteOutcome:
    requested: int
    deleted: int
    not_found: int
    tokens: int
    # what went (a dry run: would go) at each tier, and how many sources of the reflections
    # removed returned (would return) to the unconsolidated pool, per tier
    by_tier: dict[int, tuple[str, ...]] = field(default_factory=dict)
    returned: dict[int, int] = field(default_factory=dict)
    dry_run: bool = False
    # a derived dry run: what each way of following derived reflections would take
    # ("lineage", "evidence"): (ids by tier, sources returned by tier)
    choices: dict[Follow, Choice] = field(default_factory=dict)


@dataclass(frozen=True)
class Choice:
    """What one way of following derived reflections would take."""

    by_tier: dict[int, tuple[str, ...]]
    returned: dict[int, int]


@dataclass(frozen=True)
class UsageEvent:
    endpoint: str
    kind: UsageKind
    tokens: int
    session_id: str | None = None


@dataclass(frozen=True)
class UsageLine:
    endpoint: str
    kind: UsageKind
    session_id: str | None
    events: int
    tokens: int


@dataclass(frozen=True)
class ScoredMemory:
    memory: Memory
    score: float | None


@dataclass(frozen=True)
class SearchFilter:
    tiers: tuple[Tier, ...] | None = None
    min_importance: int | None = None
    session_id: str | None = None
    window: tuple[int, int] | None = None  # coverage must overlap [from, to]
    # When set: only memories stored in full mode by one of these keys (public ids), or
    # before writers were kept (rules/writers.py). Search indexes honour it; date pages don't.
    writers: frozenset[str] | None = None
