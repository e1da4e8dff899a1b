"""The embedding worker: vectors are computed off the request path, in batches, from the
persisted queue. A crash loses nothing: queued rows stay queued until their vectors are
stored, and rows not yet embedded are still found lexically.

No write waits for its vectors. The worker notes the rows of each small write (at most
``limits.READ_YOUR_WRITES_UNITS`` units, the newest of each vault kept) and the vault's next
search embeds those still queued before its vector side (:meth:`EmbeddingWorker.catch_up`),
so a fact just stored is found by meaning by the next search; the worker embeds the rest in
batches across writes, gathering for a moment after it is woken (longer while a small write
waits for its search). It also writes the usage
events the store keeps in memory (``Store.flush_usage``), at least every
``limits.USAGE_FLUSH_SECONDS``, and once more when it stops."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from mcp_memoryrouter import limits
from mcp_memoryrouter.vault.search.embeddings import Embedders
from mcp_memoryrouter.vault.store import Store

log = logging.getLogger("mcp_memoryrouter.vault.indexer")
BATCH = 256  # rows a step takes: the local model runs each alone, so only steps cost
GATHER_SECONDS = 0.05  # after a wake, for the writes just behind it (one batch, one call)
# ...or this long while a small write waits for its vault's next search to embed it (so
# the two do not embed the same rows at once); unsearched, it is the worker's after that
FRESH_SECONDS = 0.5
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
        # the newest small writes' rows per vault, (model, id), until a search embeds them
        self._fresh: dict[str, list[tuple[str, str]]] = {}
        self._fresh_lock = threading.Lock()
        self._fresh_at = -FRESH_SECONDS  # when the last small write was noted (monotonic)
        self._flushed = time.monotonic()
        self._models: list[str] = []  # the queue's models, as last read (``step``)
        self._models_at = -IDLE_SECONDS

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="embedder", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._flush_usage()

    def wake(self) -> None:
        self._wake.set()

    def step(self) -> int:
        """Embed one batch per queued model; the number of rows embedded. The queue's models
        are read again when the ones known have nothing left, or every ``IDLE_SECONDS`` (a
        scan of the whole queue, which a backlog makes long)."""
        known = time.monotonic() - self._models_at < IDLE_SECONDS
        done = self._step(self._models if known else self._queued_models())
        if not done and known:
            done = self._step(self._queued_models())
        return done

    def _queued_models(self) -> list[str]:
        self._models = self._store.queued_models()
        self._models_at = time.monotonic()
        return self._models

    def _step(self, models: Sequence[str]) -> int:
        done = 0
        for model in models:
            embedder = self._embedders.by_model_id(model)
            if embedder is None:
                continue  # a model this server no longer offers: its rows stay queued
            pending = self._store.take_embed_batch(model, self._batch)
            if pending:
                vectors = embedder.embed([p.text for p in pending])
                self._store.put_vectors(model, pending, vectors)
                done += len(pending)
        return done

    def written(self, vault_id: str, model: str, ids: Sequence[str]) -> None:
        """A write of ``vault_id`` queued ``ids`` for ``model``: a write of at most
        ``limits.READ_YOUR_WRITES_UNITS`` units is noted for the vault's next search (the
        newest that many of the vault are kept); the worker is woken either way."""
        if ids and len(ids) <= limits.READ_YOUR_WRITES_UNITS:
            with self._fresh_lock:
                fresh = self._fresh.setdefault(vault_id, [])
                fresh.extend((model, i) for i in ids)
                del fresh[: -limits.READ_YOUR_WRITES_UNITS]
                self._fresh_at = time.monotonic()
        self.wake()

    def catch_up(self, vault_id: str) -> int:
        """Before a search of ``vault_id``: embed the rows of its latest small writes that
        are still queued (at most ``limits.READ_YOUR_WRITES_UNITS``), so the search finds
        them by meaning. The number embedded; a failure leaves them to the worker."""
        if vault_id not in self._fresh:  # read without the lock: most searches stop here
            return 0
        with self._fresh_lock:
            fresh = self._fresh.pop(vault_id, [])
        done = 0
        for model in dict.fromkeys(m for m, _ in fresh):
            done += self.embed_now(model, [i for m, i in fresh if m == model])
        return done

    def embed_now(self, model: str, ids: Sequence[str]) -> int:
        """Embed the queued rows among ``ids`` now: how many; a failure leaves them to the
        worker."""
        embedder = self._embedders.by_model_id(model)
        if embedder is None:
            return 0
        try:
            pending = self._store.take_embed_rows(model, ids)
            if pending:
                vectors = embedder.embed([p.text for p in pending])
                self._store.put_vectors(model, pending, vectors)
            return len(pending)
        except Exception as exc:  # the write stands; the worker embeds it later
            log.error("embedding a fresh write failed: %s", type(exc).__name__)
            return 0

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
            self._flush_usage(due=True)
            try:
                done = self.step()
            except Exception as exc:  # the worker must outlive any one failure
                log.error("embedding batch failed: %s", type(exc).__name__)
                self._stop.wait(BACKOFF_SECONDS)
                continue
            if not done:
                waiting = self._store.usage_waiting()
                self._wake.wait(limits.USAGE_FLUSH_SECONDS if waiting else IDLE_SECONDS)
                self._wake.clear()
                fresh = time.monotonic() - self._fresh_at < FRESH_SECONDS
                self._stop.wait(FRESH_SECONDS if fresh else GATHER_SECONDS)

    def _flush_usage(self, *, due: bool = False) -> None:
        """Write the metered usage waiting in memory (``due``: only when the last flush is
        ``limits.USAGE_FLUSH_SECONDS`` old); a failure leaves it waiting."""
        now = time.monotonic()
        if due and now - self._flushed < limits.USAGE_FLUSH_SECONDS:
            return
        self._flushed = now
        try:
            self._store.flush_usage()
        except Exception as exc:
            log.error("writing metered usage failed: %s", type(exc).__name__)
