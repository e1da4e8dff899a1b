"""A deterministic model program: the model input on stdin, entries on stdout.

It writes one entry per group of ``[date] text`` lines it reads (``3. [date] text`` under
contract 2), derived from those lines,
and appends every input it receives to the file named by REFLECT_TEST_LOG (inputs separated
by ``RECORD_SEPARATOR``), so tests can assert on exactly what a model was shown.

    REFLECT_TEST_MODE        ok (default) | garbage | garbage-first (garbage on the 1st, 3rd, …
                             call, valid on the others) | fenced (a ```json block inside prose)
                             | block (wait until REFLECT_TEST_RELEASE exists, then ok)
    REFLECT_TEST_GROUP       memory lines per entry (default 10; never more than 100 entries)
    REFLECT_TEST_IMPORTANCE  every entry's importance (default: derived from its lines)
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

RECORD_SEPARATOR = "\n\x1e\n"
MEMORY_LINE = re.compile(r"^(?:\d+\. )?\[(\d{4}-\d{2}-\d{2}T[0-9:.]+Z)\] (.*)$")
MAX_ENTRIES = 100


def entries(prompt: str) -> list[dict[str, object]]:
    lines = [m.groups() for m in map(MEMORY_LINE.match, prompt.splitlines()) if m]
    group = max(int(os.environ.get("REFLECT_TEST_GROUP", "10")), -(-len(lines) // MAX_ENTRIES))
    fixed = os.environ.get("REFLECT_TEST_IMPORTANCE")
    written: list[dict[str, object]] = []
    for start in range(0, len(lines), group):
        part = lines[start : start + group]
        (first_date, first_text), (last_date, _) = part[0], part[-1]
        importance = int(fixed) if fixed else 1 + sum(map(ord, first_text)) % 10
        text = (
            f"Between {first_date[:10]} and {last_date[:10]}, {len(part)} moments, "
            f"beginning with: {first_text[:80]}"
        )
        written.append({"text": text, "importance": importance})
    return written


def main() -> None:
    prompt = sys.stdin.read()
    log = Path(os.environ["REFLECT_TEST_LOG"])
    calls = log.read_text(encoding="utf-8").count(RECORD_SEPARATOR) if log.exists() else 0
    with log.open("a", encoding="utf-8") as sink:
        sink.write(prompt + RECORD_SEPARATOR)
    mode = os.environ.get("REFLECT_TEST_MODE", "ok")
    if mode == "garbage" or (mode == "garbage-first" and calls % 2 == 0):
        print("These memories are lovely; I would rather not summarize them.")
        return
    if mode == "block":
        release = Path(os.environ["REFLECT_TEST_RELEASE"])
        deadline = time.monotonic() + 60
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    answer = json.dumps(entries(prompt))
    if mode == "fenced":
        answer = f"Here are the reflections:\n\n```json\n{answer}\n```\n\nLet me know!"
    print(answer)


if __name__ == "__main__":
    main()
