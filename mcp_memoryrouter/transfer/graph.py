"""``@modelcontextprotocol/server-memory``'s knowledge graph: read into memories, and a vault
written back as one.

The server keeps its graph in one JSONL file (``memory.jsonl``; ``MEMORY_FILE_PATH``), its
lines joined by ``\\n``: ``{"type": "entity", "name", "entityType", "observations": [...]}``
for each entity, then ``{"type": "relation", "from", "to", "relationType"}`` for each
relation. Its loader skips blank lines and lines of any other type; so does this reader
(counted). Nothing in the file is dated.

Into a vault (one session per entity, ``server-memory-`` and its name; every memory of role
``observation``):

- an entity: ``Ana (person)``, that it exists, even without observations;
- each observation: ``Ana (person): Speaks Portuguese``, naming its entity and type;
- each relation, in its ``from`` entity's session, in words: ``Ana works at Acme``
  (``works_at``'s underscores become spaces).

Out of a vault (:func:`write_graph`): a session imported from server-memory becomes its
entity again (its declaration, observations and relations recognised as written above; a
relation type comes back with underscores for spaces, as the server's README writes them);
any other session becomes an entity named by its session id, of type ``session``, its raw
memories the observations; reflections become entities ``reflections of tier 2`` and ``…3``
of type ``reflection``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Final

from mcp_memoryrouter.transfer.archive import json_problem
from mcp_memoryrouter.transfer.moving import Moved, bad, words

PRODUCT: Final = "server-memory"
_COMPACT = (",", ":")  # as JSON.stringify writes a line
_DECLARED = re.compile(r"(?P<name>.+) \((?P<type>[^()\n]*)\)", re.DOTALL)


def read_graph(path: Path) -> Moved:
    """The whole file, checked: a line that is not a JSON object, or an entity or relation
    without its fields, refuses the file naming the line."""
    moved = Moved(PRODUCT, ("entity", "entities"))
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise bad(
            path, None, f"not UTF-8 text (byte {exc.start}): a server-memory graph is JSON lines"
        ) from exc
    relations: list[tuple[int, dict[str, Any]]] = []
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        record = _record(path, number, line)
        kind = record.get("type")
        if kind == "entity":
            moved.records += 1
            _entity(path, number, record, moved)
        elif kind == "relation":
            moved.records += 1
            relations.append((number, record))
        else:
            moved.skip("lines of another type")
    for number, record in relations:  # after every entity: a relation may come first
        _relation(path, number, record, moved)
    return moved


def _record(path: Path, number: int, line: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise bad(path, number, f"not JSON ({json_problem(exc)} at column {exc.colno})") from exc
    except RecursionError as exc:
        raise bad(path, number, "JSON nested too deep") from exc
    if not isinstance(record, dict):
        raise bad(path, number, "not a JSON object: a graph's line is an entity or a relation")
    return record


def _text(path: Path, number: int, record: dict[str, Any], key: str) -> str:
    value = record.get(key)
    if not isinstance(value, str) or not value.strip():
        raise bad(path, number, f'{record.get("type")} without "{key}" (a non-empty string)')
    return value.strip()


def _entity(path: Path, number: int, record: dict[str, Any], moved: Moved) -> None:
    name = _text(path, number, record, "name")
    kind = _text(path, number, record, "entityType")
    observations = record.get("observations", [])
    if not isinstance(observations, list) or not all(isinstance(o, str) for o in observations):
        raise bad(path, number, 'entity whose "observations" is not a list of strings')
    session = moved.session(name)
    session.add("observation", declaration(name, kind), None)
    for observation in observations:
        session.add("observation", f"{declaration(name, kind)}: {observation.strip()}", None)


def _relation(path: Path, number: int, record: dict[str, Any], moved: Moved) -> None:
    source = _text(path, number, record, "from")
    target = _text(path, number, record, "to")
    kind = _text(path, number, record, "relationType")
    moved.session(source).add("observation", f"{source} {words(kind)} {target}", None)


def declaration(name: str, kind: str) -> str:
    return f"{name} ({kind})"


# --- out: a vault as a graph ------------------------------------------------------------


def write_graph(lines: Iterable[dict[str, Any]], write: Callable[[str], object]) -> tuple[int, int]:
    """The vault's export lines as a server-memory graph; return (entities, relations)."""
    sessions: dict[str, list[str]] = {}
    reflections: dict[int, list[str]] = {}
    for line in lines:
        tier = line.get("tier", 1)
        content = str(line.get("content", ""))
        if tier == 1:
            sessions.setdefault(line.get("session_id") or "", []).append(content)
        else:
            reflections.setdefault(int(tier), []).append(content)
    entities, relations = _entities(sessions)
    for tier in sorted(reflections):
        entities.append(
            _entity_line(f"reflections of tier {tier}", "reflection", reflections[tier])
        )
    out = [json.dumps(e, ensure_ascii=False, separators=_COMPACT) for e in entities]
    out += [json.dumps(r, ensure_ascii=False, separators=_COMPACT) for r in relations]
    write("\n".join(out))  # as the server writes it: no newline after the last line
    return len(entities), len(relations)


def _entities(sessions: dict[str, list[str]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    prefix = f"{PRODUCT}-"
    declared = {
        session: found
        for session, contents in sessions.items()
        if session.startswith(prefix) and (found := _declared(contents)) is not None
    }
    names = sorted({name for name, _ in declared.values()}, key=len, reverse=True)
    entities: list[dict[str, Any]] = []
    relations: list[dict[str, Any]] = []
    for session, contents in sessions.items():
        if session not in declared:
            entities.append(
                _entity_line(session or "memories without a session", "session", contents)
            )
            continue
        name, kind = declared[session]
        head = declaration(name, kind)
        observations = []
        for content in contents:
            if content == head:
                continue
            if content.startswith(head + ": "):
                observations.append(content[len(head) + 2 :])
            elif (relation := _relation_of(name, content, names)) is not None:
                relations.append(relation)
            else:
                observations.append(content)
        entities.append(_entity_line(name, kind, observations))
    return entities, relations


def _declared(contents: list[str]) -> tuple[str, str] | None:
    """The entity a server-memory session declares: the ``name (type)`` line that most of
    its other memories start with (an observation is ``name (type): …``)."""
    best: tuple[int, str, str] | None = None
    for content in contents:
        match = _DECLARED.fullmatch(content)
        if match is None:
            continue
        prefixed = sum(1 for other in contents if other.startswith(content + ": "))
        if best is None or prefixed > best[0]:
            best = (prefixed, match["name"], match["type"])
    return None if best is None else (best[1], best[2])


def _relation_of(name: str, content: str, names: list[str]) -> dict[str, Any] | None:
    if not content.startswith(name + " "):
        return None
    rest = content[len(name) + 1 :]
    for target in names:  # the longest name first: "Acme" never shadows "Acme Corp"
        if rest.endswith(" " + target) and len(rest) > len(target) + 1:
            kind = rest[: -len(target) - 1].strip()
            if kind and "\n" not in kind:
                return {
                    "type": "relation",
                    "from": name,
                    "to": target,
                    "relationType": kind.replace(" ", "_"),
                }
    return None


def _entity_line(name: str, kind: str, observations: list[str]) -> dict[str, Any]:
    return {"type": "entity", "name": name, "entityType": kind, "observations": observations}
