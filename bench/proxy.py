"""The latency the chat proxy adds to a provider call.

    python bench/proxy.py [--size 10000] [--calls 200] [--gap 0.1] [--profile DIR] [--root PATH]

A vault of ``--size`` raw memories is bulk-loaded the way ``bench/search.py`` does, then one
real ``mcp-memoryrouter serve`` process (the ``local`` embedder, so each call's query is
embedded for real) proxies to a provider double running in its own process (the one the
tests use: it answers at once, so what is measured is the proxy, not a model). The same
OpenAI-format call, a three-message conversation ending in a question, is made straight to
the double and through the proxy, alternating, ``--calls`` times each, ``--gap`` seconds
apart (a real provider takes longer than that to answer, so one turn's store, which runs
after its response, does not overlap the same user's next call; ``--gap 0`` measures calls
back to back):

- ``off``: ``X-Memory-Mode: off``, the hop alone (the key checked, the body passed on);
- ``read``: ``X-Memory-Mode: read``, retrieval and injection only;
- ``default``: retrieval, then the turn stored after the answer (the non-streamed answer
  waits for the store; the new rows' embedding runs after it, in the worker);
- ``stream``: the same call streamed (default mode); time to the first byte and to the end;
- ``prepare alone``: REST ``POST /v1/memory/prepare`` over the same conversation, what the
  proxy waits for before it calls the provider (the rest of ``added`` is the proxy's own).

It prints wall p50/p95 for each way, the difference of the p50s (what the proxy adds), and
the server's CPU per proxied call (user + system, all threads, from /proc). With
``--profile DIR`` each mode is also recorded by ``py-spy`` (collapsed stacks). ``--root``
runs a second server from another checkout (e.g. ``git worktree add /tmp/base <commit>``)
over a copy of the same vault, and each call goes straight, then through one server and
the other (their order alternating), so both are measured under the same load.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import answering, code_version, free_port, p50, p95, processes, server, table
from bench.cost import Profiler
from bench.load import cpu_seconds
from bench.search import QUERIES, fill

GOAL_MS = 15.0


@contextmanager
def provider_double() -> Iterator[str]:
    """The tests' provider double (tests/proxy/upstream.py) under uvicorn, in its own process."""
    port = free_port()
    code = (
        "import uvicorn; from tests.proxy.upstream import Upstream; "
        f"uvicorn.run(Upstream(), host='127.0.0.1', port={port}, log_level='warning')"
    )
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=root, env=os.environ.copy())
    url = f"http://127.0.0.1:{port}"
    with answering(proc, lambda: httpx2.post(url + "/nowhere", timeout=1), "the double", 30):
        yield url


def conversation(i: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Good morning, I need help with my notes."},
        {"role": "assistant", "content": "Of course. What are you looking for?"},
        {"role": "user", "content": f"Remind me: {QUERIES[i % len(QUERIES)]}? (call {i})"},
    ]


def timed_call(
    http: httpx2.Client, url: str, headers: dict[str, str], i: int, stream: bool
) -> tuple[float, float]:
    """(ms to the first byte, ms to the end) of one call."""
    body = {"model": "bench", "messages": conversation(i), "stream": stream}
    started = time.perf_counter()
    first = None
    with http.stream("POST", url + "/chat/completions", json=body, headers=headers) as response:
        for _ in response.iter_raw():
            if first is None:
                first = time.perf_counter()
        assert response.status_code == 200, response.status_code
    ended = time.perf_counter()
    return ((first or ended) - started) * 1000, (ended - started) * 1000


@dataclass(frozen=True)
class Served:
    """One ``serve`` process under test: what it runs, where, and its pid."""

    name: str
    url: str
    pid: int


def serve_pids() -> set[int]:
    """The ``serve`` processes this process started."""
    me = os.getpid()
    return {pid for pid, (parent, cmd) in processes().items() if parent == me and "serve" in cmd}


def measure(
    http: httpx2.Client,
    direct: str,
    servers: list[Served],
    headers: dict[str, str],
    calls: int,
    stream: bool,
    gap: float,
) -> dict[str, dict[str, list[float]]]:
    """Per server: its proxied calls' walls and CPU, and the direct calls' beside them."""
    found: dict[str, dict[str, list[float]]] = {
        s.name: {"direct": [], "proxy": [], "direct_first": [], "proxy_first": [], "cpu": [0.0]}
        for s in servers
    }
    provider_headers = {"Authorization": "Bearer sk-bench"}
    for i in range(calls):
        time.sleep(gap)
        first, whole = timed_call(http, direct, provider_headers, i, stream)
        turn = servers[i % len(servers) :] + servers[: i % len(servers)]  # alternating order
        for one in turn:
            mine = found[one.name]
            mine["direct"].append(whole)
            mine["direct_first"].append(first)
            before = cpu_seconds(one.pid)
            got_first, got_whole = timed_call(
                http, one.url + "/v1", {**provider_headers, **headers}, i, stream
            )
            mine["proxy"].append(got_whole)
            mine["proxy_first"].append(got_first)
            time.sleep(gap)  # the store after the response runs here, as while a model thinks
            mine["cpu"][0] += (cpu_seconds(one.pid) - before) / calls * 1000
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--gap", type=float, default=0.1, help="seconds between calls")
    parser.add_argument("--profile", type=Path, help="py-spy each mode into DIR/<mode>.txt")
    parser.add_argument("--root", type=Path, help="another checkout, measured beside this one")
    args = parser.parse_args()
    print(f"code {code_version()}, vault of {args.size:,} memories, {args.calls} calls per row")
    roots: list[tuple[str, Path | None]] = [("this", None)]
    if args.root:
        roots.append((f"--root {args.root}", args.root.resolve()))
    with (
        tempfile.TemporaryDirectory() as tmp,
        provider_double() as upstream,
        ExitStack() as stack,
        httpx2.Client(timeout=60) as http,
    ):
        Path(tmp, "this").mkdir()
        key = fill(Path(tmp, "this"), args.size)
        env = {"MEMORYROUTER_UPSTREAM_OPENAI_URL": upstream + "/v1"}
        servers = []
        for name, root in roots:
            data = Path(tmp, name.replace("/", "_"))
            if root is not None:
                shutil.copytree(Path(tmp, "this"), data)
            before = serve_pids()
            url = stack.enter_context(server(data, env, cwd=root))
            (pid,) = serve_pids() - before
            servers.append(Served(name, url, pid))
        memory = {"X-Memory-Key": key}
        for i in range(20):  # warm both paths: model, caches, connections
            timed_call(http, upstream + "/v1", {}, i, False)
            for one in servers:
                timed_call(http, one.url + "/v1", {**memory, "X-Memory-Mode": "read"}, i, False)
        rows = prepare_rows(http, servers, key, args.calls)
        runs: list[tuple[str, dict[str, str], bool]] = [
            ("off", {**memory, "X-Memory-Mode": "off"}, False),
            ("read", {**memory, "X-Memory-Mode": "read"}, False),
            ("default", memory, False),
            ("stream", memory, True),
        ]
        profiler = Profiler(args.profile, servers[0].pid)
        for mode, headers, stream in runs:
            recording = profiler.start(mode)
            found = measure(http, upstream + "/v1", servers, headers, args.calls, stream, args.gap)
            Profiler.stop(recording)
            time.sleep(2)  # let the embedding worker catch up between rows
            rows += [row(mode, one.name, found[one.name]) for one in servers]
    print(
        table(
            [
                "mode",
                "code",
                "direct p50",
                "proxy p50",
                "added p50",
                "direct p95",
                "proxy p95",
                "first byte added p50",
                "server CPU/call",
            ],
            rows,
        )
    )
    print(f"(ms; goal: added p50 <= {GOAL_MS:g} ms on a 10k vault, query embedding included)")


def prepare_rows(
    http: httpx2.Client, servers: list[Served], key: str, calls: int
) -> list[list[str]]:
    """``POST /v1/memory/prepare`` alone, the servers in turn."""
    walls: dict[str, list[float]] = {s.name: [] for s in servers}
    cpu = dict.fromkeys(walls, 0.0)
    for i in range(calls):
        turns = [m for m in conversation(i) if m["role"] != "system"]
        for one in servers[i % len(servers) :] + servers[: i % len(servers)]:
            before = cpu_seconds(one.pid)
            started = time.perf_counter()
            response = http.post(
                one.url + "/v1/memory/prepare",
                json={"messages": turns},
                headers={"Authorization": f"Bearer {key}"},
            )
            walls[one.name].append((time.perf_counter() - started) * 1000)
            cpu[one.name] += cpu_seconds(one.pid) - before
            assert response.status_code == 200, response.text
    return [
        [
            "prepare alone",
            name,
            "",
            ms(p50(w)),
            "",
            "",
            ms(p95(w)),
            "",
            ms(cpu[name] / calls * 1000),
        ]
        for name, w in walls.items()
    ]


def ms(value: float) -> str:
    return f"{value:.1f}"


def row(name: str, code: str, found: dict[str, list[float]]) -> list[str]:
    return [
        name,
        code,
        ms(p50(found["direct"])),
        ms(p50(found["proxy"])),
        ms(p50(found["proxy"]) - p50(found["direct"])),
        ms(p95(found["direct"])),
        ms(p95(found["proxy"])),
        ms(p50(found["proxy_first"]) - p50(found["direct_first"])),
        ms(found["cpu"][0]),
    ]


if __name__ == "__main__":
    main()
