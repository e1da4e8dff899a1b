"""A form that carries a file (the export to import), read under a size cap before any of it
is parsed: ``multipart/form-data``, the one encoding a browser sends a file in without a
script."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from urllib.parse import parse_qs

from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request

from mcp_memoryrouter.edge.body import read_body

FIELDS = 8  # the fields the import form has, and then some


class Upload(dict[str, list[str]]):
    """The form's fields, like any form of the explorer, and the one file it carried."""

    def __init__(self, fields: dict[str, list[str]], file: bytes | None = None) -> None:
        super().__init__(fields)
        self.file = file


async def read_upload(request: Request, limit: int) -> Upload | None:
    """The form, or None when the body passes ``limit`` bytes (nothing of it parsed)."""
    body = await read_body(request.receive, limit)
    if body is None:
        return None
    kind = request.headers.get("content-type", "")
    if not kind.startswith("multipart/form-data"):
        return Upload(parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True))

    async def stream() -> AsyncGenerator[bytes, None]:
        yield body

    parser = MultiPartParser(
        request.headers, stream(), max_files=1, max_fields=FIELDS, max_part_size=64 * 1024
    )
    try:
        form = await parser.parse()
    except MultiPartException:
        return Upload({})  # no token either: refused as a form from elsewhere
    fields: dict[str, list[str]] = {}
    file = None
    try:
        for name, value in form.multi_items():
            if isinstance(value, UploadFile):
                file = await value.read()
            else:
                fields.setdefault(name, []).append(value)
    finally:
        await form.close()
    return Upload(fields, file)
