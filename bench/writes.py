"""What a write costs, and how soon it is found by meaning: the code before beside this one.

    python bench/writes.py [--baseline 8497cf0] [--samples 200] [--bulk 100000] [--local 2000]

Each version (the baseline commit and ``--code``, each unpacked with ``git archive``) runs as
its own ``mcp-memoryrouter serve`` process over a fresh SQLite vault, both up at once, the
calls by turns (so both see the same load), then each bulk in turn:

- with an instant embedder double (the ``openai`` embedder pointed at a loopback HTTP upstream
  that returns a vector per text at once, so only the server's own cost counts):
  - ``store_memory`` over MCP (the SDK's client, Streamable HTTP), each followed by a
    ``search_memories`` whose query shares no word with the fact, only its meaning (the
    double gives ``zq{n}alpha`` and ``zq{n}beta`` one direction): p50/p95 of the store, the
    server's CPU per store (user + system, every thread, from /proc: clock ticks, so the
    mean), p50 of the search, and how many facts the next search found first;
  - REST ingest of 1 message (keep-alive), p50/p95;
  - bulk: ``--bulk`` chat lines in requests of 1,000 into a new vault: messages per second
    acknowledged, then the seconds until none is pending (searchable by meaning), and the
    rate the queue was embedded at;
- with the real ``local`` embedder: ``--local`` chat lines in requests of 500, the seconds
  until none is pending, units embedded per second and per CPU-second of the server (the
  worker is one thread: per core).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Sequence
from contextlib import AbstractContextManager, AsyncExitStack, ExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx2
import numpy as np
import numpy.typing as npt
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    code_version,
    embeddings_upstream,
    new_vault,
    ok,
    p50,
    p95,
    serving,
    table,
)

ROOT = Path(__file__).resolve().parents[1]

BASELINE = "8497cf0"  # the commit before writes stopped embedding before they answer
DIM = 128
WORDS = " ".join(
    (
        "the a we i you it to and of in on for with about that this was is be have had will",
        "meeting release plan budget invoice trip customer call database deploy review schema",
        "weekend dinner garden book movie coffee tea train flight hotel doctor school project",
        "team report draft design bug fix test idea question answer morning evening yesterday",
    )
).split()
_PROBE = re.compile(r"zq(\d+)(?:alpha|beta)")


class Double:
    """Vectors at once: each word a fixed random direction (``zq{n}alpha`` and ``zq{n}beta``
    the same one, weighted 3), a text their normalised sum."""

    def __init__(self) -> None:
        self._cache: dict[str, npt.NDArray[np.float32]] = {}

    def _word(self, word: str) -> npt.NDArray[np.float32]:
        found = self._cache.get(word)
        if found is None:
            probe = _PROBE.fullmatch(word)
            key = f"zq{probe.group(1)}" if probe else word
            v = np.random.default_rng(zlib.crc32(key.encode())).standard_normal(DIM)
            found = (v / np.linalg.norm(v) * (3.0 if probe else 1.0)).astype(np.float32)
            if len(self._cache) < 200_000:
                self._cache[word] = found
        return found

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                out[row] += self._word(word)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.where(norms == 0, 1, norms)).astype(np.float32)


def embedding_double() -> AbstractContextManager[str]:
    """The instant embedding service, answering with :class:`Double`'s vectors."""
    return embeddings_upstream(Double().embed, "double")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def line(n: int) -> str:
    """A chat line of 6 to 40 words."""
    rng = np.random.default_rng(n)
    words = [WORDS[int(i)] for i in rng.integers(0, len(WORDS), int(rng.integers(6, 41)))]
    return f"{' '.join(words).capitalize()} (line {n})."


async def calls(servers: dict[str, tuple[str, str, int]], samples: int) -> dict[str, Any]:
    """On each server, by turns: store_memory then search_memories by meaning (MCP), and a
    REST ingest of 1 message; ``samples`` of each after 10 warm-up rounds."""
    out: dict[str, Any] = {
        label: {"store": [], "store_cpu": [], "search": [], "found": 0, "ingest": []}
        for label in servers
    }
    async with AsyncExitStack() as stack:
        clients = {}
        for label, (url, key, _) in servers.items():
            headers = {"Authorization": f"Bearer {key}"}
            rest = await stack.enter_async_context(
                httpx2.AsyncClient(base_url=url, headers=headers, timeout=120)
            )
            http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=120))
            mcp = await stack.enter_async_context(
                Client(streamable_http_client(url + "/mcp", http_client=http))
            )
            clients[label] = (rest, mcp)
        for n in range(samples + 10):
            for label, (rest, mcp) in clients.items():
                figures = out[label]
                fact = {"content": f"Note {n}: the parcel code is zq{n}alpha."}
                cpu = cpu_seconds(servers[label][2])
                start = time.perf_counter()
                stored = ok(await mcp.call_tool("store_memory", fact))
                took = (time.perf_counter() - start) * 1000
                cpu = (cpu_seconds(servers[label][2]) - cpu) * 1000
                start = time.perf_counter()
                hits = ok(await mcp.call_tool("search_memories", {"query": f"zq{n}beta"}))
                searched = (time.perf_counter() - start) * 1000
                body = {"messages": [{"role": "user", "content": line(10_000_000 + n)}]}
                start = time.perf_counter()
                (await rest.post("/v1/memory/ingest", json=body)).raise_for_status()
                ingested = (time.perf_counter() - start) * 1000
                if n >= 10:
                    figures["store"].append(took)
                    figures["store_cpu"].append(cpu)
                    figures["search"].append(searched)
                    figures["ingest"].append(ingested)
                    figures["found"] += [m["id"] for m in hits["memories"][:1]] == stored["ids"]
    return out


def pending(http: httpx2.Client) -> int:
    return int(http.get("/v1/memory/stats").json()["pending_embeddings"])


def bulk(http: httpx2.Client, pid: int, count: int, per_request: int) -> dict[str, float]:
    """``count`` lines acknowledged, then embedded: seconds and rates (per CPU-second: of
    the server, from the first request to the last vector)."""
    cpu = cpu_seconds(pid)
    start = time.perf_counter()
    for first in range(0, count, per_request):
        lines = range(first, min(count, first + per_request))
        body = {"messages": [{"role": "user", "content": line(n)} for n in lines]}
        http.post("/v1/memory/ingest", json=body).raise_for_status()
    acked = time.perf_counter()
    while pending(http):
        time.sleep(0.25)
    done = time.perf_counter()
    return {
        "ack_s": acked - start,
        "rate": count / (acked - start),
        "searchable_s": done - acked,
        "embedded_per_s": count / (done - start),
        "per_cpu_s": count / max(cpu_seconds(pid) - cpu, 1e-9),
    }


def run(
    versions: list[tuple[str, Path]], tmp: Path, env: dict[str, str], args: argparse.Namespace
) -> dict[str, dict[str, Any]]:
    """Every version's server up at once: the calls by turns, then each bulk in turn."""
    results: dict[str, dict[str, Any]] = {label: {} for label, _ in versions}
    with ExitStack() as stack:
        servers: dict[str, tuple[str, str, int]] = {}
        for label, cwd in versions:
            data = tmp / f"{label}-double"
            data.mkdir()
            key = new_vault(data, "bench", cwd)
            url, pid = stack.enter_context(serving(data, env, cwd, seconds=120))
            servers[label] = (url, key, pid)
        if args.samples:
            for url, key, pid in servers.values():
                with httpx2.Client(base_url=url, headers={"X-Memory-Key": key}) as http:
                    bulk(http, pid, 2_000, 1_000)  # a vault that holds something
            print("calls, by turns ...", file=sys.stderr)
            turns = anyio.run(calls, servers, args.samples)
            for label, figures in turns.items():
                results[label].update(figures)
        for label, cwd in versions:
            if args.bulk:
                print(f"{label}: bulk ...", file=sys.stderr)
                url, _, pid = servers[label]
                other = new_vault(tmp / f"{label}-double", "bulk", cwd)
                headers = {"X-Memory-Key": other}
                with httpx2.Client(base_url=url, headers=headers, timeout=600) as http:
                    results[label]["bulk"] = bulk(http, pid, args.bulk, 1_000)
    return results


def run_local(cwd: Path, data: Path, count: int) -> dict[str, float]:
    data.mkdir(parents=True)
    key = new_vault(data, "local", cwd)
    env = {"MEMORYROUTER_EMBEDDINGS": "local"}
    with (
        serving(data, env, cwd, seconds=120) as (url, pid),
        httpx2.Client(base_url=url, headers={"X-Memory-Key": key}, timeout=600) as http,
    ):
        http.post("/v1/memory/ingest", json={"messages": [{"content": "warm"}]})
        while pending(http):  # the model's session made
            time.sleep(0.25)
        return bulk(http, pid, count, 500)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default=BASELINE, help="the commit to compare with")
    parser.add_argument("--code", default="HEAD", help="the commit measured ('.': this tree)")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--bulk", type=int, default=100_000)
    parser.add_argument("--local", type=int, default=2_000)
    parser.add_argument("--only", choices=["before", "now"], help="run one version only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, embedding_double() as upstream:
        before = unpacked(args.baseline, Path(tmp) / "before")
        now = ROOT if args.code == "." else unpacked(args.code, Path(tmp) / "now")
        env = {
            "MEMORYROUTER_EMBEDDINGS": "openai",
            "MEMORYROUTER_OPENAI_BASE_URL": upstream,
            "MEMORYROUTER_OPENAI_DIM": str(DIM),
        }
        versions = [(k, v) for k, v in [("before", before), ("now", now)] if args.only in (None, k)]
        results = run(versions, Path(tmp), env, args)
        for label, cwd in versions:
            if args.local:
                print(f"{label}: local embedder ...", file=sys.stderr)
                results[label]["local"] = run_local(cwd, Path(tmp) / f"{label}-local", args.local)
    code = code_version() if args.code == "." else args.code
    print(f"code {code} beside {args.baseline}; {args.samples} samples a case")
    print(table(["", *results], rows(results, args)))


def unpacked(commit: str, into: Path) -> Path:
    """The package as of ``commit`` (``git archive``), to run a server from."""
    into.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def rows(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> list[list[str]]:
    def each(pick: Any) -> list[str]:
        return [pick(r) for r in results.values()]

    out: list[list[str]] = []
    if args.samples:
        out += [
            ["MCP store_memory p50 / p95 ms", *each(lambda r: f2(r["store"]))],
            [
                "server CPU ms per store_memory, mean (all threads)",
                *each(lambda r: f"{sum(r['store_cpu']) / len(r['store_cpu']):.1f}"),
            ],
            ["MCP search_memories right after, p50 ms", *each(lambda r: f1(r["search"]))],
            [
                "that search found the fact first (by meaning alone)",
                *each(lambda r: f"{r['found']} / {args.samples}"),
            ],
            ["REST ingest of 1 message p50 / p95 ms", *each(lambda r: f2(r["ingest"]))],
        ]
    if args.bulk:
        out += [
            [
                f"bulk {args.bulk:,} messages: acknowledged msgs/s (s)",
                *each(lambda r: f"{r['bulk']['rate']:,.0f} ({r['bulk']['ack_s']:.1f})"),
            ],
            [
                "then searchable by meaning after s",
                *each(lambda r: f"{r['bulk']['searchable_s']:.1f}"),
            ],
            [
                "units embedded per s, from the first request",
                *each(lambda r: f"{r['bulk']['embedded_per_s']:,.0f}"),
            ],
        ]
    if args.local:
        out += [
            [
                f"local embedder, {args.local:,} lines: searchable after s (ack s)",
                *each(lambda r: f"{r['local']['searchable_s']:.1f} ({r['local']['ack_s']:.1f})"),
            ],
            [
                "local: units/s, units per server CPU-second",
                *each(
                    lambda r: f"{r['local']['embedded_per_s']:.0f}, {r['local']['per_cpu_s']:.0f}"
                ),
            ],
        ]
    return out


def f1(values: list[float]) -> str:
    return f"{p50(values):.1f}"


def f2(values: list[float]) -> str:
    return f"{p50(values):.1f} / {p95(values):.1f}"


if __name__ == "__main__":
    main()
