"""The three systems of the peers benchmark, each driven through its own MCP tools by the SDK's
client, and what is measured on them: ingest time, search latency, recall@10, RSS.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from bench.common import processes, rss_bytes, server
from bench.peers_corpus import Corpus, Kind, Memory, Query

ROOT = Path(__file__).resolve().parents[1]
SCRATCH = ROOT / "bench" / ".peers"
SERVER_MEMORY = "@modelcontextprotocol/server-memory@2026.8.31"
BASIC_MEMORY = "basic-memory==0.24.1"

# ---------------------------------------------------------------------------------------------
# Measuring: each system is driven through its own MCP tools by the SDK's client.


@dataclass
class Result:
    acknowledged_s: float
    searchable_s: float
    latencies_ms: list[float]
    hits: list[tuple[Kind, bool]]
    rss_peak_mb: float = 0.0
    rss_end_mb: float = 0.0


@dataclass(frozen=True)
class NotRun:
    reason: str


Search = Callable[[str], Awaitable[list[str]]]  # a question -> the texts returned, best first


class RssWatch:
    """Resident memory (VmRSS) of our descendant processes whose command line holds
    ``marker``, with their own descendants, sampled every 0.2 s in a thread."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> int:
        procs = processes()
        children: dict[int, list[int]] = {}
        for pid, (parent, _) in procs.items():
            children.setdefault(parent, []).append(pid)
        me, ours = os.getpid(), set()
        pending = [(child, False) for child in children.get(me, [])]
        while pending:  # walk our process tree; a marked process brings its descendants
            pid, inside = pending.pop()
            inside = inside or self.marker in procs[pid][1]
            if inside:
                ours.add(pid)
            pending.extend((child, inside) for child in children.get(pid, []))
        total = sum(rss_bytes(pid) for pid in ours)
        self.peak = max(self.peak, total)
        return total

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.sample()


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


async def ask_all(search: Search, corpus: Corpus, queries: list[Query]) -> Result:
    """Every question once (after 10 unmeasured ones): latency and whether gold is in the top 10."""
    ids = {m.text: i for i, m in enumerate(corpus.memories)}
    for query in queries[:10]:
        await search(query.text)
    latencies, hits = [], []
    for query in queries:
        start = time.perf_counter()
        texts = await search(query.text)
        latencies.append((time.perf_counter() - start) * 1000)
        found = {ids.get(text, -1) for text in texts[:10]}
        hits.append((query.kind, bool(found & query.gold)))
    return Result(0.0, 0.0, latencies, hits)


def payload(result: Any) -> Any:
    """A tool result's structured content, else its first text block read as JSON."""
    if result.is_error:
        raise RuntimeError(f"tool error: {result.content[0].text if result.content else ''}")
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


# -- ours ---------------------------------------------------------------------------------------


async def drive_ours(url: str, key: str, corpus: Corpus, queries: list[Query]) -> Result:
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(url + "/mcp", http_client=http)) as client,
    ):
        start = time.perf_counter()
        for i, memory in enumerate(corpus.memories):
            payload(
                await client.call_tool(
                    "store_memory",
                    {"content": memory.text, "date": memory.date, "role": memory.role},
                )
            )
            if i % 2000 == 1999:
                progress(f"ours: {i + 1} stored")
        acknowledged = time.perf_counter() - start
        while (await http.get(url + "/v1/memory/stats")).json()["pending_embeddings"]:
            await anyio.sleep(0.2)  # searchable by meaning once every vector is written
        searchable = time.perf_counter() - start

        async def search(query: str) -> list[str]:
            found = payload(await client.call_tool("search_memories", {"query": query}))
            return [row["content"] for row in found["memories"]]

        result = await ask_all(search, corpus, queries)
    result.acknowledged_s, result.searchable_s = acknowledged, searchable
    return result


def run_ours(corpus: Corpus, queries: list[Query]) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        created = subprocess.run(
            [sys.executable, "-m", "mcp_memoryrouter", "keys", "create", "--json"],
            env={**os.environ, "MEMORYROUTER_DATA_DIR": tmp},
            capture_output=True,
            check=True,
            text=True,
        )
        key = json.loads(created.stdout)["key"]
        with server(Path(tmp)) as url, RssWatch("mcp_memoryrouter") as rss:
            result = anyio.run(drive_ours, url, key, corpus, queries)
            result.rss_end_mb = rss.sample() / 2**20
            result.rss_peak_mb = rss.peak / 2**20
    return result


# -- @modelcontextprotocol/server-memory ----------------------------------------------------------


def install_server_memory() -> Path | NotRun:
    prefix = SCRATCH / "npm"
    entry = prefix / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist"
    entry = entry / "index.js"
    if entry.exists():
        return entry
    npm = shutil.which("npm")
    if npm is None:
        return NotRun("npm is not on PATH")
    progress(f"installing {SERVER_MEMORY} into {prefix.relative_to(ROOT)} (npm install)")
    subprocess.run(
        [
            npm,
            "install",
            "--no-audit",
            "--no-fund",
            "--silent",
            "--prefix",
            str(prefix),
            SERVER_MEMORY,
        ],
        check=True,
    )
    return entry


def dated(memory: Memory) -> str:
    """How a memory is written where the store has no date field: the day in front."""
    return f"[{memory.date[:10]}] {memory.text}"


async def drive_server_memory(
    entry: Path, store: Path, corpus: Corpus, queries: list[Query], rss: RssWatch
) -> Result:
    params = StdioServerParameters(
        command=shutil.which("node") or "node",
        args=[str(entry)],
        env={"MEMORY_FILE_PATH": str(store)},
    )
    with open(os.devnull, "w") as quiet:
        async with Client(stdio_client(params, errlog=quiet)) as client:
            conversations: dict[int, list[Memory]] = {}
            for memory in corpus.memories:
                conversations.setdefault(memory.conversation, []).append(memory)
            start = time.perf_counter()
            for number_, memories in conversations.items():
                entity = {
                    "name": f"conversation {number_:04d}",
                    "entityType": "conversation",
                    "observations": [dated(m) for m in memories],
                }
                payload(await client.call_tool("create_entities", {"entities": [entity]}))
                if number_ % 100 == 99:
                    progress(f"server-memory: {number_ + 1} conversations stored")
            acknowledged = time.perf_counter() - start  # written to its file before it answers

            async def search(query: str) -> list[str]:
                # search_nodes answers whole entities (every observation of each), unranked;
                # the memories it found are the observations holding the query.
                graph = payload(await client.call_tool("search_nodes", {"query": query}))
                needle = query.lower()
                return [
                    observation.split("] ", 1)[-1]
                    for entity in graph["entities"]
                    for observation in entity["observations"]
                    if needle in observation.lower()
                ]

            result = await ask_all(search, corpus, queries)
            result.rss_end_mb = rss.sample() / 2**20  # while it still runs
    result.acknowledged_s = result.searchable_s = acknowledged
    return result


def run_server_memory(corpus: Corpus, queries: list[Query]) -> Result | NotRun:
    entry = install_server_memory()
    if isinstance(entry, NotRun):
        return entry
    with tempfile.TemporaryDirectory() as tmp, RssWatch("server-memory") as rss:
        store = Path(tmp) / "memory.jsonl"
        result = anyio.run(drive_server_memory, entry, store, corpus, queries, rss)
        result.rss_peak_mb = rss.peak / 2**20
    return result


# -- basic-memory ---------------------------------------------------------------------------------


def python_312() -> str | None:
    """A Python >= 3.12 that runs: PEERS_PYTHON, then python3.14-3.12 on PATH, then pyenv's."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = [
        os.environ.get("PEERS_PYTHON", ""),
        *(shutil.which(f"python3.{minor}") or "" for minor in (14, 13, 12)),
        *(str(p) for p in sorted(pyenv.glob("3.1[2-4]*/bin/python3"), reverse=True)),
    ]
    for candidate in filter(None, candidates):
        check = [candidate, "-c", "import sys; sys.exit(sys.version_info < (3, 12))"]
        if subprocess.run(check, capture_output=True).returncode == 0:
            return candidate
    return None


def install_basic_memory() -> Path | NotRun:
    venv = SCRATCH / "basic-memory"
    exe = venv / "bin" / "basic-memory"
    if exe.exists():
        return exe
    python = python_312()
    if python is None:
        return NotRun(
            f"{BASIC_MEMORY} requires Python >= 3.12 and none was found (PEERS_PYTHON, "
            "python3.12-3.14 on PATH, pyenv's versions); it cannot run on this Python "
            f"{sys.version_info.major}.{sys.version_info.minor}: dozens of its modules use "
            "3.12-only syntax (PEP 695 'type' aliases and generic functions), which no runtime "
            "shim can supply"
        )
    progress(f"installing {BASIC_MEMORY} into {venv.relative_to(ROOT)} ({python} -m venv, pip)")
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", BASIC_MEMORY], check=True)
    return exe


def title_of(memory: Memory) -> str:
    """A note's title: opaque and unique, so it names one memory and matches no question."""
    return "m" + hashlib.sha1(memory.text.encode()).hexdigest()[:12]


async def drive_basic_memory(
    exe: Path, home: Path, corpus: Corpus, queries: list[Query], rss: RssWatch
) -> Result:
    params = StdioServerParameters(
        command=str(exe),
        args=["mcp"],
        env={"BASIC_MEMORY_HOME": str(home / "notes"), "BASIC_MEMORY_CONFIG_DIR": str(home)},
    )
    by_title = {title_of(m): m.text for m in corpus.memories}
    with open(os.devnull, "w") as quiet:
        async with Client(stdio_client(params, errlog=quiet)) as client:

            async def search(query: str) -> list[str]:
                found = payload(
                    await client.call_tool(
                        "search_notes",
                        # Keyword search: its hybrid mode needs SQLite extension loading
                        # and a model download, and asking for it where either is missing
                        # only adds a failed attempt before the same keyword search.
                        {
                            "query": query,
                            "page_size": 10,
                            "search_type": "text",
                            "output_format": "json",
                        },
                    )
                )
                found = found.get("result", found)  # FastMCP wraps a returned dict
                return [by_title.get(hit.get("title", ""), "") for hit in found["results"]]

            start = time.perf_counter()
            for i, memory in enumerate(corpus.memories):
                note = {
                    "title": title_of(memory),
                    "content": dated(memory),
                    "directory": "memories",
                }
                payload(await client.call_tool("write_note", note))
                if i % 2000 == 1999:
                    progress(f"basic-memory: {i + 1} written")
            acknowledged = time.perf_counter() - start
            last = corpus.memories[-1].text
            with anyio.fail_after(900):  # it indexes in the background: wait until it finds
                while last not in await search(title_of(corpus.memories[-1])):
                    await anyio.sleep(0.2)
            searchable = time.perf_counter() - start
            result = await ask_all(search, corpus, queries)
            result.rss_end_mb = rss.sample() / 2**20  # while it still runs
    result.acknowledged_s, result.searchable_s = acknowledged, searchable
    return result


def run_basic_memory(corpus: Corpus, queries: list[Query]) -> Result | NotRun:
    exe = install_basic_memory()
    if isinstance(exe, NotRun):
        return exe
    with tempfile.TemporaryDirectory() as tmp, RssWatch("basic-memory") as rss:
        result = anyio.run(drive_basic_memory, exe, Path(tmp), corpus, queries, rss)
        result.rss_peak_mb = rss.peak / 2**20
    return result
