"""A chat history as the service delivers it, read into a :class:`history.History`: the data
export's zip, or the ``conversations.json`` taken out of it.

ChatGPT sends a zip holding ``conversations.json`` beside ``chat.html``, ``user.json`` and
the attachments; Claude's holds ``conversations.json``, ``users.json`` and
``projects.json``. Only ``conversations.json`` is read, at the top of the zip (or in its one
folder, when the export was unpacked and zipped again), into memory through the zip's own
reader. Nothing is extracted: no name inside the archive ever becomes a path on this disk,
and a name that climbs out (``../evil``) or starts at the root is never a candidate.

Sizes are checked before anything is decompressed (:class:`Caps`): the zip file itself, the
uncompressed size every member declares (a zip bomb declares its size, or lies about it:
the zip's reader stops at the declared size and then refuses the checksum), and
``conversations.json``'s. A ``conversations.json`` above its cap can be taken out of the zip
and given as it is: a plain file is read whole.

Every refusal raises :class:`InvalidRequest` saying what is wrong and what to give instead,
its ``details.refused`` one of :data:`Refusal`.
"""

from __future__ import annotations

import json
import os
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Literal

from mcp_memoryrouter.errors import InvalidRequest
from mcp_memoryrouter.schemas import hidden
from mcp_memoryrouter.transfer.archive import json_problem
from mcp_memoryrouter.transfer.history import History, Source, read_history

MEMBER = "conversations.json"
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a local file header; an empty zip's end record
_CHUNK = 1 << 20
_GIB = 1 << 30
_NAMES: dict[Source, str] = {"chatgpt": "ChatGPT", "claude": "Claude"}
# what ``details.refused`` of a refusal says
Refusal = Literal[
    "zip_too_large",  # the zip file, above Caps.zip_bytes
    "zip_bomb",  # its members declare more than Caps.total_bytes
    "too_large",  # conversations.json declares more than Caps.member_bytes
    "no_conversations",
    "several",  # conversations.json in more than one place, none at the top
    "encrypted",
    "damaged",  # a bad zip, a checksum that fails, a compression Python cannot read
    "not_text",  # neither a zip nor UTF-8
    "not_json",
]


@dataclass(frozen=True)
class Caps:
    """The largest zip read, and what its members may hold once decompressed. A large
    ChatGPT export is mostly images: the zip may run to gigabytes, its text to hundreds of
    megabytes."""

    zip_bytes: int = 16 * _GIB  # the zip file as it is on disk
    total_bytes: int = 64 * _GIB  # every member uncompressed, as the zip declares them
    member_bytes: int = 2 * _GIB  # conversations.json uncompressed: what is held in memory


def read_export(path: Path, source: Source, caps: Caps = Caps()) -> History:
    """The history in ``path``: the export's zip, or its ``conversations.json``."""
    with path.open("rb") as file:
        start = file.read(4)
        file.seek(0)
        data = _from_zip(file, source, caps) if start in _ZIP_MAGIC else file.read()
    return read_history(source, _json(data, source, path.suffix.lower() == ".zip"))


def looks_like_zip(path: Path) -> bool:
    with path.open("rb") as file:
        return file.read(4) in _ZIP_MAGIC


def _from_zip(file: IO[bytes], source: Source, caps: Caps) -> bytes:
    size = os.fstat(file.fileno()).st_size
    if size > caps.zip_bytes:
        raise _refused(
            "zip_too_large",
            f"the zip is {_bytes(size)}, above the {_bytes(caps.zip_bytes)} read: take "
            f"{MEMBER} out of it (unzip it) and import that file",
        )
    try:
        with zipfile.ZipFile(file) as archive:
            member = _member(archive, source, caps)
            return _read_member(archive, member, caps)
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        raise _refused(
            "damaged",
            f"a damaged zip ({type(exc).__name__}: {_shown(str(exc))}): download the export again",
        ) from exc


def _member(archive: zipfile.ZipFile, source: Source, caps: Caps) -> zipfile.ZipInfo:
    members = archive.infolist()
    declared = sum(m.file_size for m in members)
    if declared > caps.total_bytes:
        raise _refused(
            "zip_bomb",
            f"the zip says its {len(members)} files hold {_bytes(declared)} uncompressed, "
            f"more than the {_bytes(caps.total_bytes)} a chat export may: it is not one "
            f"(a zip bomb?); give the {_NAMES[source]} export's own zip, or its {MEMBER}",
        )
    found = [m for m in members if _candidate(m)]
    at_top = [m for m in found if m.filename == MEMBER]
    if at_top or len(found) == 1:
        return (at_top or found)[0]
    if found:
        names = ", ".join(_shown(m.filename) for m in found)
        raise _refused(
            "several", f"the zip holds several {MEMBER} ({names}): unzip the one to import"
        )
    shown = ", ".join(_shown(m.filename) for m in members[:5])
    shown += ", …" if len(members) > 5 else ""
    raise _refused(
        "no_conversations",
        f"no {MEMBER} in the zip (it holds {shown or 'nothing'}): give the zip of a "
        f"{_NAMES[source]} data export, or the {MEMBER} inside it",
    )


def _candidate(member: zipfile.ZipInfo) -> bool:
    """``conversations.json`` at the top or one folder down, under a name that stays in the
    archive (a name is only ever compared, yet one that climbs out is suspect)."""
    name = PurePosixPath(member.filename.replace("\\", "/"))
    return (
        not member.is_dir()
        and name.name == MEMBER
        and len(name.parts) <= 2
        and not name.is_absolute()
        and ".." not in name.parts
        and ":" not in member.filename
    )


def _read_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo, caps: Caps) -> bytes:
    if member.file_size > caps.member_bytes:
        raise _refused(
            "too_large",
            f"{_shown(member.filename)} is {_bytes(member.file_size)} uncompressed, above the "
            f"{_bytes(caps.member_bytes)} read from a zip: take it out of the zip "
            f"(unzip it) and import that file",
        )
    if member.flag_bits & 0x1:
        raise _refused("encrypted", f"{_shown(member.filename)} is encrypted: unzip it yourself")
    data = bytearray()
    try:
        with archive.open(member) as stream:
            while chunk := stream.read(_CHUNK):
                data += chunk
                if len(data) > caps.member_bytes:  # never past the cap, whatever is declared
                    raise _refused("damaged", f"{_shown(member.filename)} holds more than said")
    except NotImplementedError as exc:  # a compression method Python cannot read
        raise _refused(
            "damaged",
            f"{_shown(member.filename)} is compressed in a way this reader does not know: "
            "unzip it yourself and import the file",
        ) from exc
    return bytes(data)


def _json(data: bytes, source: Source, named_zip: bool) -> object:
    name = _NAMES[source]
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        hint = " (a damaged zip?)" if named_zip else ""
        raise _refused(
            "not_text",
            f"neither a zip nor UTF-8 text{hint}: give the zip of a {name} data export, or "
            f"the {MEMBER} inside it",
        ) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _refused(
            "not_json",
            f"not valid JSON ({json_problem(exc)} at line {exc.lineno} column {exc.colno}); "
            f"a {name} export's {MEMBER} is one JSON array",
        ) from exc
    except RecursionError as exc:
        raise _refused("not_json", f"JSON nested too deep to be a {name} export") from exc


def _refused(reason: Refusal, message: str) -> InvalidRequest:
    return InvalidRequest(message, {"refused": reason})


def _shown(text: str) -> str:
    """A name from inside the zip, for a terminal: each control or formatting character as
    <U+001B>, never raw (a crafted name could hold escape sequences)."""
    return "".join(f"<U+{ord(c):04X}>" if hidden(c) else c for c in text)


def _bytes(n: int) -> str:
    for unit, size in (("GiB", _GIB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"
