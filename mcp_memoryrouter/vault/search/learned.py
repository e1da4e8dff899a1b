"""The learned ranker: gradient-boosted trees over :mod:`.features`, scored with numpy.

``bench/train_ranker.py`` trains the trees (LightGBM, lambdarank) and writes them with a
logistic calibration to ``vault/data/ranker.json``; this module reads that file and needs
no training library. The calibrated score is the probability that a candidate is evidence
for the question: it orders the first :data:`RERANK` candidates of today's fusion, and
candidates under :data:`FLOOR` are marked as noise (``ranking.relevant`` leaves them out
unless a query word matched them). Without the file, search ranks with today's fusion.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mcp_memoryrouter.vault.rules.domain import ScoredMemory
from mcp_memoryrouter.vault.search.features import FEATURES, Candidates, matrix

MODEL_FILE = "ranker.json"
RERANK = 50  # candidates of today's order the trees score; the rest keep their order below
# A scored candidate that matched no query word (only the vectors found it) while others did,
# and is evidence with a probability under this, is noise: left out, as the cosine floor
# leaves out what scores under it. On held-out questions, candidates under 0.005 are evidence
# 1 time in 500 (docs/benchmarks.md, "A learned ranker"). A question no stored word matches
# (a paraphrase) is not re-ranked: the cosine floor alone judges its vector hits.
FLOOR = 0.005
# The page's spread (ranking.spread) decays a hit whose story already has a hit in the head;
# fused scores of a page's first hits are close (0.85 moves them), probabilities are not (the
# best is often several times the fifth). Decaying probabilities by 0.85 left bench/stories.py's
# heads on fewer conversations than fusion's (distinct@5 4.6 -> 4.2) and lost time questions
# whose four like events then fell under the fifth place. 0.2 keeps every figure of
# bench/stories.py (20 histories of seed 7, never trained on) at or above fusion's: 0.35 and
# 0.25 left the spans questions' heads on fewer conversations (distinct@5 4.3 and 4.4 against
# 4.5, 4 histories), 0.3 the dated questions' too. It costs held-out LoCoMo with sessions sent
# 1.7 points of turn R@5 against 0.35 (63.7 -> 62.0; fusion 58.2) and 0.5 of R@10 (74.6 ->
# 74.1; fusion 70.1) (docs/benchmarks.md, "A learned ranker").
STORY_DECAY = 0.2
# Past the head the page follows the probabilities, except that weak hits, under this one
# (held-out candidates of 0.005-0.02 are evidence 1.5 % of the time), yield to another story's
# weak hits: a conversation the question dwelt on otherwise filled a page's last places with
# its small talk at 0.007-0.012 and left another conversation's evidence eleventh. Measured
# on generated histories of seed 11: all@10 71 -> 76 (plain wording 98 -> 100), LoCoMo with
# sessions sent turn R@10 82.0 -> 81.9 (0.05: 81.2).
WEAK = 0.02


@dataclass(frozen=True)
class Trees:
    """Every tree's nodes in flat arrays. A node is a split (``feature`` >= 0: go ``left``
    when the row's value is at most ``threshold``, else ``right``) or a leaf (``feature``
    -1, its ``value``). ``roots`` index each tree's first node."""

    feature: npt.NDArray[np.int32]
    threshold: npt.NDArray[np.float64]
    left: npt.NDArray[np.int32]
    right: npt.NDArray[np.int32]
    value: npt.NDArray[np.float64]
    roots: npt.NDArray[np.int32]
    depth: int

    def raw(self, rows: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
        """The sum of every tree's leaf for each row (node by node: the reference form)."""
        if not len(rows) or not len(self.roots):
            return np.zeros(len(rows))
        node = np.broadcast_to(self.roots, (len(rows), len(self.roots))).copy()
        picks = np.arange(len(rows))[:, None]
        for _ in range(self.depth):
            feature = self.feature[node]
            value = rows[picks, np.maximum(feature, 0)]
            nxt = np.where(value <= self.threshold[node], self.left[node], self.right[node])
            node = np.where(feature >= 0, nxt, node)
        total: npt.NDArray[np.float64] = self.value[node].sum(axis=1)
        return total


@dataclass(frozen=True)
class Forest:
    """The trees as perfect binary trees of one depth, level by level: internal node ``k`` of
    a tree (0 the root) has children ``2k + 1`` and ``2k + 2``; a leaf above the last level
    is pushed down by splits every row passes to the left. Each level is then three array
    look-ups for every row and tree at once (what a search pays: :meth:`raw`)."""

    feature: npt.NDArray[np.intp]  # (trees, 2**depth - 1)
    threshold: npt.NDArray[np.float64]  # (trees, 2**depth - 1)
    leaf: npt.NDArray[np.float64]  # (trees, 2**depth)
    depth: int

    @classmethod
    def of(cls, trees: Trees) -> Forest:
        count, inner = len(trees.roots), 2**trees.depth - 1
        feature = np.zeros((count, inner), dtype=np.intp)
        threshold = np.full((count, inner), np.inf)
        leaf = np.zeros((count, inner + 1))
        for t, root in enumerate(trees.roots):
            stack = [(int(root), 0)]
            while stack:
                node, slot = stack.pop()
                if slot >= inner:
                    leaf[t, slot - inner] = trees.value[node]
                elif trees.feature[node] < 0:  # a leaf early: every row goes left
                    stack.append((node, 2 * slot + 1))
                else:
                    feature[t, slot] = trees.feature[node]
                    threshold[t, slot] = trees.threshold[node]
                    stack.append((int(trees.left[node]), 2 * slot + 1))
                    stack.append((int(trees.right[node]), 2 * slot + 2))
        return cls(feature, threshold, leaf, trees.depth)

    def raw(self, rows: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
        """The sum of every tree's leaf for each row."""
        count = len(self.leaf)
        if not len(rows) or not count:
            return np.zeros(len(rows))
        inner = self.feature.shape[1]
        values = np.asarray(rows, dtype=np.float64).ravel()
        base = np.arange(count)[None, :] * inner  # each tree's first node in the flat arrays
        offset = np.arange(len(rows))[:, None] * rows.shape[1]  # each row's first value
        feature, threshold = self.feature.ravel(), self.threshold.ravel()
        node = np.broadcast_to(base, (len(rows), count))
        for _ in range(self.depth):
            right = values.take(offset + feature.take(node)) > threshold.take(node)
            node = 2 * node - base + 1 + right
        leaf = (node - base - inner) + np.arange(count)[None, :] * (inner + 1)
        total: npt.NDArray[np.float64] = self.leaf.ravel().take(leaf).sum(axis=1)
        return total


def _flatten(tree: dict[str, Any], nodes: list[tuple[int, float, int, int, float]]) -> int:
    """Append ``tree`` (LightGBM's ``dump_model`` form) to ``nodes``; its index, and depth."""
    index = len(nodes)
    if "leaf_value" in tree:
        nodes.append((-1, 0.0, -1, -1, float(tree["leaf_value"])))
        return index
    nodes.append((int(tree["split_feature"]), float(tree["threshold"]), -1, -1, 0.0))
    left = _flatten(tree["left_child"], nodes)
    right = _flatten(tree["right_child"], nodes)
    feature, threshold, _, _, _ = nodes[index]
    nodes[index] = (feature, threshold, left, right, 0.0)
    return index


def _depth(tree: dict[str, Any]) -> int:
    if "leaf_value" in tree:
        return 0
    return 1 + max(_depth(tree["left_child"]), _depth(tree["right_child"]))


def trees_from_lightgbm(dump: dict[str, Any]) -> Trees:
    """Flat arrays of a LightGBM ``Booster.dump_model()`` (numerical ``<=`` splits only)."""
    nodes: list[tuple[int, float, int, int, float]] = []
    roots = [_flatten(t["tree_structure"], nodes) for t in dump["tree_info"]]
    depth = max((_depth(t["tree_structure"]) for t in dump["tree_info"]), default=0)
    return Trees(
        np.array([n[0] for n in nodes], dtype=np.int32),
        np.array([n[1] for n in nodes], dtype=np.float64),
        np.array([n[2] for n in nodes], dtype=np.int32),
        np.array([n[3] for n in nodes], dtype=np.int32),
        np.array([n[4] for n in nodes], dtype=np.float64),
        np.array(roots, dtype=np.int32),
        depth,
    )


@dataclass(frozen=True)
class LearnedRanker:
    """Trees, and the logistic calibration of their sum: p = 1 / (1 + exp(-(a * raw + b)))."""

    trees: Trees
    a: float
    b: float
    about: str  # what it was trained on, for the start line
    forest: Forest = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "forest", Forest.of(self.trees))

    def probabilities(self, rows: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
        z = self.a * self.forest.raw(rows) + self.b
        p: npt.NDArray[np.float64] = 1.0 / (1.0 + np.exp(-z))
        return p

    def reranks(self, found: Candidates) -> bool:
        """Whether ``found`` is a search like those it was trained on: at least
        :data:`RERANK` candidates (not a small vault) and both lists found something (a
        word of the question is stored, and the server has vectors)."""
        return len(found.ordered) >= RERANK and bool(found.lexical) and bool(found.dense)

    def rerank(self, found: Candidates) -> list[ScoredMemory]:
        """``found.ordered`` as it is for a search unlike those it was trained on (not
        :meth:`reranks`). Else its first :data:`RERANK` ordered by the probability of being
        evidence (their new score), those under :data:`FLOOR` that matched no query word
        left out; the rest follow in their order, scored under the last of them."""
        if not self.reranks(found):
            return list(found.ordered)
        head = list(found.ordered[:RERANK])
        p = self.probabilities(matrix(found, RERANK))
        matched = {h.memory.id for h in found.lexical}
        order = sorted(range(len(head)), key=lambda i: (-p[i], head[i].memory.id))
        ranked = [
            ScoredMemory(head[i].memory, float(p[i]))
            for i in order
            if p[i] >= FLOOR or head[i].memory.id in matched
        ]
        rest = found.ordered[RERANK:]
        return ranked + _below(rest, float(p.min()))


def _below(rest: Sequence[ScoredMemory], ceiling: float) -> list[ScoredMemory]:
    """``rest`` in its order, scores scaled under ``ceiling``."""
    top = max((h.score or 0.0 for h in rest), default=0.0) or 1.0
    return [ScoredMemory(h.memory, ceiling * 0.99 * (h.score or 0.0) / top) for h in rest]


def to_json(trees: Trees, a: float, b: float, about: str) -> dict[str, Any]:
    """The model file's content: the feature names it was trained with, the flat trees,
    the calibration."""
    return {
        "features": list(FEATURES),
        "about": about,
        "a": a,
        "b": b,
        "depth": trees.depth,
        "roots": trees.roots.tolist(),
        "feature": trees.feature.tolist(),
        "threshold": trees.threshold.tolist(),
        "left": trees.left.tolist(),
        "right": trees.right.tolist(),
        "value": trees.value.tolist(),
    }


def from_json(body: dict[str, Any]) -> LearnedRanker:
    if list(body["features"]) != list(FEATURES):
        raise ValueError("the ranker file was trained on other features: train it again")
    a, b = float(body["a"]), float(body["b"])
    if not (math.isfinite(a) and math.isfinite(b)):
        raise ValueError("the ranker file's calibration is not finite")
    trees = Trees(
        np.array(body["feature"], dtype=np.int32),
        np.array(body["threshold"], dtype=np.float64),
        np.array(body["left"], dtype=np.int32),
        np.array(body["right"], dtype=np.int32),
        np.array(body["value"], dtype=np.float64),
        np.array(body["roots"], dtype=np.int32),
        int(body["depth"]),
    )
    return LearnedRanker(trees, a, b, str(body["about"]))


def load(path: Path | None = None) -> LearnedRanker | None:
    """The ranker in ``path`` (default: the one shipped in the package), or None when there
    is no such file (search then ranks with today's fusion)."""
    if path is None:
        shipped = resources.files("mcp_memoryrouter.vault").joinpath("data", MODEL_FILE)
        if not shipped.is_file():
            return None
        return from_json(json.loads(shipped.read_text(encoding="utf-8")))
    if not path.is_file():
        return None
    return from_json(json.loads(path.read_text(encoding="utf-8")))


def describe(ranker: LearnedRanker | None) -> str:
    """The start line's words for the ranker search uses."""
    if ranker is None:
        return "fusion (BM25 and vectors, weighted; no learned ranker file)"
    return f"learned ({ranker.about}; first {RERANK} candidates of the fusion)"
