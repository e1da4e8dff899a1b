"""The learned ranker: its features (pure, with cases), its trees scored without LightGBM, the
model file's load and its fallback to today's fusion, the bound on what it scores, and the
relevance floor its calibrated score gives."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.startup import Listening, banner
from mcp_memoryrouter.vault.app import ranking
from mcp_memoryrouter.vault.hybrid import page
from mcp_memoryrouter.vault.rules.dates import to_ms
from mcp_memoryrouter.vault.rules.domain import Memory, ScoredMemory
from mcp_memoryrouter.vault.search import learned
from mcp_memoryrouter.vault.search.features import (
    FEATURES,
    Candidates,
    held_window,
    like_later,
    matrix,
    names_in,
    numbers_in,
    share,
    window_days,
    window_share,
)

DAY = 86_400_000
START = to_ms(datetime(2026, 3, 1, tzinfo=UTC))


def memory(memory_id: str, text: str, day: int = 0, seq: int = 0, **kw: Any) -> Memory:
    moment = START + day * DAY
    return Memory(memory_id, 1, text, len(text.split()), moment, moment, seq=seq, **kw)


def scored(m: Memory, score: float) -> ScoredMemory:
    return ScoredMemory(m, score)


def column(rows: np.ndarray, name: str) -> list[float]:
    return [round(float(v), 3) for v in rows[:, FEATURES.index(name)]]


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("What did Caroline paint for Melanie?", {"caroline", "melanie"}),
        ("Where is the Eiffel Tower", {"eiffel", "tower"}),
        ("what did i say", set()),  # the first word is capitalised by the sentence alone
    ],
)
def test_names_are_the_capitalised_words_past_the_first(query: str, names: set[str]) -> None:
    assert names_in(query) == names


def test_numbers_are_the_words_with_a_digit() -> None:
    assert numbers_in("Did I pay 250 euros on 3rd May or in 2023?") == {"250", "3rd", "2023"}


@pytest.mark.parametrize(
    ("wanted", "held", "expected"),
    [({"a", "b"}, {"a"}, 0.5), (set(), {"a"}, 0.0), ({"a"}, {"a", "c"}, 1.0)],
)
def test_share_is_how_much_of_the_wanted_is_held(
    wanted: set[str], held: set[str], expected: float
) -> None:
    assert share(wanted, held) == expected


def test_time_named_share_and_distance() -> None:
    window = (START, START + 10 * DAY - 1)
    assert window_share(START + DAY, START + DAY, window) == 1.0
    assert window_share(START - 10 * DAY, START + 10 * DAY - 1, window) == pytest.approx(0.5)
    assert window_share(START, START, None) == 0.0
    assert window_days(START + 12 * DAY, START + 12 * DAY, window) == pytest.approx(2, abs=0.01)
    assert window_days(START - 3 * DAY, START - 3 * DAY, window) == 3.0
    assert window_days(START + DAY, START + DAY, window) == 0.0


def test_a_named_time_no_candidate_falls_in_is_no_named_time() -> None:
    top = [scored(memory("a", "cooked a curry", 0), 1.0), scored(memory("b", "pasta", 30), 0.5)]
    month = (START + 25 * DAY, START + 35 * DAY)
    assert held_window(month, top) == month
    a_year_on = (START + 400 * DAY, START + 430 * DAY)  # "last month", asked a year later
    assert held_window(a_year_on, top) is None
    assert held_window(None, top) is None
    found = Candidates("what did I cook last month?", [], [], top, {}, a_year_on)
    assert column(matrix(found, 2), "named_time") == [0.0, 0.0]
    assert column(matrix(found, 2), "window_days") == [0.0, 0.0]


def candidates() -> Candidates:
    a = memory("a", "Caroline: I painted a sunrise over the lake in 2022", 0, 1)
    b = memory("b", "Melanie: that sounds lovely, which lake?", 0, 2)
    c = memory("c", "Caroline: the lake near my town", 40, 3, role="assistant")
    lexical = [scored(a, 6.0), scored(c, 3.0)]
    dense = [scored(b, 0.6), scored(a, 0.5)]
    ordered = [scored(a, 1.0), scored(b, 0.5), scored(c, 0.3)]
    window = (START - DAY, START + DAY)
    return Candidates(
        "When did Caroline paint the lake in 2022?", lexical, dense, ordered, {}, window
    )


def test_a_like_statement_told_later_marks_the_older_and_the_newest() -> None:
    # 0 and 2: the same words ten days apart, scores far under the best; 1, 3 and 4: no
    # shared words, but fused scores within 20 % of each other near the best
    dates = [START, START + DAY, START + 10 * DAY, START + 4 * DAY, START + 20 * DAY]
    scores = [0.2, 0.60, 0.1, 0.62, 0.52]
    held = [
        {"i", "moved", "to", "lyon"},
        {"big", "change"},
        {"i", "moved", "to", "lisbon"},
        {"we", "relocated"},
        {"small", "talk"},
    ]
    out = like_later(dates, scores, held)
    assert [round(float(v), 3) for v in out[:, 0]] == [
        round(float(np.log1p(10)), 3),  # 2 says much the same ten days later
        round(float(np.log1p(19)), 3),  # 4 answers as closely, 19 days later
        0.0,
        round(float(np.log1p(16)), 3),
        0.0,
    ]
    assert list(out[:, 1]) == [0.0, 0.0, 1.0, 0.0, 1.0]  # 2 and 4 are the newest of theirs


def test_statements_of_one_day_or_like_nothing_are_no_update() -> None:
    # the same words within one day (one conversation), and a lone candidate
    out = like_later([START, START + DAY // 2], [0.5, 0.5], [{"a", "b"}, {"a", "b"}])
    assert out.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert like_later([START], [0.5], [{"a"}]).tolist() == [[0.0, 0.0]]
    assert like_later([], [], []).shape == (0, 2)


def test_the_features_of_three_candidates() -> None:
    rows = matrix(candidates(), 10)
    assert rows.shape == (3, len(FEATURES))
    assert column(rows, "bm25") == [6.0, 0.0, 3.0]
    assert column(rows, "bm25_share") == [1.0, 0.0, 0.5]
    assert column(rows, "bm25_rank") == [0, 200, 1]  # b: not a lexical candidate
    assert column(rows, "cosine") == [0.5, 0.6, 0.5]  # c: the dense list's last
    assert column(rows, "cosine_rank") == [1, 0, 200]
    assert column(rows, "in_both") == [1, 0, 0]
    assert column(rows, "fused_rank") == [0, 1, 2]
    assert column(rows, "neighbour_best") == [0.5, 1.0, 0.0]  # c is 40 days later
    assert column(rows, "day_best") == [0.5, 1.0, 0.0]
    assert column(rows, "day_count") == [2, 2, 1]
    assert column(rows, "names_share") == [1.0, 0.0, 1.0]
    assert column(rows, "numbers_share") == [1.0, 0.0, 0.0]
    assert column(rows, "bigrams") == [3, 0, 1]  # "the lake", "lake in", "in 2022"
    assert column(rows, "role_assistant") == [0, 0, 1]
    assert column(rows, "named_time") == [1, 1, 1]
    assert column(rows, "in_window") == [1, 1, 0]
    assert column(rows, "window_days") == [0, 0, 39.0]
    assert column(rows, "date_rank") == [0.333, 0.667, 0.0]
    rare = column(rows, "rare_share")
    assert rare[0] > rare[2] > rare[1] > 0  # a: "2022" as well; b: "lake" alone


def test_features_are_cut_to_the_count_asked() -> None:
    assert matrix(candidates(), 2).shape == (2, len(FEATURES))
    assert matrix(Candidates("q", [], [], [], {}), 5).shape == (0, len(FEATURES))


# Two trees over FEATURES: one splits bm25 at 4 (left leaf -1, right: a split on cosine at
# 0.55, leaves 0.5 / 2), one is a single leaf 0.25.
TREES = learned.Trees(
    feature=np.array([0, -1, 3, -1, -1, -1], dtype=np.int32),
    threshold=np.array([4.0, 0, 0.55, 0, 0, 0]),
    left=np.array([1, -1, 3, -1, -1, -1], dtype=np.int32),
    right=np.array([2, -1, 4, -1, -1, -1], dtype=np.int32),
    value=np.array([0, -1.0, 0, 0.5, 2.0, 0.25]),
    roots=np.array([0, 5], dtype=np.int32),
    depth=2,
)


def test_the_trees_score_each_row_by_its_leaves() -> None:
    rows = matrix(candidates(), 10)
    expected = [0.5 + 0.25, -1 + 0.25, -1 + 0.25]  # a: bm25 6 > 4, cosine 0.5 <= 0.55
    assert TREES.raw(rows).tolist() == expected
    assert learned.Forest.of(TREES).raw(rows).tolist() == expected


def test_the_flat_forest_scores_as_the_trees_on_random_rows() -> None:
    rng = np.random.default_rng(7)
    rows = rng.uniform(0, 8, size=(40, len(FEATURES))).astype(np.float32)
    rows[:, 3] = rng.uniform(0, 1, size=40)
    assert np.allclose(learned.Forest.of(TREES).raw(rows), TREES.raw(rows))


def ranker(a: float = 1.0, b: float = 0.0) -> learned.LearnedRanker:
    return learned.LearnedRanker(TREES, a, b, "two trees")


def test_the_file_round_trips_and_is_refused_for_other_features(tmp_path: Path) -> None:
    path = tmp_path / "ranker.json"
    body = learned.to_json(TREES, 2.0, -1.0, "two trees")
    path.write_text(json.dumps(body))
    loaded = learned.load(path)
    assert loaded is not None
    rows = matrix(candidates(), 10)
    assert loaded.probabilities(rows).tolist() == ranker(2.0, -1.0).probabilities(rows).tolist()
    assert "two trees" in learned.describe(loaded)
    path.write_text(json.dumps({**body, "features": ["bm25"]}))
    with pytest.raises(ValueError, match="train it again"):
        learned.load(path)


def test_without_a_file_search_ranks_with_fusion(tmp_path: Path) -> None:
    assert learned.load(tmp_path / "absent.json") is None
    assert learned.describe(None).startswith("fusion")
    found = candidates()
    assert [h.memory.id for h in page(found, None, 10, None)] == ["a", "b", "c"]


def padded(found: Candidates, total: int) -> Candidates:
    """``found`` with filler candidates after its own, ``total`` in all."""
    filler = [
        scored(memory(f"z{i:03}", "filler", 90 + i, 100 + i), 0.01)
        for i in range(total - len(found.ordered))
    ]
    return Candidates(found.query, found.lexical, found.dense, [*found.ordered, *filler], {})


def test_the_ranker_orders_its_candidates_by_probability() -> None:
    found = padded(candidates(), learned.RERANK)
    ranked = learned.LearnedRanker(TREES, -1.0, 0.0, "reversed").rerank(found)
    ids = [h.memory.id for h in ranked]
    assert ids[:3] == ["b", "c", "z000"] and ids[-1] == "a"  # reversed: their best is last
    probabilities = [h.score or 0.0 for h in ranked]
    assert probabilities == sorted(probabilities, reverse=True)
    assert all(0 < p < 1 for p in probabilities)


def test_only_the_first_candidates_are_scored_the_rest_follow_in_order() -> None:
    many = [
        scored(memory(f"m{i:03}", f"word{i} text", i, i + 1), 1 - i / 1000)
        for i in range(learned.RERANK + 20)
    ]
    found = Candidates("text", many, [], many, {})
    ranked = ranker().rerank(found)
    assert len(ranked) == len(many)
    rest = [h.memory.id for h in ranked[learned.RERANK :]]
    assert rest == [h.memory.id for h in many[learned.RERANK :]]
    head = min(h.score or 0.0 for h in ranked[: learned.RERANK])
    assert all((h.score or 0.0) < head for h in ranked[learned.RERANK :])


def test_the_floor_drops_a_weak_candidate_no_query_word_matched() -> None:
    base = candidates()  # b matched no query word (not lexical); its cosine passes 0.15
    filler = [
        scored(memory(f"z{i:03}", "filler", 90 + i, 100 + i), 0.01) for i in range(learned.RERANK)
    ]
    found = Candidates(base.query, base.lexical, base.dense, [*base.ordered, *filler], {})
    weak = learned.LearnedRanker(TREES, 1.0, -5.0, "weak")  # b and c: p = 1 / (1 + e^5.75)
    kept = [h.memory.id for h in page(found, 0.15, 10, weak)]
    assert "b" not in kept and {"a", "c"} <= set(kept)  # c matched a query word
    assert "b" in [h.memory.id for h in page(found, 0.15, 10, None)]


def test_a_search_with_fewer_candidates_than_it_scores_keeps_the_fusion_order() -> None:
    found = candidates()  # three candidates: a small vault, unlike what it was trained on
    weak = learned.LearnedRanker(TREES, -1.0, -5.0, "weak")
    assert weak.rerank(found) == list(found.ordered)
    assert [h.memory.id for h in page(found, 0.15, 10, weak)] == ["a", "b", "c"]


def by_fused(*steps: tuple[float, float]) -> learned.LearnedRanker:
    """Trees whose sum is the value of the first (threshold, value) step the fused score is
    at most (the last value above them all): a ranker that keeps fusion's order."""
    fused = FEATURES.index("fused")
    node: dict[str, Any] = {"leaf_value": steps[-1][1]}
    for threshold, value in reversed(steps[:-1]):
        node = {
            "split_feature": fused,
            "threshold": threshold,
            "left_child": {"leaf_value": value},
            "right_child": node,
        }
    dump = {"tree_info": [{"tree_structure": node}]}
    return learned.LearnedRanker(learned.trees_from_lightgbm(dump), 1.0, 0.0, "fused steps")


def test_a_page_of_probabilities_spreads_with_the_learned_decay() -> None:
    one = [
        scored(memory(f"a{i}", f"lake walk {i}", 0, i + 1, session_id="a"), 0.9 - i / 100)
        for i in range(3)
    ]
    other = [scored(memory("b", "lake swim", 5, 10, session_id="b"), 0.85)]
    filler = [
        scored(memory(f"z{i:03}", "filler", 90 + i, 100 + i, session_id=f"z{i}"), 0.01)
        for i in range(learned.RERANK)
    ]
    ordered = [*one, *other, *filler]
    found = Candidates("lake", ordered[:4], ordered, ordered, {})
    # p: a0 0.5, a1 0.38, a2 0.28, b 0.21, filler 0.0067; 0.38 x 0.85 = 0.32 would keep a1
    # above b, 0.38 x 0.2 = 0.08 (the learned decay) does not
    ranker = by_fused((0.5, -5.0), (0.86, -1.325), (0.885, -0.944), (0.895, -0.49), (1, 0.0))
    assert ranker.reranks(found)
    assert [round(h.score or 0, 2) for h in ranker.rerank(found)[:4]] == [0.5, 0.38, 0.28, 0.21]
    assert [h.memory.id for h in page(found, None, 3, ranker)] == ["a0", "b", "a1"]
    assert [h.memory.id for h in page(found, None, 3, None)] == ["a0", "b", "a1"]  # as fusion


def test_serve_says_at_start_how_search_ranks(tmp_path: Path) -> None:
    where = Listening("http://127.0.0.1:8080", tmp_path, ("x",), ranker=ranking(Settings()))
    shipped = learned.load()
    said = banner(where, None, "1.0")
    assert f"  search ranks  {learned.describe(shipped)}" in said
    assert ("learned (" in said) == (shipped is not None)
    fusion = banner(replace(where, ranker=ranking(Settings(ranker="fusion"))), None, "1.0")
    assert (
        "  search ranks  fusion (BM25 and vectors, weighted; MEMORYROUTER_RANKER=fusion)" in fusion
    )


def test_a_question_no_stored_word_matches_keeps_its_vector_hits() -> None:
    base = padded(candidates(), learned.RERANK)
    found = Candidates(base.query, [], base.dense, base.ordered, {})
    weak = learned.LearnedRanker(TREES, 1.0, -9.0, "weak")  # every p under the floor
    assert [h.memory.id for h in page(found, 0.15, 3, weak)] == ["a", "b"]  # the dense hits
    assert weak.rerank(found) == list(found.ordered)


def test_the_shipped_ranker_loads_and_scores_probabilities() -> None:
    shipped = learned.load()
    assert shipped is not None, "vault/data/ranker.json: train it with bench/train_ranker.py"
    p = shipped.probabilities(matrix(candidates(), 10))
    assert p.shape == (3,) and ((p > 0) & (p < 1)).all()
    assert shipped.forest.raw(matrix(candidates(), 10)).tolist() == pytest.approx(
        shipped.trees.raw(matrix(candidates(), 10)).tolist()
    )
