"""What a command costs before it does anything: the wall time of commands that serve
nothing, each a fresh ``python -m mcp_memoryrouter`` process, and the heavy modules it
imported on the way.

    python bench/cli_startup.py [--runs 20] [--root PATH]

``--root`` runs another checkout of the repository (its package first on the path), e.g.
one made with ``git worktree add /tmp/cli-base <commit>``, to compare before and after.
Printed per command: the median and the fastest of ``runs`` runs, and which of
:data:`HEAVY` were imported. Python's own start (``python -c pass``) is the floor.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import table

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = [
    ["--version"],
    ["--help"],
    ["keys", "list", "--help"],
    ["import", "--help"],
    ["export", "--help"],
    ["reflect", "--help"],
]
HEAVY = ["numpy", "onnxruntime", "fastapi", "uvicorn", "mcp", "pydantic", "httpx2"]
HEAVY += ["mcp_memoryrouter.app", "mcp_memoryrouter.vault", "mcp_memoryrouter.client"]
# the command run as ``python -m mcp_memoryrouter`` does, then the heavy modules it imported
_PROBE = (
    "import runpy, sys\n"
    "sys.argv = ['mcp-memoryrouter', *sys.argv[1:]]\n"
    "try:\n"
    "    runpy.run_module('mcp_memoryrouter', run_name='__main__')\n"
    "except SystemExit:\n"
    "    pass\n"
    f"print('@@heavy:', *[m for m in {HEAVY!r} if m in sys.modules], file=sys.stderr)\n"
)


def wall(argv: list[str], root: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(root)}
    start = time.perf_counter()
    subprocess.run(argv, cwd=root, env=env, capture_output=True, check=False)
    return time.perf_counter() - start


def heavy_of(args: list[str], root: Path) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], cwd=root, env=env, capture_output=True, text=True
    )
    found = [x for x in done.stderr.splitlines() if x.startswith("@@heavy:")]
    if not found:
        raise RuntimeError(f"{' '.join(args)} failed: {done.stderr[-2000:]}")
    return found[0].split()[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to run")
    options = parser.parse_args()
    root: Path = options.root.resolve()
    rows = []
    floor = [wall([sys.executable, "-c", "pass"], root) for _ in range(options.runs)]
    rows.append(["python -c pass", _ms(statistics.median(floor)), _ms(min(floor)), ""])
    for args in COMMANDS:
        argv = [sys.executable, "-m", "mcp_memoryrouter", *args]
        times = [wall(argv, root) for _ in range(options.runs)]
        heavy = ", ".join(heavy_of(args, root)) or "none"
        rows.append([" ".join(args), _ms(statistics.median(times)), _ms(min(times)), heavy])
    load = os.getloadavg()[0]
    print(f"{root}: {options.runs} runs each, load average {load:.1f}")
    print(table(["command", "median", "fastest", "heavy modules imported"], rows))


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


if __name__ == "__main__":
    main()
