"""Resident memory of a serving process: after start, once warm, and steady after use.

    python bench/memory.py [--size 10000] [--embeddings local,none] [--root PATH] [--runs 1]

A vault of ``--size`` raw memories is bulk-loaded once, the way ``bench/search.py`` does it
(vectors drawn from 2,000 real MiniLM embeddings), and copied for each server. Each server is
one real ``mcp-memoryrouter serve`` process with the embedder ``--embeddings`` names (its
default for every request), and RSS (VmRSS) is read:

- ``start``: once ``/healthz`` answers;
- ``warm``: once the search indexes are loaded (the worker loads them after the start: RSS
  unchanged for a second);
- ``steady``: after ``--searches`` REST searches (hybrid with ``local``), ``--prepares``
  prepares of a three-turn conversation (what the chat proxy asks for each call), and 20
  ingests of 5 messages (embedded by the worker with ``local``), then :data:`IDLE` seconds
  at rest (longer than the worker's idle round, ``indexer.IDLE_SECONDS``);
- ``peak``: VmHWM at the end; ``anon`` / ``files``: the steady RSS split into what the
  process allocated and what it maps from files (libraries, models), from
  ``/proc/PID/status``.

``--root`` runs another checkout beside this one, server by server in turn (e.g. one made
with ``git worktree add /tmp/base <commit>``): the same vault, the same calls, so the two
checkouts compare within one run on a shared machine.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import code_version, p50, rss_bytes, server, table
from bench.load import server_pid
from bench.proxy import conversation
from bench.search import QUERIES, fill, sentence

ROOT = Path(__file__).resolve().parents[1]
STATUS = ("VmRSS", "VmHWM", "RssAnon", "RssFile")
GOAL_MIB = 250
IDLE = 6.0


def status_mib(pid: int) -> dict[str, float]:
    """The RSS figures of ``/proc/PID/status``, in MiB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in STATUS:
            found[name] = int(value.split()[0]) / 1024
    return found


def settled(pid: int, seconds: float = 30.0) -> float:
    """RSS in MiB once it has not moved by more than 1 MiB for a second."""
    deadline = time.monotonic() + seconds
    last = rss_bytes(pid)
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = rss_bytes(pid)
        if abs(now - last) < 2**20:
            return now / 2**20
        last = now
    return last / 2**20


def use(http: httpx2.Client, searches: int, prepares: int) -> None:
    for n in range(searches):
        body = {"query": f"{QUERIES[n % len(QUERIES)]} week {n % 52}", "limit": 10}
        http.post("/v1/memory/search", json=body).raise_for_status()
    for n in range(prepares):
        turns = [m for m in conversation(n) if m["role"] != "system"]
        http.post("/v1/memory/prepare", json={"messages": turns}).raise_for_status()
    for n in range(20):
        messages = [{"content": f"Later {n}.{k}: {sentence(n * 5 + k)}"} for k in range(5)]
        http.post("/v1/memory/ingest", json={"messages": messages}).raise_for_status()
    deadline = time.monotonic() + 120
    while http.get("/v1/memory/stats").json()["pending_embeddings"]:
        if time.monotonic() > deadline:
            raise RuntimeError("the worker did not embed the new memories within 120 s")
        time.sleep(0.2)


def one_server(
    vault: Path, key: str, root: Path, embeddings: str, searches: int, prepares: int
) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        for item in vault.iterdir():
            shutil.copy(item, tmp)
        env = {"MEMORYROUTER_EMBEDDINGS": embeddings}
        cwd = None if root == ROOT else root
        headers = {"Authorization": f"Bearer {key}"}
        with (
            server(Path(tmp), env, cwd=cwd) as url,
            httpx2.Client(base_url=url, headers=headers, timeout=60) as http,
        ):
            pid = server_pid()
            found = {"start": rss_bytes(pid) / 2**20, "warm": settled(pid)}
            use(http, searches, prepares)
            time.sleep(IDLE)
            steady = status_mib(pid)
            found |= {
                "steady": steady["VmRSS"],
                "peak": steady["VmHWM"],
                "anon": steady["RssAnon"],
                "files": steady["RssFile"],
            }
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--embeddings", default="local,none")
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--prepares", type=int, default=50)
    parser.add_argument("--root", type=Path, help="another checkout, measured beside this one")
    parser.add_argument("--runs", type=int, default=1, help="servers of each kind (medians)")
    args = parser.parse_args()
    roots = [ROOT] + ([args.root.resolve()] if args.root else [])
    names = {ROOT: f"this ({code_version()})"}
    if args.root:
        names[roots[1]] = f"--root {args.root}"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(tmp, "vault")
        vault.mkdir()
        key = fill(vault, args.size)
        for embeddings in args.embeddings.split(","):
            runs: dict[Path, list[dict[str, float]]] = {root: [] for root in roots}
            for _ in range(args.runs):
                for root in roots:  # interleaved: the machine's load falls on both alike
                    found = one_server(vault, key, root, embeddings, args.searches, args.prepares)
                    runs[root].append(found)
                    print(f"  {names[root]}, {embeddings}: {found}", file=sys.stderr)
            for root in roots:
                columns = ["start", "warm", "steady", "peak", "anon", "files"]
                medians = [p50([r[c] for r in runs[root]]) for c in columns]
                rows.append([names[root], embeddings, *(f"{m:.0f}" for m in medians)])
    print(f"vault of {args.size:,} memories, {args.runs} server(s) each, RSS in MiB")
    headers = ["code", "embeddings", "start", "warm", "steady", "peak", "anon", "files"]
    print(table(headers, rows))
    print(f"(goal: steady <= {GOAL_MIB} MiB at 10k with the default embedder, local)")


if __name__ == "__main__":
    main()
