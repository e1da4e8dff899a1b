"""Every number of the product document, and the few fixed formats and phrases both sides
of the API read, written once.

The wire models (``schemas.py``), the vault's rules and service, the reflection contract's
text, the MCP tools' schemas and the consolidation client all read their bounds from here,
so a limit cannot say one thing at one boundary and another elsewhere. Imports nothing of
the package.
"""

from __future__ import annotations

import re

# --- memories and text ------------------------------------------------------------------
TIERS = (1, 2, 3)  # raw memories, reflections, high-level reflections
IMPORTANCE_MIN, IMPORTANCE_MAX = 1, 10  # only reflections carry importance
ROLES = ("user", "assistant", "system", "observation")
MAX_QUERY_CHARS = 10_000
MAX_ID_CHARS = 200  # memory ids, batch ids, session ids, key names
MAX_INGEST_MESSAGES = 1_000
MAX_BODY_BYTES = 1_048_576  # a request body above this is 413 (the default of the setting)
BODY_SECONDS = 60  # a request body (REST, the chat proxy) not whole within this is 408

# --- search and prepare -----------------------------------------------------------------
SEARCH_LIMIT_DEFAULT, SEARCH_LIMIT_MAX = 10, 250
PREPARE_QUERY_MESSAGES = 3  # prepare's query: the conversation's last three messages
CONTEXT_LIMIT_MAX = 50  # prepare's context_limit: 1 to 50 items
PREPARE_MAX_TOKENS = 200_000

# --- date search ------------------------------------------------------------------------
DATE_PAGE_TOKENS = 50_000  # a page's default token budget; clamped like a checkout's

# --- moments ----------------------------------------------------------------------------
# The dates and times a request may carry: an ISO date (2026-02-01), or a date, "T" (or a
# space) and a time of hours and minutes, seconds and a fraction optional, then Z, an offset
# or nothing (UTC). The calendar is in the pattern (month lengths, leap days, years 0001 to
# 9999), so the vault checks with the very patterns /openapi.json carries; both match the
# whole text and hold nothing regex dialects read differently ([0-9], no \d or lookaround).
_YEAR = "(000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})"
_MONTH_DAY = (
    "((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])"
    "|(0[469]|11)-(0[1-9]|[12][0-9]|30)"
    "|02-(0[1-9]|1[0-9]|2[0-8]))"
)
_LEAP_YEAR = "([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)"
_TIME = r"([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]+)?)?"
_OFFSET = "(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
MOMENT = re.compile(f"({_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)([T ]{_TIME}{_OFFSET}?)?")
# On the first and the last day an offset could carry a moment outside the years 0001 to
# 9999, where no date can be written: there a time is given in UTC (Z, +00:00 or none).
_NOT_UTC = "[+-]((0[1-9]|1[0-9]|2[0-3]):[0-5][0-9]|00:(0[1-9]|[1-5][0-9]))"
MOMENT_OFF_THE_EDGE = re.compile(f"(0001-01-01|9999-12-31)[T ].*{_NOT_UTC}")

# --- consolidation ----------------------------------------------------------------------
CHECKOUT_TOKENS_DEFAULT = 50_000  # tier 1 batch without max_tokens
CHECKOUT_TOKENS_MIN, CHECKOUT_TOKENS_MAX = 1_000, 200_000  # max_tokens is clamped to these
TIER2_IMPORTANCE_TARGET = 150  # tier 2 batches fill up to this summed importance...
TIER2_SOFT_CAP_TOKENS = 10_000  # ...within this many tokens
LEASE_SECONDS = 900  # a checkout's lease
ENTRIES_MIN, ENTRIES_MAX = 1, 100  # entries a commit holds
ENTRIES_RECOMMENDED = "5-10"
ENTRY_CHARS_MIN, ENTRY_CHARS_MAX = 1, 8_000  # an entry's text, after trimming
# --- the second reflection contract -------------------------------------------------------
# (docs/consolidation.md#contract-2-facts-that-stay-current)
CONTRACTS = (1, 2)  # checkout's "contract": 1 (the default, unchanged) or 2
RELATED_MAX = 16  # existing reflections a version-2 checkout shows, labelled R1, R2, ...
REPLACES_MAX = 32  # labels and lines one entry may name in "replaces"
RELATED_LINES = 256  # batch lines compared with them by meaning (evenly spread, at most)
RELATED_QUERIES, RELATED_QUERY_CHARS = 4, 1_500  # ...or searched by words, without vectors
RELATED_CHARS = 200  # of each one's text the contract shows (cut at a word, then "...")
# a version-2 contract at its longest (RELATED_MAX reflections shown), as the MCP tool sends
# it (twice: structured and as text), for the result budget; tests/vault pins it
CONTRACT_TOKENS = 3_800
# what "replaces" names: a shown reflection's label (R1...), or a line of the batch (L3...)
# that a later line of the same batch changes
RELATED_LABEL = r"^(R[1-9][0-9]?|L[1-9][0-9]{0,4})$"
CITES_MAX = 50  # batch lines one entry may cite
KINDS = ("preference",)  # an entry's "kind": a lasting preference or instruction
PREFERENCES_TOKENS = 300  # prepare's block of current preferences, before what it retrieved
SUPERSEDED_CHAIN_MAX = 16  # replacements followed from a superseded row to the current one
SAMPLED_BATCH_TOKENS = 12_000  # a batch reflect_memories asks the host's model to reflect on
SAMPLED_ANSWER_TOKENS = 8_192  # and what it lets that model write for one batch

# --- the server's reflector (docs/reflector.md) ------------------------------------------
REFLECTOR_COOLDOWN_SECONDS = 1_800  # after a completed run, as the connectors' cooldown
REFLECTOR_BACKOFF_SECONDS = 60  # after a failed run; doubled per failure in a row...
REFLECTOR_BACKOFF_MAX_SECONDS = 21_600  # ...up to this (or the provider's Retry-After)
REFLECTOR_RUN_SECONDS = 1_200  # one run's hold on its vault, across replicas (a crashed
# replica's hold runs out like the connectors' stale lockfile)
REFLECTOR_CALL_SECONDS = 120  # a provider's answer to one batch (the setting's default)
REFLECTOR_ANSWER_TOKENS = 8_192  # what the model may write for one batch (Anthropic asks)
REFLECTOR_ERROR_CHARS = 300  # the last error kept for stats
CONSOLIDATE_NOW_TOKENS = 10_000  # "consolidate now": a batch's default max_tokens

# --- reflection debt --------------------------------------------------------------------
DEBT_THRESHOLD_TOKENS = 50_000  # raw tokens worth...
DEBT_THRESHOLD_IMPORTANCE = 150  # ...this much importance; a suggestion from here on
# The suggestion names the tiers to consolidate with these words ("raw consolidation
# suggested: N unconsolidated importance"; both joined by "; "); clients read them back.
RAW_SUGGESTED = "raw consolidation suggested"
TIER2_SUGGESTED = "tier 2 consolidation suggested"

# --- ids --------------------------------------------------------------------------------
# Memory ids are UUIDs, batch ids ``cb_`` and hex. Ids never travel through the model: an
# entry whose text holds one is refused, by the vault and by the consolidation client alike,
# and /openapi.json carries the same patterns (so they hold no ``\b`` or ``\d``, which regex
# dialects read differently).
MEMORY_ID = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)
BATCH_ID = re.compile(r"cb_[0-9A-Za-z]{8,}")


def holds_an_id(text: str) -> bool:
    return bool(MEMORY_ID.search(text) or BATCH_ID.search(text))


# --- lineage and deletion ---------------------------------------------------------------
INSPECT_PAGE = 500  # sources per inspect call
MAX_DELETE_IDS = 500  # ids per delete-ids request
# A memory already in the vault whose embedding's cosine to a new text is at least this is a
# near-duplicate of it (docs/benchmarks.md, "Near-duplicates on write": the paraphrases of
# one fact against different facts of the same kind, python bench/near_duplicates.py)
NEAR_DUPLICATE_COSINE = 0.90
NEAR_DUPLICATES_LISTED = 5  # near-duplicates a store answer lists per message, best first

# --- writes and metering (docs/api.md, "Read your writes"; docs/benchmarks.md) -------------
# A write is answered before it is embedded. The units of the vault's latest small writes (at
# most this many, newest first) that are still queued are embedded by the next search, before
# its vector side; a write of more units is left to the background worker.
READ_YOUR_WRITES_UNITS = 16
# Usage events are kept in memory and written in one transaction by the background worker at
# least this often, and at once when this many wait (or the usage is read, or the server
# stops): a crash loses at most the last second's events, at most this many.
USAGE_FLUSH_SECONDS = 1.0
USAGE_WAITING_MAX = 1_000
MAX_CLIENT_NAME_CHARS = 100  # the client name a surface reports (X-MemoryRouter-Client)
# Each committed entry's own evidence (rules/evidence.py): the uncited sources kept, best
# first; the score a source needs to be kept, and the best score below which the entry is
# flagged weakly supported, per scoring (docs/benchmarks.md, "Each entry's own evidence":
# entries that paraphrase their batch against entries it does not hold, python
# bench/evidence.py)
EVIDENCE_MAX = 8
EVIDENCE_FLOOR_COSINE, WEAK_SUPPORT_COSINE = 0.45, 0.6
EVIDENCE_FLOOR_LEXICAL, WEAK_SUPPORT_LEXICAL = 0.15, 0.25
MAX_SOURCE_IDS = 10_000  # sources an imported reflection links to

# --- the MCP tools ----------------------------------------------------------------------
STORE_MEMORY_CHARS = 100_000  # store_memory's text; longer histories go through REST ingest

# --- the chat proxy ---------------------------------------------------------------------
PROXY_MAX_BODY_BYTES = 32 * 1_048_576  # a chat request (images included) above this is 413
PROXY_MAX_ANSWER_BYTES = 16 * 1_048_576  # a provider's answer held to be stored (all relayed)

# --- the explorer (/ui) -----------------------------------------------------------------
UI_FORM_MAX_BYTES = 64 * 1024  # a form post (a selection of MAX_DELETE_IDS ids fits)
UI_IMPORT_MAX_BYTES = 16 * 1_048_576  # an export uploaded to import (larger: the CLI)
UI_MEMORY_MAX_CHARS = 8_000  # the text of a memory added or corrected in the explorer
UI_MEMORY_FORM_MAX_BYTES = 256 * 1024  # its form: 8,000 characters, each up to 12 bytes sent
UI_SIGN_INS_PER_MINUTE = 10  # sign-in attempts per client address (bursts of as many)
UI_KEY_MAX_CHARS = 200  # a pasted key longer than this is no key
UI_PAGE_TOKENS = 4_000  # a timeline page's date-search budget (a screenful or three)

# --- the embedded authorization server's signing keys (PostgreSQL: shared and rotated) ----
OAUTH_SIGNING_KEY_DAYS = 30  # a key signs this long (the default of the setting), then a new one
OAUTH_KEYS_RELOAD_SECONDS = 60  # each replica re-reads the key set at least this often...
OAUTH_UNKNOWN_KID_RELOAD_SECONDS = 1  # ...and when a token names a key it does not know
