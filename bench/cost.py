"""The cost of one call: server CPU per call, wall p50/p95, RSS, and the embedder's rate.

    python bench/cost.py [--sizes 10000,100000] [--calls 200] [--profile DIR]

For each size, raw memories are bulk-loaded the way ``bench/search.py`` does (vectors drawn
from 2,000 real MiniLM embeddings), then one real ``mcp-memoryrouter serve`` process with the
``local`` embedder answers, one call at a time, each kind of call ``--calls`` times:

- REST search (hybrid; the query embedded for real) and REST search with
  ``"embeddings": "none"`` (lexical only);
- MCP ``search_memories`` (the SDK's own client, Streamable HTTP), ``memory_status``;
- MCP ``store_memory`` and REST ingest of 10 messages, with ``"embeddings": "none"`` for the
  REST ingest (what the write itself costs) and the ``local`` embedding included for
  ``store_memory`` (a short text is embedded before the answer);
- a consolidation round trip: MCP ``consolidate_memories`` (tier 1, 1,000 tokens) then
  ``commit_reflections`` with two entries (one row for the pair; at most one round trip per
  200 memories, so that the batches do not run out).

Server CPU is user + system time of the server process, all threads, read from /proc before
and after each kind, divided by the calls: what the machine pays, whatever the wall clock
says. The embedding worker is idle while search and status are measured (every memory has its
vector). RSS is the server's resident memory after the calls, and its peak (VmHWM).
The embedder's rate is units per CPU-second of the ``local`` model in this process, on short
sentences and on ~300-token units (what a long message is split into), batches of 32.
With ``--profile DIR``, each kind is also recorded by ``py-spy`` (if installed) into
``DIR/<size>-<kind>.txt`` (collapsed stacks), for docs/benchmarks.md's profiles.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import code_version, ok, p50, p95, rss_bytes, server, table
from bench.load import cpu_seconds, server_pid
from bench.search import QUERIES, fill, sentence

Call = Callable[[int], Awaitable[object]]


def peak_rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def long_unit(i: int) -> str:
    """About 300 tokens of varied prose (what chunking cuts a long message into)."""
    return " ".join(sentence(i * 17 + k) for k in range(14))


class Profiler:
    """py-spy attached to the server for one kind of call, when asked for and installed."""

    def __init__(self, directory: Path | None, pid: int) -> None:
        self.directory = directory
        self.pid = pid
        self.binary = shutil.which("py-spy")

    def start(self, name: str) -> subprocess.Popen[bytes] | None:
        if self.directory is None or self.binary is None:
            return None
        self.directory.mkdir(parents=True, exist_ok=True)
        out = self.directory / f"{name}.txt"
        command = [self.binary, "record", "--pid", str(self.pid), "--format", "raw"]
        command += ["--threads", "--rate", "250", "--output", str(out)]
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # attached before the first call
        return proc

    @staticmethod
    def stop(proc: subprocess.Popen[bytes] | None) -> None:
        if proc is not None:
            proc.send_signal(2)  # SIGINT: py-spy writes what it has
            proc.wait(timeout=60)


async def measure(
    pid: int, name: str, call: Call, calls: int, profiler: Profiler
) -> tuple[float, list[float]]:
    """(server CPU ms per call, wall ms of each call), after three calls to warm the path."""
    for n in range(3):  # warm this path
        await call(10**6 + n)
    recording = profiler.start(name)
    walls = []
    before = cpu_seconds(pid)
    for n in range(calls):
        start = time.perf_counter()
        await call(n)
        walls.append((time.perf_counter() - start) * 1000)
    used = cpu_seconds(pid) - before
    Profiler.stop(recording)
    return used * 1000 / calls, walls


def query(n: int) -> str:
    return f"{QUERIES[n % len(QUERIES)]} week {n % 52}"


async def run_size(
    size: int, calls: int, profile: Path | None, rankers: list[str], only: str | None
) -> list[list[str]]:
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        key = fill(Path(tmp), size)
        print(f"  {size} memories ready in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        for ranker in rankers:
            label = f"{size // 1000}k" + (f", {ranker}" if len(rankers) > 1 else "")
            rows += await _serve_and_measure(
                Path(tmp), key, size, calls, profile, ranker, only, label
            )
    return rows


async def _serve_and_measure(
    tmp: Path,
    key: str,
    size: int,
    calls: int,
    profile: Path | None,
    ranker: str,
    only: str | None,
    label: str,
) -> list[list[str]]:
    rows: list[list[str]] = []
    headers = {"Authorization": f"Bearer {key}"}
    env = {"MEMORYROUTER_EMBEDDINGS": "local", "MEMORYROUTER_RANKER": ranker}
    with server(Path(tmp), env) as url:
        pid = server_pid()
        profiler = Profiler(profile / str(size) if profile else None, pid)
        async with (
            httpx2.AsyncClient(base_url=url, headers=headers, timeout=120) as http,
            httpx2.AsyncClient(headers=headers, timeout=120) as mcp_http,
            Client(streamable_http_client(url + "/mcp", http_client=mcp_http)) as mcp,
        ):

            async def rest_search(n: int) -> object:
                body = {"query": query(n), "limit": 10}
                return (await http.post("/v1/memory/search", json=body)).raise_for_status()

            async def rest_lexical(n: int) -> object:
                body = {"query": query(n), "limit": 10, "embeddings": "none"}
                return (await http.post("/v1/memory/search", json=body)).raise_for_status()

            async def mcp_search(n: int) -> object:
                return ok(await mcp.call_tool("search_memories", {"query": query(n)}))

            async def mcp_status(n: int) -> object:
                return ok(await mcp.call_tool("memory_status", {}))

            async def mcp_store(n: int) -> object:
                text = f"Stored fact {n} of run {size}: {sentence(n)}"
                return ok(await mcp.call_tool("store_memory", {"content": text}))

            async def rest_ingest(n: int) -> object:
                messages = [{"content": f"Ingested {n}.{k}: {sentence(n + k)}"} for k in range(10)]
                body = {"messages": messages, "embeddings": "none"}
                return (await http.post("/v1/memory/ingest", json=body)).raise_for_status()

            async def round_trip(n: int) -> object:
                batch = ok(
                    await mcp.call_tool("consolidate_memories", {"tier": 1, "max_tokens": 1000})
                )
                if batch.get("batch_id") is None:  # left out when there is none
                    raise RuntimeError(f"nothing to consolidate: {batch}")
                entries = [
                    {"text": f"Round {n}: the team kept working on {q}.", "importance": 5}
                    for q in ("the billing service", "the release")
                ]
                arguments = {"batch_id": batch["batch_id"], "entries": entries}
                return ok(await mcp.call_tool("commit_reflections", arguments))

            kinds: list[tuple[str, Call]] = [
                ("REST search (hybrid)", rest_search),
                ("REST search (lexical only)", rest_lexical),
                ("MCP search_memories", mcp_search),
                ("MCP memory_status", mcp_status),
                ("MCP store_memory (embedded)", mcp_store),
                ("REST ingest, 10 messages (no embedding)", rest_ingest),
                ("MCP consolidate + commit", round_trip),
            ]
            costs: dict[str, float] = {}
            kinds = [k for k in kinds if only is None or only in k[0]]
            for name, call in kinds:
                slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
                # a round trip leases 1,000 tokens of the vault's ~15 per memory
                times = min(calls, size // 200) if call is round_trip else calls
                cpu, walls = await measure(pid, slug, call, times, profiler)
                costs[name] = cpu
                rows.append(
                    [
                        label,
                        name,
                        f"{cpu:.1f}",
                        f"{p50(walls):.1f}",
                        f"{p95(walls):.1f}",
                    ]
                )
            if "MCP search_memories" in costs and "REST search (hybrid)" in costs:
                overhead = costs["MCP search_memories"] - costs["REST search (hybrid)"]
                rows.append([label, "MCP overhead (search - REST)", f"{overhead:.1f}", "", ""])
        rss, peak = rss_bytes(pid) / 2**20, peak_rss_bytes(pid) / 2**20
        rows.append([label, "server RSS / peak (MiB)", f"{rss:.0f} / {peak:.0f}", "", ""])
    return rows


def embedder_rate() -> list[list[str]]:
    from mcp_memoryrouter.vault.search.embeddings import LocalMiniLM

    model = LocalMiniLM()
    model.embed(["warm"])
    rows = []
    for name, make, count in [
        ("short sentences", sentence, 1024),
        ("~300-token units", long_unit, 256),
    ]:
        texts = [make(i) for i in range(count)]
        before = time.process_time()
        for start in range(0, count, 32):
            model.embed(texts[start : start + 32])
        rate = count / (time.process_time() - before)
        rows.append(["", f"embedder, {name} (units per CPU-second)", f"{rate:.0f}", "", ""])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--profile", type=Path, help="record each kind with py-spy into DIR")
    parser.add_argument(
        "--rankers",
        default="learned",
        help="MEMORYROUTER_RANKER of each server, in turn over the same vault: learned,fusion",
    )
    parser.add_argument("--only", help="measure only the kinds of call whose name holds this")
    args = parser.parse_args()
    rankers = args.rankers.split(",")
    rows: list[list[str]] = []
    for size in (int(s) for s in args.sizes.split(",")):
        rows += anyio.run(run_size, size, args.calls, args.profile, rankers, args.only)
    if args.only is None:
        rows += embedder_rate()
    print(f"code {code_version()}, {args.calls} calls of each kind, one at a time")
    print(table(["memories", "call", "server CPU ms/call", "wall p50 ms", "wall p95 ms"], rows))


if __name__ == "__main__":
    main()
