"""The embedding worker: vectors are computed off the request path, in batches, from the
persisted queue. A crash loses nothing: queued rows stay queued until their vectors are
stored, and rows not yet embedded are still found lexically.

A small write (at most ``EMBED_BEFORE_ACK`` units) is embedded before the ingest answers, so
the next search finds it by meaning: the rows and their queue entries commit first, the model
runs outside the writer lock, then the vectors are stored and the entries cleared. A crash
in between leaves the rows queued for the worker, as for any other write."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from mcp_memoryrouter.vault.search.embeddings import Embedders
from mcp_memoryrouter.vault.store import Store

log = logging.getLogger("mcp_memoryrouter.vault.indexer")
BATCH = 32
EMBED_BEFORE_ACK = 16  # units a write may hold and still be embedded before it is answered
IDLE_SECONDS = 5.0
BACKOFF_SECONDS = 10.0


class EmbeddingWorker:
    def __init__(self, store: Store, embedders: Embedders, *, batch: int = BATCH) -> None:
        self._store = store
        self._embedders = embedders
        self._batch = batch
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="embedder", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def wake(self) -> None:
        self._wake.set()

    def step(self) -> int:
        """Embed one batch per queued model; the number of rows embedded."""
        done = 0
        for model in self._store.queued_models():
            embedder = self._embedders.by_model_id(model)
            if embedder is None:
                continue  # a model this server no longer offers: its rows stay queued
            pending = self._store.take_embed_batch(model, self._batch)
            if pending:
                vectors = embedder.embed([p.text for p in pending])
                self._store.put_vectors(model, pending, vectors)
                done += len(pending)
        return done

    def embed_now(self, model: str, ids: Sequence[str]) -> None:
        """Embed the queued rows among ``ids`` now; a failure leaves them to the worker."""
        embedder = self._embedders.by_model_id(model)
        if embedder is None:
            return
        try:
            pending = self._store.take_embed_rows(model, ids)
            if pending:
                vectors = embedder.embed([p.text for p in pending])
                self._store.put_vectors(model, pending, vectors)
        except Exception as exc:  # the write stands; the worker embeds it later
            log.error("embedding a write before answering failed: %s", type(exc).__name__)

    def drain(self) -> int:
        """Embed until the queue is empty (tests, benchmarks, the CLI)."""
        total = 0
        while done := self.step():
            total += done
        return total

    def replace_models(self) -> None:
        """Queue the vectors of models the offered ones replace for re-embedding (a new form
        of the local model): once per start, idempotent."""
        for name in self._embedders.names:
            embedder = self._embedders.get(name)
            if embedder is None:
                continue
            for old in embedder.replaces:
                if queued := self._store.replace_model(old, embedder.model_id):
                    log.info("re-embedding %d memories of %s for %s", queued, old, name)

    def _run(self) -> None:
        try:  # off the request path: the first search should not wait for a load
            self.replace_models()
            default = self._embedders.get(self._embedders.resolve(None))
            self._store.warm([] if default is None else [(default.model_id, default.dim)])
        except Exception as exc:
            log.error("warming the search indexes failed: %s", type(exc).__name__)
        while not self._stop.is_set():
            try:
                done = self.step()
            except Exception as exc:  # the worker must outlive any one failure
                log.error("embedding batch failed: %s", type(exc).__name__)
                self._stop.wait(BACKOFF_SECONDS)
                continue
            if not done:
                self._wake.wait(IDLE_SECONDS)
                self._wake.clear()
