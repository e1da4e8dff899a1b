"""How much freed memory a serving process keeps: two malloc arenas, and free memory given
back every second.

glibc's malloc keeps what is freed for later allocations, and gives it back to the system
only when asked (or from the top of its heap). Loading the search indexes and the embedding
model passes through copies freed once loaded; the embedder's activations, the searches'
arrays and the requests' bodies are freed after each call: at 10,000 memories ~60 MiB stayed
resident that nothing used. Each thread that allocates may also get an arena of its own (up
to eight per core: the request threads, the lexical search's, the worker), each keeping its
own free memory. So a serving process keeps :data:`ARENAS` arenas (before its threads start)
and gives the free memory back every :data:`EVERY` seconds, 0.1 to 0.3 ms each time
(:func:`settle`): 306 -> 242 MiB steady at 10,000 memories (docs/benchmarks.md, "Memory at
rest"). Giving back once at rest instead left 263 MiB; a fixed ``M_MMAP_THRESHOLD`` saved
as much but cost long texts 60 % more CPU to embed.

Where the C library is not glibc (musl, macOS) this does nothing.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

ARENAS = 2  # one per core of a small machine
EVERY = 1.0  # seconds between two gives back
_M_ARENA_MAX = -8  # glibc's malloc.h


def _glibc() -> Any:
    try:
        libc = ctypes.CDLL(None)  # the C library this process already runs on
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


_LIBC = _glibc()


def settle(arenas: int = ARENAS, every: float = EVERY) -> threading.Event | None:
    """At most ``arenas`` malloc arenas from now on (threads started earlier keep theirs),
    and a daemon thread that gives free memory back every ``every`` seconds until the
    event returned is set; None where the C library is not glibc."""
    if _LIBC is None:
        return None
    _LIBC.mallopt(_M_ARENA_MAX, arenas)
    stop = threading.Event()

    def giving_back() -> None:
        while not stop.wait(every):
            _LIBC.malloc_trim(0)

    threading.Thread(target=giving_back, name="give-back", daemon=True).start()
    return stop
