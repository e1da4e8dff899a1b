"""Product copy a model reads: the server's instructions and the passages tool descriptions
share."""

from __future__ import annotations

INSTRUCTIONS = (
    "MemoryRouter is the user's long-term memory, in three tiers: raw memories (exact moments), "
    "reflections (what happened) and high-level reflections (why it matters). Search it "
    "(search_memories, date_search_memories) when the conversation may depend on the past; "
    "drill into any result with inspect_memory. Store what the user wants remembered with "
    "store_memory. When a result carries consolidation_suggestion, offer to consolidate: call "
    "consolidate_memories, write the entries exactly as its reflection_contract instructs, and "
    "commit them with commit_reflections."
)
TIER_GUIDE = (
    " Tiers: 3 = high-level reflections (identity, principles, what matters most); 2 = "
    "reflections of specific events; 1 = raw verbatim memories. Only 2 and 3 carry importance "
    "(1-10). Topic lookups: omit tiers and importance. "
    "Overviews: tiers [3]. Most important things: tiers [3], importance 8, limit 250. Events "
    "without raw noise: tiers [2]. Exact wording: search tiers [3], then inspect_memory down "
    "the lineage."
)
FITTED = (
    " Long texts end in a marker (inspect_memory has them whole); omitted: results left out to fit."
)
