"""The row table's seq -> position map (numpy arrays and a dict of the newest entries): it
answers as a dict does through random sets, overwrites, removals and folds, and holds a row
in 12 bytes once folded."""

from __future__ import annotations

import random

import numpy as np
import pytest

from mcp_memoryrouter.vault.search import seqs
from mcp_memoryrouter.vault.search.seqs import SeqPositions


def assert_same_as_dict(made: SeqPositions, plain: dict[int, int]) -> None:
    assert len(made) == len(plain)
    assert sorted(made) == sorted(plain)
    assert {seq: made[seq] for seq in plain} == plain


def test_it_answers_as_a_dict_through_sets_removals_and_folds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(seqs, "_FOLD_FROM", 8)  # folds every few entries
    rng, made, plain = random.Random(3), SeqPositions(), dict[int, int]()
    position = 0
    for step in range(3_000):
        seq = rng.choice([step + 1_000, rng.randrange(1, step + 1_001)])  # mostly ascending
        if rng.random() < 0.3 and plain:
            gone = rng.choice(list(plain))
            assert made.pop(gone) == plain.pop(gone)
        else:
            made[seq] = plain[seq] = position
            position += 1
        missing = rng.randrange(-5, 10_000)
        assert made.get(missing) == plain.get(missing)
    assert_same_as_dict(made, plain)
    with pytest.raises(KeyError):
        del made[-1]


def test_a_map_made_from_arrays_holds_a_row_in_12_bytes() -> None:
    seq = np.arange(100_000, dtype=np.int64)[::-1] * 3
    made = SeqPositions.of(seq, np.arange(seq.size))
    assert made[3 * 99_999] == 0 and made[0] == 99_999 and 1 not in made
    assert made.nbytes == 12 * seq.size
    del made[3]
    made[3] = 7  # removed from the arrays, back among the newest
    assert (len(made), made[3]) == (100_000, 7)
