"""mem0's and OpenMemory's memories, as their own code writes them.

Accepted, told apart by their content:

- OpenMemory's backup (``POST /api/v1/backup/export``): a zip of ``memories.json`` (the user,
  apps, categories and memories with ``app_id``, ``category_ids``, ``state`` and dates) and
  ``memories.jsonl.gz`` (one memory a line: ``content``, ``metadata``, ``created_at``,
  ``updated_at``, ``state``, ``app``, ``categories``); the zip, or either file taken out of
  it (``memories.jsonl`` unzipped too);
- what mem0's ``Memory.get_all`` / ``MemoryClient.get_all`` return, saved as JSON: an object
  with ``results``, or a bare array, of memories with ``memory``, ``user_id``,
  ``agent_id``, ``run_id``, ``app_id``, ``categories``, ``created_at`` and ``updated_at``.

Each memory is a fact mem0 extracted from conversations: it becomes one raw memory of role
``observation``, in one session per user, agent, app and run (``mem0-`` and their names), its
text followed by who it is about and its categories: ``Is vegetarian (mem0: user alice, app
openmemory; categories: food)``. Its date is ``created_at`` (else ``updated_at``). A memory
OpenMemory marks ``deleted`` is skipped and counted; ``metadata`` is not kept.
"""

from __future__ import annotations

import gzip
import io
import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from mcp_memoryrouter.transfer.archive import json_problem
from mcp_memoryrouter.transfer.moving import Moved, bad, moment_ms

PRODUCT: Final = "mem0"
_JSON = "memories.json"
_LINES = "memories.jsonl.gz"
_MAX_BYTES = 2 << 30  # what one member of the zip may hold once decompressed


@dataclass(frozen=True)
class _Where:
    path: Path
    line: int | None  # a line of JSON lines
    what: str  # "memory 3 (id …)"

    def bad(self, problem: str) -> Exception:
        return bad(self.path, self.line, f"{self.what}: {problem}")


def read_mem0(path: Path) -> Moved:
    moved = Moved(PRODUCT, ("user, agent or app", "users, agents and apps"))
    data = path.read_bytes()
    if data[:4] == b"PK\x03\x04":
        data, inner = _from_zip(path, data)
        path = path / inner  # errors name the member: export.zip/memories.json
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(path, data)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise bad(
            path,
            None,
            f"not UTF-8 text (byte {exc.start}): give mem0's JSON or OpenMemory's export zip",
        ) from exc
    for where, record, context in _records(path, text):
        moved.records += 1
        _memory(where, record, context, moved)
    return moved


def _from_zip(path: Path, data: bytes) -> tuple[bytes, str]:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = {
                m.filename.rsplit("/", 1)[-1]: m for m in archive.infolist() if not m.is_dir()
            }
            for name in (_JSON, _LINES):
                member = members.get(name)
                if member is None:
                    continue
                if member.file_size > _MAX_BYTES:
                    raise bad(
                        path,
                        None,
                        f"{name} is too large to read from the zip: unzip it and give the file",
                    )
                return archive.read(member), name
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise bad(
            path, None, f"a damaged zip ({type(exc).__name__}): download the export again"
        ) from exc
    raise bad(path, None, f"no {_JSON} or {_LINES} in the zip: give OpenMemory's backup zip")


def _gunzip(path: Path, data: bytes) -> bytes:
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
            out = stream.read(_MAX_BYTES + 1)
    except (OSError, EOFError) as exc:
        raise bad(path, None, f"a damaged gzip ({type(exc).__name__})") from exc
    if len(out) > _MAX_BYTES:
        raise bad(path, None, "more than 2 GiB once decompressed: gunzip it and give the file")
    return out


def _records(path: Path, text: str) -> Iterator[tuple[_Where, dict[str, Any], dict[str, Any]]]:
    """Every memory with where it is and what names its app, categories and user."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.lineno > 1 and _one_object(text.lstrip().split("\n", 1)[0]):  # JSON lines
            yield from _lines(path, text)
            return
        raise bad(
            path, exc.lineno, f"not JSON ({json_problem(exc)} at column {exc.colno})"
        ) from exc
    except RecursionError as exc:
        raise bad(path, None, "JSON nested too deep") from exc
    memories, context = _document(path, value)
    for number, record in enumerate(memories, 1):
        where = _Where(path, None, f"memory {number}{_named(record)}")
        if not isinstance(record, dict):
            raise where.bad("not a JSON object")
        yield where, record, context


def _one_object(line: str) -> bool:
    """Whether ``line`` is a JSON object on its own: the first of JSON lines."""
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False


def _lines(path: Path, text: str) -> Iterator[tuple[_Where, dict[str, Any], dict[str, Any]]]:
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise bad(
                path, number, f"not JSON ({json_problem(exc)} at column {exc.colno})"
            ) from exc
        if not isinstance(record, dict):
            raise bad(path, number, "not a JSON object: each line is one memory")
        yield _Where(path, number, f"memory{_named(record)}"), record, {}


def _document(path: Path, value: object) -> tuple[list[Any], dict[str, Any]]:
    """The memories of a JSON document, and (OpenMemory's ``memories.json``) the names of
    its user, apps and categories by id."""
    if isinstance(value, list):
        return value, {}
    if isinstance(value, dict) and ("memory" in value or "content" in value):
        return [value], {}  # JSON lines of a single memory
    if isinstance(value, dict) and isinstance(value.get("results"), list):
        return value["results"], {}
    if isinstance(value, dict) and isinstance(value.get("memories"), list):
        user = value.get("user") if isinstance(value.get("user"), dict) else {}
        return value["memories"], {
            "user": user.get("user_id") if isinstance(user, dict) else None,
            "apps": _names(value.get("apps")),
            "categories": _names(value.get("categories")),
        }
    raise bad(
        path,
        None,
        'not a mem0 export: expected an array of memories, an object with "results" '
        '(get_all), or OpenMemory\'s memories.json (an object with "memories")',
    )


def _names(value: object) -> dict[str, str]:
    if not isinstance(value, list):
        return {}
    return {
        str(item["id"]): str(item["name"])
        for item in value
        if isinstance(item, dict) and "id" in item and isinstance(item.get("name"), str)
    }


def _named(record: object) -> str:
    if isinstance(record, dict) and isinstance(record.get("id"), str):
        return f" ({record['id'][:80]})"
    return ""


def _memory(where: _Where, record: dict[str, Any], context: dict[str, Any], moved: Moved) -> None:
    text = record.get("memory", record.get("content"))
    if not isinstance(text, str):
        raise where.bad('no "memory" or "content" (a string)')
    if record.get("state") == "deleted":
        moved.skip("deleted memories")
        return
    try:
        date_ms = moment_ms(record.get("created_at") or record.get("updated_at"))
    except ValueError as exc:
        raise where.bad(f"created_at: {exc}") from exc
    who = _who(record, context)
    categories = _categories(where, record, context)
    about = ", ".join(f"{kind} {name}" for kind, name in who)
    tail = f"mem0: {about}" if about else "mem0"
    if categories:
        tail += f"; categories: {', '.join(categories)}"
    name = "-".join(name for _, name in who) or "unattributed"
    if not text.strip():
        moved.skip("empty memories")
        return
    moved.session(name).add("observation", f"{text.strip()} ({tail})", date_ms)


def _who(record: dict[str, Any], context: dict[str, Any]) -> list[tuple[str, str]]:
    app = record.get("app")
    if app is None and record.get("app_id") is not None:
        app = context.get("apps", {}).get(str(record["app_id"]), record["app_id"])
    user = record.get("user_id") if not context.get("user") else context["user"]
    found = [
        ("user", user),
        ("agent", record.get("agent_id")),
        ("app", app),
        ("run", record.get("run_id")),
    ]
    return [
        (kind, str(name))
        for kind, name in found
        if isinstance(name, str | int) and str(name).strip()
    ]


def _categories(where: _Where, record: dict[str, Any], context: dict[str, Any]) -> list[str]:
    names = record.get("categories")
    if names is None and isinstance(record.get("category_ids"), list):
        names = [context.get("categories", {}).get(str(i), str(i)) for i in record["category_ids"]]
    if names is None:
        return []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise where.bad('"categories" is not a list of strings')
    return [n for n in names if n.strip()]
