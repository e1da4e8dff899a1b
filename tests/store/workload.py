"""Every use case of the vault, once or more, through its REST API (and the embedding worker
and the operator's key commands, which reach the store without it), each call named, with
the store's statements recorded per call.

The vault-filter test reads every statement this runs (tests/store/test_vault_filter.py);
bench/vault_shape.py counts them per call over a larger vault.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mcp_memoryrouter.vault.app import front_of
from mcp_memoryrouter.vault.http.api import router
from mcp_memoryrouter.vault.rules.domain import RunOutcome
from tests.store.recorder import Executed, Recording
from tests.support import Vault
from tests.vault.embedders import ConceptEmbedder

T = TypeVar("T")
INGEST = "/v1/memory/ingest"
SEARCH = "/v1/memory/search"
PREPARE = "/v1/memory/prepare"
DATES = "/v1/memory/date-search"
CHECKOUT = "/v1/memory/consolidate/checkout"
COMMIT = "/v1/memory/consolidate/commit"
INSPECT = "/v1/memory/inspect"
DELETE_IDS = "/v1/memory/delete-ids"
OPERATOR = "operator"  # the method of a step that is no HTTP call


class Embedder(ConceptEmbedder):
    """The test's vector space; it replaces an older model, so a start re-queues that one's
    vectors (``EmbeddingWorker.replace_models``)."""

    model_id = "shape-concepts"
    replaces = ("shape-concepts-v0",)


@dataclass(frozen=True)
class Call:
    method: str  # an HTTP method, or OPERATOR
    route: str  # the route's path as api.py declares it (an operator step: what it does)
    note: str
    executed: list[Executed]

    @property
    def name(self) -> str:
        return f"{self.method} {self.route}" + (f" ({self.note})" if self.note else "")


@dataclass
class Workload:
    vault: Vault
    recording: Recording
    calls: list[Call] = field(default_factory=list)

    def http(
        self,
        method: str,
        route: str,
        body: Any = None,
        *,
        note: str = "",
        key: str | None = None,
        status: int = 200,
        query: dict[str, str] | None = None,
        **path: str,
    ) -> Any:
        """Call ``route`` (a path of api.py, ``{name}`` filled from ``path``); its JSON."""
        with self.recording.during(f"{method} {route}") as executed:
            response = self.vault.http.request(
                method,
                route.format(**path),
                json=body,
                params=query,
                headers=self.vault.headers(key),
            )
        assert response.status_code == status, f"{method} {route}: {response.text}"
        self.calls.append(Call(method, route, note, executed))
        if response.headers.get("content-type", "").startswith("application/json"):
            return response.json()
        return response.text

    def step(self, what: str, work: Callable[[], T]) -> T:
        """A use case that is no HTTP call (the embedding worker, the operator's CLI)."""
        with self.recording.during(what) as executed:
            result = work()
        self.calls.append(Call(OPERATOR, what, "", executed))
        return result


def routes() -> set[tuple[str, str]]:
    """Every (method, path) api.py serves."""
    found = set()
    for route in router.routes:
        for method in getattr(route, "methods", ()) or ():
            if method != "HEAD":
                found.add((method, route.path_format))  # type: ignore[attr-defined]
    return found


def messages(topic: str, day: int, count: int) -> list[dict[str, str]]:
    """``count`` dated notes of ``topic`` on day ``day`` of February 2026."""
    return [
        {
            "role": "user",
            "content": f"{topic} note {i}: the doctor said the car in Berlin needs {topic}.",
            "date": f"2026-02-{day:02d}T{8 + i % 12:02d}:{i:02d}:00Z",
        }
        for i in range(count)
    ]


def entries(*texts: str, importance: int = 6) -> list[dict[str, Any]]:
    return [{"text": text, "importance": importance} for text in texts]


def exercise(w: Workload) -> None:
    """Every route of the REST API, the embedding worker and the operator's key commands,
    over the vault of ``w.vault.key`` (which ends wiped) and a second vault."""
    # As a serving vault's: a search embeds its vault's latest small writes first (the
    # worker's thread is not started; the workload drains its queue itself).
    w.vault.service.worker = w.vault.worker
    other = w.step("keys create: a new vault", w.vault.new_key)
    reader = keys(w)
    ids = ingest(w, other)
    reads(w, "raw memories only")
    ids |= consolidate(w)
    reads(w, "with reflections")
    w.http("POST", SEARCH, {"query": "garden doctor", "tiers": [2, 3], "importance": 3})
    w.http("POST", INSPECT, {"memory_id": ids["reflections"][0]}, note="a reflection")
    w.http("POST", INSPECT, {"memory_id": ids["reflections"][0], "order": "similarity"})
    w.http("POST", INSPECT, {"memory_id": ids["garden"][0]}, note="a raw memory")
    w.http("GET", "/v1/memory/stats")
    w.http("GET", "/v1/memory/timeline", query={"bucket": "day"})
    w.http("GET", "/v1/usage")
    restore(w, ids["late"])
    w.http("GET", "/v1/memory/export")
    forget(w, ids["garden"], ids["cycling"])
    reflector(w)
    w.http("DELETE", "/v1/keys/{key_id}", key_id=reader["id"])
    w.http("GET", "/v1/keys/current", key=reader["key"], status=401, note="a revoked key")
    w.http("DELETE", "/v1/memory")
    operator(w)


def keys(w: Workload) -> dict[str, str]:
    w.http("GET", "/healthz")
    w.http("GET", "/v1/keys/current")
    reader: dict[str, str] = w.http(
        "POST", "/v1/keys", {"name": "reader", "read_only": True}, status=201
    )
    w.http("GET", "/v1/keys")
    w.http("GET", "/v1/keys/current", key=reader["key"], note="the new key")
    return reader


def ingest(w: Workload, other: str) -> dict[str, list[str]]:
    garden = w.http(
        "POST",
        INGEST,
        {"messages": messages("garden", 2, 6), "session_id": "s1"},
        status=202,
        note="6 messages, embedded before the answer",
    )["ids"]
    cycling = w.http(
        "POST", INGEST, {"messages": messages("cycling", 3, 20)}, status=202, note="20, queued"
    )["ids"]
    w.http("POST", INGEST, {"messages": messages("cycling", 3, 1)}, status=202, note="again")
    w.http("POST", INGEST, {"messages": messages("other", 3, 4)}, key=other, status=202)
    w.step("embedding worker: a replaced model re-queued", w.vault.worker.replace_models)
    w.step("embedding worker: the queue drained", w.vault.worker.drain)
    return {"garden": garden, "cycling": cycling}


def reads(w: Workload, note: str) -> None:
    """Search, prepare and date search, with and without each filter."""
    w.http("POST", SEARCH, {"query": "garden car", "limit": 5}, note=note)
    w.http("POST", SEARCH, {"query": "doctor", "tiers": [1], "session_id": "s1"}, note=note)
    w.http("POST", SEARCH, {"query": "cycling", "embeddings": "none"}, note=f"{note}, lexical")
    w.http("POST", SEARCH, {"query": "what happened on February 3"}, note=f"{note}, a day")
    w.http("POST", PREPARE, {"query": "garden"}, note=note)
    w.http("POST", PREPARE, {"messages": [{"role": "user", "content": "the car?"}]}, note=note)
    window = {"from": "2026-02-01T00:00:00Z", "to": "2026-02-28T00:00:00Z"}
    w.http("POST", DATES, window, note=note)
    w.http("POST", DATES, {**window, "order": "oldest_first", "session_id": "s1"}, note=note)
    w.http("POST", DATES, {**window, "query": "doctor"}, note=f"{note}, with a query")
    w.http("POST", DATES, {**window, "tiers": [2, 3], "importance": 2}, note=note)


def consolidate(w: Workload) -> dict[str, list[str]]:
    """Tier 1 into tier 2 (twice), tier 2 into tier 3, a replayed commit, an expired lease,
    an empty checkout: the ids of the first batch's reflections, and of raw memories left
    unconsolidated (``late``)."""
    first = w.http("POST", CHECKOUT, {"tier": 1}, note="tier 1")
    done = w.http(
        "POST", COMMIT, {"batch_id": first["batch_id"], "entries": entries("Garden.", "Rides.")}
    )
    again = {"batch_id": first["batch_id"], "entries": entries("Again.")}
    w.http("POST", COMMIT, again, note="a replay")
    w.http("POST", INGEST, {"messages": messages("meeting", 5, 3)}, status=202)
    second = w.http("POST", CHECKOUT, {"tier": 1}, note="tier 1")
    w.http("POST", COMMIT, {"batch_id": second["batch_id"], "entries": entries("Meetings.")})
    top = w.http("POST", CHECKOUT, {"tier": 2}, note="tier 2")
    w.http("POST", COMMIT, {"batch_id": top["batch_id"], "entries": entries("A month.")})
    w.http("POST", CHECKOUT, {"tier": 2}, note="nothing left")
    late = w.http("POST", INGEST, {"messages": messages("late", 7, 6)}, status=202)["ids"]
    lapsed = w.http("POST", CHECKOUT, {"tier": 1}, note="a lease left to expire")
    w.vault.clock.advance(w.vault.service._lease_seconds + 1)
    expired = {"batch_id": lapsed["batch_id"], "entries": entries("Late.")}
    w.http("POST", COMMIT, expired, status=409, note="lease expired")
    w.step("embedding worker: the queue drained", w.vault.worker.drain)
    return {"reflections": [c["id"] for c in done["created"]], "late": late}


def reflector(w: Workload) -> None:
    """The server's reflector and the vault: turned off and on, a run asked for (this vault
    app has no reflector: 409), and a run's hold taken and released as the server's own
    reflector takes it (no route does)."""
    w.http("GET", "/v1/memory/consolidate/server")
    w.http("POST", "/v1/memory/consolidate/server", {"enabled": False})
    w.http("POST", "/v1/memory/consolidate/run", {}, status=409, note="no reflector")
    w.http("POST", "/v1/memory/consolidate/server", {"enabled": True})
    front = front_of(w.vault.app)
    access = w.vault.service.authenticate(w.vault.key)

    def run() -> None:
        assert front.claim_reflector(access, "run-1", 60_000, triggered=True) is not None
        ended = RunOutcome("below_threshold", batches=1, reflections=2, calls=((900, 40),))
        front.finish_reflector(access, "run-1", ended, 1_000)

    w.step("the server's reflector: a run's hold taken and released", run)


def restore(w: Workload, late: Sequence[str]) -> None:
    """An import's two calls: reflections with their sources, then consolidated flags."""
    body = {"tier": 2, "entries": entries("Imported."), "source_ids": list(late[:2])}
    w.http("POST", "/v1/memory/import-reflections", {**body, "sources_deleted": 1}, note="sources")
    covers = {"from": "2026-02-07T00:00:00Z", "to": "2026-02-07T23:00:00Z"}
    w.http(
        "POST",
        "/v1/memory/import-reflections",
        {"tier": 2, "entries": entries("Imported alone."), "covers": covers},
        note="without sources",
    )
    w.http("POST", "/v1/memory/import-consolidated", {"ids": list(late[2:4])})


def forget(w: Workload, garden: Sequence[str], cycling: Sequence[str]) -> None:
    """A derived delete of a source of the first batch (its reflections, and the tier-3 one
    built on them, go; their other sources return to the pool), its dry run, a plain one."""
    derived = {"ids": list(garden[:1]), "derived": True}
    w.http("POST", DELETE_IDS, {**derived, "dry_run": True}, note="derived, a dry run")
    w.http("POST", DELETE_IDS, derived, note="derived")
    w.http("POST", DELETE_IDS, {"ids": list(cycling[:6])}, note="6 ids")


def operator(w: Workload) -> None:
    """The operator's key commands beside the data (``mcp-memoryrouter keys ...``) and the
    first-run check of ``serve``: store calls without a presented key."""
    keyring = w.vault.service.keys
    w.step("serve: is there a vault yet", w.vault.service.vault_count)
    vaults = w.step("keys list: every vault", keyring.vaults)
    w.step("keys list: a vault's keys", lambda: keyring.vault_keys(vaults[0][0]))
    _, record = w.step(
        "keys create --vault: a key for a vault",
        lambda: keyring.add_to_vault(vaults[0][1], "x", False),
    )
    w.step("keys revoke: any vault's key", lambda: keyring.revoke_any(record.id))
