"""Markdown notes with YAML front matter: basic-memory's, read into memories; a vault written
as a folder of them.

basic-memory keeps each note as a Markdown file: front matter (``title``, ``type``,
``permalink``, ``tags``, any other key), a ``# Title``, free prose, observations
(``- [category] text #tag (context)``) and relations (``- relation_type [[Target]]``),
found by their syntax anywhere in the note. Into a vault, one session per note
(``basic-memory-`` and its permalink), every memory of role ``observation``:

- each observation: ``Coffee Brewing: [method] Pour over gives clarity #brewing``;
- each relation, in words: ``Coffee Brewing relates to Coffee Bean Origins``;
- the prose (whatever is neither, headings included): one memory, ``Coffee Brewing`` and
  the prose below it (the vault splits a long one).

A task line (``- [ ]``, ``- [x]``) is prose, and so is everything inside a fenced code block.
A note dated in its front matter (``created``, else ``date``) keeps that date.

Out of a vault (:func:`write_notes`): one note per session (``sessions/``) and one per
reflection (``reflections/tier-2/``, ``…/tier-3/``), each with front matter basic-memory
reads; a reflection's note links the notes of what it was built from (``- built_from
[[…]]``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from mcp_memoryrouter.transfer.moving import Moved, bad, moment_ms, words

PRODUCT: Final = "basic-memory"
_OBSERVATION = re.compile(r"\s*[-*]\s+\[(?P<category>[^\[\]]+)\]\s+(?P<text>\S.*)")
_RELATION = re.compile(r"\s*[-*]\s+(?P<kind>[^\s\[\]]+)\s+\[\[(?P<target>[^\[\]]+)\]\](?P<rest>.*)")
_TASK = {" ", "x", "X", "-"}
_FENCE = re.compile(r"\s*(```|~~~)")


@dataclass
class Note:
    """A note's front matter and body, as read."""

    front: dict[str, Any]
    body: list[tuple[int, str]]  # (line number, line)


def read_notes(folder: Path) -> Moved:
    """Every ``.md`` file under ``folder`` (hidden folders such as ``.git`` left out)."""
    if not folder.is_dir():
        raise bad(
            folder,
            None,
            "not a folder: give the folder of the notes (basic-memory's project folder)",
        )
    moved = Moved(PRODUCT, ("note", "notes"))
    for path in markdown_files(folder):
        note = read_note(path)
        moved.records += 1
        _note(path, path.relative_to(folder), note, moved)
    return moved


def markdown_files(folder: Path) -> list[Path]:
    found: list[Path] = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [
            Path(root) / f for f in sorted(files) if f.endswith(".md") and not f.startswith(".")
        ]
    return found


def read_note(path: Path) -> Note:
    """A Markdown file's front matter (``---`` fenced YAML at the top, or none) and body."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise bad(path, None, f"not UTF-8 text (byte {exc.start})") from exc
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return Note({}, list(enumerate(lines, 1)))
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        raise bad(path, 1, "front matter opened by --- is never closed by a --- line")
    try:
        front = yaml.safe_load("\n".join(lines[1:end])) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = 2 + mark.line if mark is not None else 1
        raise bad(
            path, line, f"front matter is not YAML ({getattr(exc, 'problem', None) or exc})"
        ) from exc
    if not isinstance(front, dict):
        raise bad(path, 2, "front matter is not a mapping of keys to values")
    return Note(front, [(n + 1, lines[n]) for n in range(end + 1, len(lines))])


def _note(path: Path, relative: Path, note: Note, moved: Moved) -> None:
    front = note.front
    title = str(front.get("title") or relative.with_suffix("").name).strip()
    permalink = str(front.get("permalink") or relative.with_suffix("").as_posix())
    try:
        date_ms = moment_ms(front.get("created") or front.get("date"))
    except ValueError as exc:
        raise bad(path, 2, f"front matter created: {exc}") from exc
    session = moved.session(permalink)
    prose: list[str] = []
    for _, line in _outside_code(note.body, prose):
        relation = _RELATION.fullmatch(line)
        observation = _OBSERVATION.fullmatch(line)
        if relation is not None:
            rest = relation["rest"].strip()
            text = f"{title} {words(relation['kind'])} {relation['target'].strip()}"
            session.add("observation", f"{text} {rest}" if rest else text, date_ms)
        elif observation is not None and observation["category"] not in _TASK:
            session.add(
                "observation",
                f"{title}: [{observation['category'].strip()}] {observation['text'].strip()}",
                date_ms,
            )
        elif not _heading_only(line, title):
            prose.append(line)
    body = "\n".join(prose).strip()
    if body:
        session.add("observation", f"{title}\n\n{body}", date_ms)


def _outside_code(body: list[tuple[int, str]], prose: list[str]) -> Iterator[tuple[int, str]]:
    """The lines to read for observations and relations; fenced code goes to the prose."""
    fenced = False
    for number, line in body:
        if _FENCE.match(line):
            fenced = not fenced
            prose.append(line)
        elif fenced:
            prose.append(line)
        else:
            yield number, line


def _heading_only(line: str, title: str) -> bool:
    heading = line.strip().lstrip("#").strip().lower()
    return line.lstrip().startswith("#") and heading in (title.lower(), "observations", "relations")


# --- out: a vault as notes ---------------------------------------------------------------


@dataclass
class _Folder:
    root: Path
    names: set[str] = field(default_factory=set)
    written: int = 0

    def path(self, under: str, stem: str) -> Path:
        stem = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-.")[:120] or "note"
        name, n = f"{under}/{stem}", 2
        while name.lower() in self.names:
            name, n = f"{under}/{stem}-{n}", n + 1
        self.names.add(name.lower())
        return self.root / f"{name}.md"

    def write(self, path: Path, front: dict[str, Any], body: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        head = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=1000)
        with path.open("x", encoding="utf-8") as file:  # never over a file already there
            file.write(f"---\n{head}---\n\n{body}")
        self.written += 1


def write_notes(lines: Iterable[dict[str, Any]], root: Path) -> int:
    """The vault's export lines as a folder of notes; return how many were written."""
    folder = _Folder(root)
    sessions: dict[str, list[dict[str, Any]]] = {}
    reflections: list[dict[str, Any]] = []
    for line in lines:
        if line.get("tier", 1) == 1:
            sessions.setdefault(line.get("session_id") or "", []).append(line)
        else:
            reflections.append(line)
    title_of: dict[str, str] = {}  # an exported id → the title of the note that holds it
    for session, memories in sessions.items():
        title = session or "memories without a session"
        for memory in memories:
            title_of[str(memory.get("id"))] = title
        _session_note(folder, title, session, memories)
    for n, reflection in enumerate(reflections, 1):
        first = _first_words(str(reflection["content"]))
        title = f"reflection {n} of tier {reflection.get('tier')}: {first}"
        title_of[str(reflection.get("id"))] = title
        _reflection_note(folder, title, reflection, title_of)
    return folder.written


def _session_note(
    folder: _Folder, title: str, session: str, memories: list[dict[str, Any]]
) -> None:
    dates = [str(m["date"]) for m in memories if m.get("date")]
    front: dict[str, Any] = {"title": title, "type": "session"}
    if session:
        front["session_id"] = session
    front |= {"created": min(dates, default=None), "modified": max(dates, default=None)}
    front |= {"memories": len(memories), "tags": ["memoryrouter"]}
    parts = [f"# {title}\n"]
    for memory in memories:
        parts.append(
            f"## {memory.get('date', '')} · {memory.get('role') or 'user'}\n\n{memory['content']}\n"
        )
    path = folder.path("sessions", session or "no-session")
    front["permalink"] = path.relative_to(folder.root).with_suffix("").as_posix()
    folder.write(path, front, "\n".join(parts))


def _reflection_note(
    folder: _Folder, title: str, reflection: dict[str, Any], title_of: dict[str, str]
) -> None:
    tier = reflection.get("tier")
    covers = reflection.get("covers") or {}
    sources = [str(s) for s in reflection.get("sources", [])]
    linked = list(dict.fromkeys(title_of[s] for s in sources if s in title_of))
    front: dict[str, Any] = {"title": title, "type": "reflection", "tier": tier}
    front |= {"importance": reflection.get("importance")}
    front |= {"covers_from": covers.get("from"), "covers_to": covers.get("to")}
    front |= {"sources": len(sources) + int(reflection.get("sources_deleted", 0))}
    front["tags"] = ["memoryrouter", f"tier-{tier}"]
    stem = f"{str(covers.get('from') or '')[:10]}-{_first_words(str(reflection['content']), 6)}"
    path = folder.path(f"reflections/tier-{tier}", stem)
    front["permalink"] = path.relative_to(folder.root).with_suffix("").as_posix()
    body = f"# {title}\n\n{reflection['content']}\n"
    if linked:
        body += "\n## Relations\n" + "".join(f"- built_from [[{t}]]\n" for t in linked)
    folder.write(path, front, body)


def _first_words(text: str, n: int = 8) -> str:
    first = " ".join(text.split()[:n])
    return re.sub(r"[\[\]#|]", "", first)
