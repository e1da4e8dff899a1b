"""The memory side of a proxied call, read from its headers and told back in headers.

Requests carry the memory options as headers only, so a body reaches the provider as the
client wrote it (the one exception is the per-message ``"memory": false`` opt-out, which
providers would refuse). Responses carry what memory did in ``X-Memory-*`` headers, the
reflection debt among them in the compact form the product document gives. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from mcp_memoryrouter import limits, schemas
from mcp_memoryrouter.errors import InvalidRequest

Mode = Literal["default", "read", "write", "off"]
MODES: tuple[Mode, ...] = ("default", "read", "write", "off")
StoredBy = Literal["trusted", "any"]  # prepare's stored_by (vault/rules/writers.py)
STORED_BY: tuple[StoredBy, ...] = ("trusted", "any")

# Headers that are for the proxy only: never forwarded to the provider.
MEMORY_KEY = "x-memory-key"
PROVIDER_KEY = "x-provider-key"
OWN_HEADERS = frozenset(
    {
        MEMORY_KEY,
        PROVIDER_KEY,
        "x-memory-mode",
        "x-context-limit",
        "x-session-id",
        "x-memory-tiers",
        "x-memory-importance",
        "x-memory-stored-by",
    }
)


@dataclass(frozen=True)
class Options:
    mode: Mode = "default"
    context_limit: int | None = None
    session_id: str | None = None
    tiers: list[int] | None = None
    importance: int | None = None
    stored_by: StoredBy = "trusted"

    @property
    def retrieves(self) -> bool:
        return self.mode in ("default", "read")

    @property
    def stores(self) -> bool:
        return self.mode in ("default", "write")


def options(headers: Mapping[str, str]) -> Options:
    """The memory options of a request's headers; a bad value is a 400 naming the header."""
    mode = headers.get("x-memory-mode", "default").strip().lower() or "default"
    if mode == "none":  # the production service's spelling of off
        mode = "off"
    if mode not in MODES:
        raise _bad("X-Memory-Mode", f"must be one of {', '.join(MODES)}")
    stored_by = headers.get("x-memory-stored-by", "trusted").strip().lower() or "trusted"
    if stored_by not in STORED_BY:
        raise _bad("X-Memory-Stored-By", f"must be one of {', '.join(STORED_BY)}")
    session = headers.get("x-session-id", "").strip() or None
    if session is not None and len(session) > limits.MAX_ID_CHARS:
        raise _bad("X-Session-ID", f"must be at most {limits.MAX_ID_CHARS} characters")
    return Options(
        mode=mode,
        context_limit=_integer(headers, "X-Context-Limit", 1, limits.CONTEXT_LIMIT_MAX),
        session_id=session,
        tiers=_tiers(headers.get("x-memory-tiers")),
        importance=_integer(
            headers, "X-Memory-Importance", limits.IMPORTANCE_MIN, limits.IMPORTANCE_MAX
        ),
        stored_by=stored_by,
    )


def _integer(headers: Mapping[str, str], name: str, low: int, high: int) -> int | None:
    raw = headers.get(name.lower(), "").strip()
    if not raw:
        return None
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise _bad(name, f"must be an integer from {low} to {high}")
    return int(raw)


def _tiers(raw: str | None) -> list[int] | None:
    if raw is None or not raw.strip():
        return None
    values = [v.strip() for v in raw.split(",")]
    if not all(v.isdigit() and int(v) in limits.TIERS for v in values):
        raise _bad("X-Memory-Tiers", "must be a comma-separated list of tiers 1, 2 and 3")
    return [int(v) for v in values]


def _bad(header: str, rule: str) -> InvalidRequest:
    return InvalidRequest(f"the {header} header {rule}", {"field": header})


def debt_header(reflection: schemas.Reflection) -> str:
    """``X-Memory-Reflection-Debt``: the debt block in the product document's compact form."""
    raw, tier2 = reflection.unconsolidated.raw, reflection.unconsolidated.tier2
    compact = {
        "raw_units": raw.units,
        "raw_tokens": raw.est_tokens,
        "raw_importance_equiv": raw.importance_equiv,
        "t2_count": tier2.count,
        "t2_importance": tier2.importance,
        "t2_tokens": tier2.est_tokens,
        "threshold": reflection.threshold_tokens,
        "threshold_importance": reflection.threshold_importance,
        "suggestion": reflection.suggestion,
    }
    return json.dumps(compact, separators=(",", ":"), ensure_ascii=True)


def header_text(text: str, limit: int = 300) -> str:
    """``text`` made safe for a header value: one line, ASCII, at most ``limit`` chars."""
    flat = " ".join(text.split()).encode("ascii", "replace").decode("ascii")
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
