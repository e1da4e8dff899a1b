"""The pure rules of facts that stay current (vault/rules/current.py), with cases."""

from __future__ import annotations

from mcp_memoryrouter.vault.rules.current import (
    current_first,
    gist,
    merged,
    preference_budget,
    related_queries,
    spread_lines,
    strongest,
)
from mcp_memoryrouter.vault.rules.domain import Memory, ScoredMemory, Superseded


def row(memory_id: str, replaced_by: str | None = None) -> Memory:
    superseded = None if replaced_by is None else Superseded(1, replaced_by)
    return Memory(memory_id, 2, memory_id, 1, 0, 0, superseded=superseded)


def ids(hits: list[ScoredMemory]) -> list[str]:
    return [h.memory.id for h in hits]


def test_a_superseded_row_follows_its_successor_which_takes_its_place_and_score() -> None:
    hits = [ScoredMemory(row("a"), 0.9), ScoredMemory(row("old", "new"), 0.8)]
    ranked = current_first(hits, {"old": row("new")})
    assert ids(ranked) == ["a", "new", "old"]
    assert ranked[1].score == 0.8


def test_a_successor_ranked_higher_already_stays_where_it_is() -> None:
    hits = [ScoredMemory(row("new"), 0.9), ScoredMemory(row("old", "new"), 0.8)]
    assert ids(current_first(hits, {"old": row("new")})) == ["new", "old"]


def test_a_successor_found_lower_moves_up_and_appears_once() -> None:
    hits = [ScoredMemory(row("old", "new"), 0.9), ScoredMemory(row("new"), 0.1)]
    assert ids(current_first(hits, {"old": row("new")})) == ["new", "old"]


def test_current_only_leaves_superseded_rows_out_and_keeps_their_successor() -> None:
    hits = [ScoredMemory(row("old", "mid"), 0.9), ScoredMemory(row("mid", "new"), 0.5)]
    leads = {"old": row("new"), "mid": row("new")}
    assert ids(current_first(hits, leads, current_only=True)) == ["new"]
    assert ids(current_first(hits, leads)) == ["new", "old", "mid"]


def test_a_superseded_row_whose_chain_leads_nowhere_stays_marked() -> None:
    hits = [ScoredMemory(row("old", "gone"), 0.9)]
    assert ids(current_first(hits, {})) == ["old"]
    assert ids(current_first(hits, {}, current_only=True)) == []


def test_related_queries_cut_a_batch_into_at_most_n_runs_of_bounded_length() -> None:
    texts = [f"moment {n} " + "x" * 90 for n in range(40)]  # 40 texts, ~4,000 characters
    queries = related_queries(texts, 4, 1_500)
    assert len(queries) == 3 and all(len(q) <= 1_500 for q in queries)
    assert queries[0].startswith("moment 0 ") and "moment 39 " in queries[-1]
    assert related_queries(["  ", ""], 4, 1_500) == []
    assert related_queries(["a short one"], 4, 1_500) == ["a short one"]


def test_merged_takes_each_list_in_turn_each_memory_once() -> None:
    a, b, c = row("a"), row("b"), row("c")
    assert [m.id for m in merged([[a, b], [b, c], [c]], 5)] == ["a", "b", "c"]
    assert [m.id for m in merged([[a, b], [c]], 2)] == ["a", "c"]
    assert merged([], 3) == []


def test_gist_cuts_at_a_word_and_marks_the_cut() -> None:
    assert gist("short  text", 300) == "short text"
    assert gist("one two three four", 12) == "one two..."
    assert gist("x" * 50, 10) == "xxxxxxx..."


def test_preferences_get_a_fixed_budget_never_above_a_quarter_of_the_block() -> None:
    assert preference_budget(3_000, 300) == 300
    assert preference_budget(800, 300) == 200


def test_a_moment_an_outdated_reflection_stood_on_follows_the_current_one_and_stays() -> None:
    moment = Memory("said-then", 1, "I live in Boston.", 1, 0, 0)
    hits = [ScoredMemory(moment, 0.9)]
    ranked = current_first(hits, {"said-then": row("new")}, current_only=True)
    assert ids(ranked) == ["new", "said-then"]  # what was said then is kept, after


def test_strongest_weighs_a_hit_by_how_far_it_stands_above_its_line() -> None:
    fact, hub, other = row("fact"), row("hub"), row("other")
    small_talk = [ScoredMemory(hub, 0.50), ScoredMemory(fact, 0.45), ScoredMemory(other, 0.44)]
    a_fact = [ScoredMemory(fact, 0.40), ScoredMemory(hub, 0.10), ScoredMemory(other, 0.05)]
    assert [m.id for m in strongest([small_talk, a_fact], frozenset(), None, 1)] == ["fact"]
    assert [m.id for m in strongest([a_fact], frozenset({"fact"}), None, 2)] == ["hub", "other"]
    assert strongest([a_fact], frozenset(), 0.2, 5) == [fact]
    assert strongest([[]], frozenset(), None, 5) == []


def test_spread_lines_keeps_the_order_and_reaches_the_end() -> None:
    texts = [str(n) for n in range(10)]
    assert spread_lines(texts, 20) == texts
    assert spread_lines(texts, 4) == ["0", "2", "5", "7"]
