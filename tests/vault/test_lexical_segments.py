"""The BM25 index's compact segments and its pruning, in-process: through adds, merges,
deletes (both ways of counting the dead among a token's postings), compaction, filters and
several vaults, every answer is the plain BM25 of the vault's live rows to the last bit; and
a common word's cost stops growing with how many rows hold it once rarer words are asked."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from mcp_memoryrouter.vault.rules.domain import SearchFilter
from mcp_memoryrouter.vault.search import lexical
from mcp_memoryrouter.vault.search.lexical import FTS5_BM25, Bm25, LexicalDoc, LexicalIndex
from mcp_memoryrouter.vault.search.postings import Segment, Tail, Vocabulary
from mcp_memoryrouter.vault.search.rowtable import IndexRow

WORDS = ["the", "i", "you", "and", "kiwi", "pear", "plum", "zebra", "café", "fig", "2024"]
WEIGHTS = [40, 25, 20, 15, 6, 5, 4, 1, 2, 3, 2]
FILTERS = [
    SearchFilter(),
    SearchFilter(tiers=(1,)),
    SearchFilter(min_importance=5),
    SearchFilter(session_id="s1"),
    SearchFilter(window=(3, 8)),
]


class Reference:
    """The rows as plain Python, scored by the textbook loop in FTS5's order of operations."""

    def __init__(self, params: Bm25) -> None:
        self.params = params
        self.docs: dict[int, LexicalDoc] = {}

    def search(
        self, vault: str, tokens: list[str], k: int, where: SearchFilter
    ) -> list[tuple[int, float]]:
        mine = [d for d in self.docs.values() if d.row.vault == vault]
        if not mine:
            return []
        average = sum(d.length for d in mine) / len(mine)
        k1, b = self.params.k1, self.params.b
        scores: dict[int, float] = {}
        for token in tokens:
            hits = [d for d in mine if token in d.counts]
            if not hits:
                continue
            idf = math.log((len(mine) - len(hits) + 0.5) / (len(hits) + 0.5))
            idf = 1e-6 if idf <= 0.0 else idf
            for d in hits:
                freq = float(d.counts[token])
                denominator = freq + k1 * (1 - b + b * float(d.length) / average)
                gain = idf * ((freq * (k1 + 1.0)) / denominator)
                scores[d.row.seq] = scores.get(d.row.seq, 0.0) + gain
        kept = [(seq, s) for seq, s in scores.items() if _passes(self.docs[seq].row, where)]
        return sorted(kept, key=lambda h: (-h[1], h[0]))[:k]

    def doc_freq(self, vault: str, token: str) -> int:
        return sum(1 for d in self.docs.values() if d.row.vault == vault and token in d.counts)


def _passes(row: IndexRow, where: SearchFilter) -> bool:
    window = where.window
    return (
        (where.tiers is None or row.tier in where.tiers)
        and (where.min_importance is None or (row.importance or 0) >= where.min_importance)
        and (where.session_id is None or row.tier > 1 or row.session == where.session_id)
        and (window is None or (row.date_from <= window[1] and row.date_to >= window[0]))
    )


def _doc(rng: random.Random, seq: int, vault: str) -> LexicalDoc:
    words = rng.choices(WORDS, WEIGHTS, k=rng.randint(1, 12))
    day = rng.randint(0, 10)
    row = IndexRow(
        seq, vault, rng.choice([1, 2, 3]), rng.choice([None, 3, 7]), day, day + 1,
        rng.choice(["s1", "s2", None]),
    )  # fmt: skip
    return LexicalDoc(row, Counter(words))


def assert_same_as_reference(
    index: LexicalIndex, reference: Reference, rng: random.Random, vaults: list[str]
) -> None:
    for _ in range(30):
        vault = rng.choice(vaults)
        tokens = rng.sample(WORDS, rng.randint(1, 5))
        tokens += rng.choice([[], [tokens[0]]])  # a token asked twice counts twice
        k, where = rng.choice([1, 3, 10, 150]), rng.choice(FILTERS)
        assert index.search(vault, tokens, k, where) == reference.search(vault, tokens, k, where)
        freqs, total = index.doc_freqs(vault, tokens)
        expected = {t: reference.doc_freq(vault, t) for t in tokens}
        assert {t: f for t, f in freqs.items() if f} == {t: f for t, f in expected.items() if f}
        assert total == sum(1 for d in reference.docs.values() if d.row.vault == vault)


@pytest.mark.parametrize("params", [FTS5_BM25, lexical.BM25])
def test_segments_answer_exactly_through_merges_deletes_and_compaction(
    monkeypatch: pytest.MonkeyPatch, params: Bm25
) -> None:
    monkeypatch.setattr(lexical, "_MERGE_FROM", 200)  # the tail merges every ~40 rows
    monkeypatch.setattr(lexical, "_COMPACT_FROM", 150)
    rng, seq = random.Random(5), 0
    reference = Reference(params)

    def docs(vault: str, count: int) -> list[LexicalDoc]:
        nonlocal seq
        out = []
        for _ in range(count):
            seq += 1
            out.append(_doc(rng, seq, vault))
        reference.docs.update((d.row.seq, d) for d in out)
        return out

    loaded = docs("a", 300) + docs("b", 200)
    rows = [d.row for d in loaded]
    occurrences = [[(t, d.row.seq) for d in loaded for t, n in d.counts.items() for _ in range(n)]]
    index = LexicalIndex.bulk(rows, occurrences, params)
    assert_same_as_reference(index, reference, rng, ["a", "b", "c"])

    for _ in range(6):  # tails, merged into new segments along the way
        index.add(docs(rng.choice(["a", "b", "c"]), 30))
    assert_same_as_reference(index, reference, rng, ["a", "b", "c"])

    for count in (3, 60):  # few dead rows: binary searches; many: a pass
        gone = rng.sample(sorted(reference.docs), count)
        index.remove(gone)
        for s in gone:
            del reference.docs[s]
        assert_same_as_reference(index, reference, rng, ["a", "b", "c"])

    again = [_doc(rng, s, "a") for s in rng.sample(sorted(reference.docs), 5)]
    index.add(again)  # a seq indexed again holds its new text only
    reference.docs.update((d.row.seq, d) for d in again)
    assert_same_as_reference(index, reference, rng, ["a", "b", "c"])
    index.remove_vault("a")  # more dead rows than live ones: compacts
    reference.docs = {s: d for s, d in reference.docs.items() if d.row.vault != "a"}
    assert index._rows.size == len(index) == len(reference.docs)
    assert_same_as_reference(index, reference, rng, ["a", "b", "c"])
    index.add(docs("a", 40))
    assert_same_as_reference(index, reference, rng, ["a", "b", "c"])


def test_a_common_word_costs_a_probe_per_candidate_not_a_pass_over_its_postings() -> None:
    """The word "the" in 40% of the rows, "zebra" in 30: the postings read for "zebra the" do not
    grow when ten times as many rows hold "the", and the answer stays the plain BM25."""
    rng, reference = random.Random(9), Reference(lexical.BM25)
    index, seq = LexicalIndex(), 0

    def add(count: int, zebras: int) -> None:
        nonlocal seq
        docs = []
        for i in range(count):
            seq += 1
            words = ["kiwi"] * rng.randint(1, 4) + (["the"] if rng.random() < 0.4 else [])
            words += ["zebra"] if i < zebras else []
            docs.append(LexicalDoc(IndexRow(seq, "a", 1, None, 0, 0, None), Counter(words)))
        index.add(docs)
        reference.docs.update((d.row.seq, d) for d in docs)

    def cost(tokens: list[str]) -> int:
        before = index.scored
        found = index.search("a", tokens, 10, SearchFilter())
        assert found == reference.search("a", tokens, 10, SearchFilter())
        return index.scored - before

    add(2_000, 30)
    small = cost(["zebra", "the"])
    assert small <= 2 * 30  # zebra's postings, then a probe of "the" per candidate
    add(20_000, 0)
    assert index.doc_freqs("a", ["the"])[0]["the"] > 8_000
    assert cost(["the", "zebra"]) <= small
    assert cost(["the", "kiwi"]) > 8_000  # without a rarer word, the common one is read


def test_a_candidate_the_next_word_cannot_lift_is_not_looked_up_in_the_commoner_ones() -> None:
    """200 rows hold "zebra" (the candidates), 4,000 "kiwi", 8,000 "the". Once "kiwi" is looked
    up for each candidate, a candidate without it cannot reach the best 10 by "the" alone, so
    "the" is looked up for fewer candidates than "kiwi" was; the answer stays the plain BM25."""
    rng, reference = random.Random(8), Reference(lexical.BM25)
    docs = []
    for seq in range(1, 20_001):
        words = ["fig"] + (["zebra"] if seq % 100 == 0 else [])
        words += (["kiwi"] if rng.random() < 0.2 else []) + (["the"] if rng.random() < 0.4 else [])
        docs.append(LexicalDoc(IndexRow(seq, "a", 1, None, 0, 0, None), Counter(words)))
    reference.docs = {d.row.seq: d for d in docs}
    index = LexicalIndex()
    index.add(docs)
    found = index.search("a", ["zebra", "kiwi", "the"], 10, SearchFilter())
    assert found == reference.search("a", ["zebra", "kiwi", "the"], 10, SearchFilter())
    assert 200 + 200 < index.scored < 200 + 200 + 200  # zebra's, kiwi's per candidate, fewer


def test_past_the_budget_common_words_only_score_the_rows_rarer_words_found() -> None:
    """Rows found by "zebra" (30 of them) are scored with every word asked, exactly; "kiwi"
    and "the" (held by most rows) would pass a budget of 1,000 postings, so no row holding only
    them is a candidate, and what is read stays within the budget and a probe per candidate.
    With the default budget the same question is the plain BM25, rows without "zebra" too."""
    rng, reference = random.Random(4), Reference(lexical.BM25)
    docs = []
    for seq in range(1, 3_001):
        words = ["kiwi"] * rng.randint(0, 2) + (["the"] if rng.random() < 0.4 else [])
        words += ["zebra"] if seq % 100 == 0 else []
        docs.append(LexicalDoc(IndexRow(seq, "a", 1, None, 0, 0, None), Counter(words or ["fig"])))
    reference.docs = {d.row.seq: d for d in docs}
    exact = reference.search("a", ["the", "kiwi", "zebra"], 150, SearchFilter())
    assert sum(1 for seq, _ in exact if seq % 100) == 120  # the plain BM25 fills up with them

    bounded, unbounded = LexicalIndex(budget=1_000), LexicalIndex()
    for index in (bounded, unbounded):
        index.add(docs)
    found = bounded.search("a", ["the", "kiwi", "zebra"], 150, SearchFilter())
    assert [seq for seq, _ in found] == [seq for seq, _ in exact if seq % 100 == 0]
    assert found == [hit for hit in exact if hit[0] % 100 == 0]  # the same scores, to the bit
    assert bounded.scored <= 1_000 + 2 * 30
    assert unbounded.search("a", ["the", "kiwi", "zebra"], 150, SearchFilter()) == exact


def test_a_vocabulary_finds_every_token_and_only_those() -> None:
    tokens = sorted({"the", "a", "zoë", "café", "2024", "x" * 40, "é"})
    vocabulary = Vocabulary.of(tokens)
    assert [vocabulary.find(t) for t in tokens] == list(range(len(tokens)))
    assert [vocabulary.find(t) for t in ["", "th", "thee", "zz", "cafe"]] == [None] * 5
    assert vocabulary.tokens() == tokens
    assert Vocabulary.of([]).find("the") is None


def test_a_merged_segment_holds_the_tail_after_its_own_postings() -> None:
    tail = Tail()
    tail.add(5, [("kiwi", 2), ("zebra", 1)])
    tail.add(7, [("kiwi", 1)])
    segment = Segment.empty().merged(tail)
    again = Tail()
    again.add(9, [("apple", 70_000), ("kiwi", 3)])
    merged = segment.merged(again)
    assert merged.vocabulary.tokens() == ["apple", "kiwi", "zebra"]
    found = merged.postings("kiwi")
    assert found is not None
    (positions, counts), peak = found
    assert (positions.tolist(), counts.tolist(), peak) == ([5, 7, 9], [2, 1, 3], 3)
    assert merged.postings("apple") is not None and merged.counts.dtype.itemsize == 4
    assert segment.counts.dtype.itemsize == 2  # counts as narrow as they fit
