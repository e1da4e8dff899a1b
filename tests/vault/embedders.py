"""Test embedders that enter through the embedder seam."""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

import numpy as np

from mcp_memoryrouter.vault.search.embeddings import Vectors, normalize

# A tiny "meaning" table: words that mean the same thing share a concept axis.
CONCEPTS = {
    "car": 0,
    "automobile": 0,
    "vehicle": 0,
    "doctor": 1,
    "physician": 1,
    "happy": 2,
    "joyful": 2,
    "glad": 2,
    "berlin": 3,
    "germany": 3,
    "cat": 4,
    "kitten": 4,
}


class ConceptEmbedder:
    """Synonyms land on the same axis; every other word on a hashed axis of its own."""

    model_id = "test-concepts"
    dim = 64
    replaces: tuple[str, ...] = ()
    relevance_floor: float | None = None  # keeps every dense candidate

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls += 1
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                axis = CONCEPTS.get(word, 8 + zlib.crc32(word.encode()) % (self.dim - 9))
                rows[i, axis] += 1.0
            rows[i, self.dim - 1] += 0.01  # never the zero vector
        return normalize(rows)


class OtherSpace(ConceptEmbedder):
    model_id = "test-other"
