"""A serving process gives the memory it freed back to the system (allocator.py): freed
blocks between live ones stay resident under glibc's malloc until it is asked."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mcp_memoryrouter import allocator

# 200 MB in blocks under malloc's mmap threshold (so in its heap), written to (zeroed memory
# fresh from the system is not resident until touched), every 50th kept alive so that the
# free ones lie between live ones; resident MiB while all are held, and half a second after
# the others are freed (measured while held: the settling thread may give the freed memory
# back at once).
CHILD = """
import sys, time
from mcp_memoryrouter import allocator

def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

if sys.argv[1] == "settled":
    allocator.settle(every=0.05)
blocks = [b"\x01" * 100_000 for _ in range(2000)]
kept = blocks[::50]
held = rss()
del blocks
time.sleep(0.5)
print(held, rss())
"""


def resident(mode: str) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode], capture_output=True, text=True, check=True
    )
    before, after = out.stdout.split()
    return float(before), float(after)


@pytest.mark.skipif(allocator._LIBC is None, reason="glibc's malloc only")
def test_freed_memory_goes_back_to_the_system() -> None:
    held, later = resident("settled")
    assert held > 190 and later < held - 100, (held, later)


@pytest.mark.skipif(allocator._LIBC is None, reason="glibc's malloc only")
def test_without_it_the_freed_memory_stays() -> None:
    """What the test above holds against: the same blocks, nothing given back."""
    held, later = resident("plain")
    assert held > 190 and later > held - 20, (held, later)
