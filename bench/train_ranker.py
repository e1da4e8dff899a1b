"""Train the learned ranker, and measure it beside today's fusion on what it was not trained on.

    pip install -e '.[train]'       # LightGBM, for training only (the server scores with numpy)
    python bench/ranker_corpus.py locomo ../shared/bench-data/locomo/locomo10.json /tmp/ranker
    python bench/ranker_corpus.py lifebench /tmp/lifebench_sub /tmp/ranker
    python bench/ranker_corpus.py stories 6 /tmp/ranker
    python bench/ranker_corpus.py stories-plain 6 /tmp/ranker
    python bench/train_ranker.py /tmp/ranker [--write] [--train lifebench:lumingqiang,...]

Each question of the built vaults (``bench/ranker_corpus.py``) is searched in-process with the
server's own code (``HybridSearch.candidates``: BM25 and vectors, fused, smoothed), once, and
kept in ``DIR/<set>/candidates.pkl``. The first ``learned.RERANK`` candidates of each are a
group; a candidate is relevant when it holds an evidence id. LightGBM's lambdarank trains on
the vaults named by ``--train`` (whole vaults: conversations, people; never questions), with
fixed seeds, and a logistic fit of its sum on the training rows calibrates it. Then every
other vault's questions get two pages of 50 from the same candidates, today's
(``hybrid.page`` without a ranker) and the learned one, and their recall is printed side by
side, per question type. ``--write`` writes the model to ``vault/data/ranker.json``.

The default training set (``DEFAULT_TRAIN``): LifeBench's ``lumingqiang`` and ``songyajing``
(train people of its README's split; Apache-2.0), LoCoMo's conversations 0-4 (the issue allows
training on LoCoMo split by conversation), four generated histories of ``bench/stories.py``
(seed 11; the bench measures seed 7) with paraphrased questions and four with questions in
their evidence's words (``stories-plain``), an update's newer statement labelled 2
(``NEWER_LABEL``). Phone items, chat turns and sessions with an assistant's long answers are
not the same evidence: trained on one kind, the trees cost the others.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import table
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.vault.app import embedders_for, open_store
from mcp_memoryrouter.vault.hybrid import HybridSearch, page
from mcp_memoryrouter.vault.memory_keys import MemoryKeys
from mcp_memoryrouter.vault.rules import when
from mcp_memoryrouter.vault.rules.dates import EARLIEST_MS
from mcp_memoryrouter.vault.rules.domain import ScoredMemory, SearchFilter
from mcp_memoryrouter.vault.search import learned
from mcp_memoryrouter.vault.search.features import FEATURES, Candidates, matrix

SEED = 7
LIMIT = 50
DEFAULT_TRAIN = (
    "lifebench:lumingqiang,songyajing;locomo:conv0,conv1,conv2,conv3,conv4;stories:h0,h1,h2,h3;"
    "stories-plain:p0,p1,p2,p3"
)
SETS = "locomo,lifebench,stories,stories-plain"
PARAMS: dict[str, Any] = {
    "objective": "lambdarank",
    "metric": "ndcg",
    "eval_at": [10],
    "learning_rate": 0.05,
    "num_leaves": 15,
    "max_depth": 6,
    "min_data_in_leaf": 40,
    "feature_fraction": 0.8,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "lambdarank_truncation_level": 20,
    "seed": SEED,
    "deterministic": True,
    "num_threads": 1,
    "verbose": -1,
}
ROUNDS = 150


@dataclass
class Asked:
    dataset: str
    vault: str
    id: str
    type: str
    gold: set[str]
    found: Candidates
    floor: float | None
    labels: dict[str, list[str]]  # memory id -> evidence ids it holds


def _ms(stamp: str) -> int:
    return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)


def search_all(root: Path, name: str) -> list[Asked]:
    """Every question of one built set, searched in-process (cached in candidates.pkl)."""
    cache = root / name / "candidates.pkl"
    if cache.exists():
        with cache.open("rb") as f:
            asked: list[Asked] = pickle.load(f)
        return asked
    settings = Settings(data_dir=root / name / "data", embeddings="local")
    store, _ = open_store(settings)
    embedders = embedders_for(settings)
    search = HybridSearch(store, embedders, None)
    keys = MemoryKeys(store, lambda: 0)
    asked = []
    try:
        for vault in json.loads((root / name / "meta.json").read_text()):
            vault_id = vault.get("vault_id") or keys.authenticate(vault["key"]).vault_id
            for q in vault["questions"]:
                at = _ms(q["ask_time"])
                where = (
                    SearchFilter(window=(EARLIEST_MS, at))
                    if name == "lifebench"
                    else SearchFilter()
                )
                named = when.window_in(q["question"], at)
                found, floor = search.candidates(vault_id, q["question"], LIMIT, where, None, named)
                asked.append(
                    Asked(
                        name,
                        vault["name"],
                        q["id"],
                        q["type"],
                        set(q["evidence"]),
                        found,
                        floor,
                        vault["memories"],
                    )
                )
            print(f"{name} {vault['name']}: searched", file=sys.stderr)
    finally:
        search.close()
        store.close()
    with cache.open("wb") as f:
        pickle.dump(asked, f)
    return asked


def valid(asked: list[Asked]) -> list[Asked]:
    """The questions with evidence the vault holds, their evidence cut to it (LoCoMo names
    a few turns that do not exist)."""
    held: dict[str, set[str]] = {}
    out = []
    for q in asked:
        if q.vault not in held:
            held[q.vault] = {label for labels in q.labels.values() for label in labels}
        q.gold &= held[q.vault]
        if q.gold:
            out.append(q)
    return out


# --newer-label: the label of an update's newer statement (see group). At 1 nothing taught the
# trees which of two like statements comes first, and asked in the evidence's words they put
# the older first (bench/stories.py plain newer@5 33 against fusion's 83).
NEWER_LABEL = 2.0


def group(q: Asked, newer_label: float = NEWER_LABEL) -> tuple[np.ndarray, np.ndarray]:
    """A question's feature rows and labels: 1 for evidence, and for a generated history's
    update (its evidence the old and the new statement's sessions, numbered in the order told)
    ``newer_label`` for the newer statement, which the page must show first (1: as the older;
    2 teaches lambdarank to put it above)."""
    rows = matrix(q.found, learned.RERANK)
    head = q.found.ordered[: learned.RERANK]
    newest = max(q.gold) if q.dataset.startswith("stories") and q.type == "update" else None
    labels = np.array(
        [
            newer_label if newest in held else float(bool(q.gold & held))
            for held in (set(q.labels.get(h.memory.id, ())) for h in head)
        ],
        dtype=np.float32,
    )
    return rows, labels


def ranked_labels(q: Asked, ranker: learned.LearnedRanker | None) -> list[str]:
    out: list[str] = []
    for hit in page(q.found, q.floor, LIMIT, ranker):
        for label in q.labels.get(hit.memory.id, ()):
            if label not in out:
                out.append(label)
    return out


def recall(ranked: list[str], gold: set[str], k: int) -> float:
    return len(gold & set(ranked[:k])) / len(gold)


def session_recall(ranked: list[str], gold: set[str], k: int) -> float:
    sessions: list[str] = []
    for label in ranked:
        s = label.split(":")[0]
        if s not in sessions:
            sessions.append(s)
    wanted = {g.split(":")[0] for g in gold}
    return len(wanted & set(sessions[:k])) / len(wanted)


def measures(q: Asked, ranked: list[str]) -> dict[str, float]:
    out = {f"R@{k}": recall(ranked, q.gold, k) for k in (1, 5, 10, 50)}
    if q.dataset == "locomo":
        out["session R@5"] = session_recall(ranked, q.gold, 5)
    if q.dataset.startswith("stories") and q.type == "update":
        out["newer@5"] = newer(ranked[:5], min(q.gold), max(q.gold))
    return out


def newer(top: list[str], older: str, newest: str) -> float:
    """1 when ``newest`` is in ``top`` above ``older`` (as bench/stories.py's newer@k)."""
    return float(newest in top and (older not in top or top.index(newest) < top.index(older)))


def train(groups: list[tuple[np.ndarray, np.ndarray]], rounds: int) -> Any:
    import lightgbm  # the optional ``train`` extra

    rows = np.vstack([g[0] for g in groups])
    labels = np.concatenate([g[1] for g in groups])
    data = lightgbm.Dataset(
        rows, labels, group=[len(g[1]) for g in groups], feature_name=list(FEATURES)
    )
    return lightgbm.train(PARAMS, data, num_boost_round=rounds)


def calibrate(raw: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """a, b of p = 1 / (1 + exp(-(a * raw + b))) by Newton's method on the log loss."""
    a, b = 1.0, 0.0
    x = np.stack([raw, np.ones_like(raw)], axis=1)
    for _ in range(50):
        p = 1 / (1 + np.exp(-(x @ np.array([a, b]))))
        grad = x.T @ (p - labels)
        hess = (x * (p * (1 - p))[:, None]).T @ x + 1e-9 * np.eye(2)
        step = np.linalg.solve(hess, grad)
        a, b = a - step[0], b - step[1]
        if np.abs(step).max() < 1e-9:
            break
    return float(a), float(b)


def fit(
    asked: list[Asked], rounds: int, about: str, newer_label: float = NEWER_LABEL
) -> tuple[learned.LearnedRanker, Any]:
    groups = [group(q, newer_label) for q in asked]
    groups = [g for g in groups if g[1].any()]
    booster = train(groups, rounds)
    trees = learned.trees_from_lightgbm(booster.dump_model())
    rows = np.vstack([g[0] for g in groups])
    labels = np.concatenate([g[1] for g in groups])
    a, b = calibrate(trees.raw(rows), np.minimum(labels, 1.0))
    return learned.LearnedRanker(trees, a, b, about), booster


def compare(held: list[Asked], ranker: learned.LearnedRanker, title: str) -> None:
    by_type: dict[tuple[str, str], list[tuple[dict[str, float], dict[str, float]]]] = defaultdict(
        list
    )
    for q in held:
        today = measures(q, ranked_labels(q, None))
        new = measures(q, ranked_labels(q, ranker))
        by_type[(q.dataset, q.type)].append((today, new))
        by_type[(q.dataset, "all")].append((today, new))
    rows = []
    for (name, kind), pairs in sorted(by_type.items()):
        metrics = [m for m in pairs[0][0] if all(m in p[0] for p in pairs)]
        cells = []
        for m in metrics:
            t = 100 * sum(p[0][m] for p in pairs) / len(pairs)
            n = 100 * sum(p[1][m] for p in pairs) / len(pairs)
            cells.append(f"{t:.1f} → {n:.1f}")
        rows.append([name, kind, str(len(pairs)), *cells] + [""] * (5 - len(cells)))
    print(f"\n{title} (today → learned; stories' updates: the last column is newer@5)")
    print(table(["set", "type", "n", "R@1", "R@5", "R@10", "R@50", "session R@5"], rows))


def calibration_table(held: list[Asked], ranker: learned.LearnedRanker) -> None:
    bins = np.array([0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.4, 0.7, 1.0001])
    counts = np.zeros(len(bins) - 1)
    hits = np.zeros(len(bins) - 1)
    for q in held:
        rows, labels = group(q)
        p = ranker.probabilities(rows)
        idx = np.digitize(p, bins) - 1
        np.add.at(counts, idx, 1)
        np.add.at(hits, idx, np.minimum(labels, 1.0))
    print("\ncalibration on held-out candidates (probability bin: candidates, share evidence)")
    for i in range(len(counts)):
        share = hits[i] / counts[i] if counts[i] else 0
        print(f"  [{bins[i]:.3f}, {bins[i + 1]:.3f}): {int(counts[i])}  {share:.3f}")


def with_sessions(held: list[Asked], ranker: learned.LearnedRanker, decays: str) -> None:
    """LoCoMo's memories carry no session; here each takes its evidence id's (``D3:5`` ->
    ``D3``), as a host that sends sessions would store them, so the page's spread applies."""

    def sessioned(q: Asked) -> Asked:
        def one(h: ScoredMemory) -> ScoredMemory:
            labels = q.labels.get(h.memory.id, ())
            session = labels[0].split(":")[0] if labels else None
            return replace(h, memory=replace(h.memory, session_id=session))

        f = q.found
        found = replace(
            f,
            ordered=[one(h) for h in f.ordered],
            lexical=[one(h) for h in f.lexical],
            dense=[one(h) for h in f.dense],
        )
        return replace(q, found=found)

    asked, shipped = [sessioned(q) for q in held], learned.STORY_DECAY
    print(f"\nLoCoMo held out ({len(asked)} questions), sessions sent: the spread's decay")
    try:
        for decay in [float(d) for d in decays.split(",")]:
            learned.STORY_DECAY = decay
            for name, which in (("fusion", None), ("learned", ranker)):
                got = [measures(q, ranked_labels(q, which)) for q in asked]
                figures = ", ".join(
                    f"{k} {100 * np.mean([g[k] for g in got]):.1f}" for k in ("R@1", "R@5", "R@10")
                )
                print(f"  {decay:<5} {name:8s} {figures}")
    finally:
        learned.STORY_DECAY = shipped


def select(asked: list[Asked], spec: str) -> list[Asked]:
    wanted = set()
    for part in spec.split(";"):
        name, vaults = part.split(":")
        wanted |= {(name, v) for v in vaults.split(",")}
    return [q for q in asked if (q.dataset, q.vault) in wanted]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--sets", default=SETS)
    parser.add_argument(
        "--train", default=DEFAULT_TRAIN, help="set:vault,vault;set:vault... (whole vaults)"
    )
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--floor", type=float, default=learned.FLOOR)
    parser.add_argument("--newer-label", type=float, default=NEWER_LABEL)
    parser.add_argument(
        "--decays", help="also: held-out LoCoMo with sessions sent, per decay of the spread"
    )
    args = parser.parse_args()
    learned.FLOOR = args.floor  # what the pages below are cut with
    asked = [q for name in args.sets.split(",") for q in valid(search_all(args.root, name))]
    chosen = select(asked, args.train)
    started = time.perf_counter()
    ranker, booster = fit(
        chosen, args.rounds, f"LightGBM lambdarank, {args.train}", args.newer_label
    )
    print(
        f"trained on {len(chosen)} questions in {time.perf_counter() - started:.1f} s; "
        f"calibration a={ranker.a:.3f} b={ranker.b:.3f}",
        file=sys.stderr,
    )
    train_keys = {(q.dataset, q.vault) for q in chosen}
    held = [q for q in asked if (q.dataset, q.vault) not in train_keys]
    compare(held, ranker, f"held out: {len({(q.dataset, q.vault) for q in held})} vaults")
    calibration_table(held, ranker)
    if args.decays:
        with_sessions([q for q in held if q.dataset == "locomo"], ranker, args.decays)
    gains = booster.feature_importance(importance_type="gain")
    order = np.argsort(-gains)
    print("\nfeature importance (gain share)")
    for i in order:
        print(f"  {FEATURES[i]:18s} {gains[i] / gains.sum():.3f}")
    if args.write:
        about = f"LightGBM lambdarank, trained on {args.train}"
        path = Path(learned.__file__).parents[1] / "data" / learned.MODEL_FILE
        body = learned.to_json(ranker.trees, ranker.a, ranker.b, about)
        path.write_text(json.dumps(body, separators=(",", ":")) + "\n")
        print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
