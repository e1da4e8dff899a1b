"""The rules the server checks beyond its wire models, written into ``/openapi.json``.

The pydantic models give the document its types and bounds (from ``limits.py``); what the
vault refuses later (an entry's trimmed length and the ids it must not hold, from the
reflection contract; blank text; the dates and times ``limits.MOMENT`` spells; which
embedding models this server has) is added here, so that every request the document allows
is one the server accepts and every request it refuses the document forbids. The patterns
are the server's own, written for every regex dialect. What JSON Schema cannot say the
server does not refuse: a window whose ``from`` is after its ``to`` is an empty one, and
``7.0`` is the integer 7 (docs/security.md, Input).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from mcp_memoryrouter import schemas as wire
from mcp_memoryrouter.limits import (
    BATCH_ID,
    ENTRY_CHARS_MAX,
    MEMORY_ID,
    MOMENT,
    MOMENT_OFF_THE_EDGE,
    RELATED_LABEL,
)
from mcp_memoryrouter.vault.rules.timeline import BUCKET_SIZES

Document = dict[str, Any]
Constraint = dict[str, Any]

EMBEDDING_HEADER = "X-Embedding-Model"
# presented.KEY_HEADERS: one value each, never a comma-joined list
_KEY_HEADERS = ("x-memory-key", "authorization", "x-api-key")
_ONE_VALUE: Constraint = {"pattern": "^[^,]*$"}
# presented.KEY_HEADERS as security schemes, in the order they are read: a route that takes
# a key refuses a request without a valid one (401), whichever of the three carries it. The
# header parameters stay too: they carry the one-value rule, which a scheme cannot.
_SCHEMES: dict[str, Constraint] = {
    "memoryKey": {"type": "apiKey", "in": "header", "name": "X-Memory-Key"},
    "bearer": {"type": "http", "scheme": "bearer"},
    "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"},
}
# Routes whose embedding choice is checked (checkout and import take none).
_EMBEDDING_BODIES = (
    "IngestRequest",
    "SearchRequest",
    "PrepareRequest",
    "DateSearchRequest",
    "CommitRequest",
)
# parse_moment: a whole limits.MOMENT, in UTC on the first and last day
_ISO_MOMENT: Constraint = {
    "pattern": f"^({MOMENT.pattern})$",
    "not": {"pattern": f"^({MOMENT_OFF_THE_EDGE.pattern})$"},
}
# What str.strip() trims, spelled out: regex dialects disagree on what \s holds.
_SPACE = (
    r"\t\n\u000b\u000c\r\u001c-\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
)
_NOT_BLANK: Constraint = {"pattern": f"[^{_SPACE}]"}
# 1 to ENTRY_CHARS_MAX characters once surrounding whitespace is trimmed
_ENTRY_TEXT: Constraint = {
    "pattern": f"^[{_SPACE}]*([^{_SPACE}]|[^{_SPACE}][\\s\\S]{{0,{ENTRY_CHARS_MAX - 2}}}"
    f"[^{_SPACE}])[{_SPACE}]*$",
    # and no memory or batch id anywhere (limits.holds_an_id)
    "not": {"pattern": f"{MEMORY_ID.pattern}|{BATCH_ID.pattern}"},
}
_LAST_CODE_POINT = 0x10FFFF
_SURROGATES = range(0xD800, 0xE000)

# component schema → property → what the server checks beyond the model
_PROPERTIES: dict[str, dict[str, Constraint]] = {
    # ingest stores messages; prepare only reads their text, blank or not, and no date
    "IngestMessage": {"content": _NOT_BLANK, "date": _ISO_MOMENT},
    "EntryIn": {
        "text": _ENTRY_TEXT,
        "replaces": {"items": {"type": "string", "pattern": RELATED_LABEL}},
    },
    "ReplacedIn": {"at": _ISO_MOMENT},
    "CoversIn": {"from": _ISO_MOMENT, "to": _ISO_MOMENT},
    "DateSearchRequest": {"from": _ISO_MOMENT, "to": _ISO_MOMENT},
    "SearchRequest": {"as_of": _ISO_MOMENT},
    "PrepareRequest": {"as_of": _ISO_MOMENT},
}
# models that refuse unknown fields (``KeyCreateRequest._known_fields_only``)
_CLOSED = ("KeyCreateRequest",)
# import-reflections dates its reflections by covers, or else by their sources
_IMPORT_DATED: Constraint = {
    "anyOf": [
        {"required": ["covers"], "properties": {"covers": {"type": "object"}}},
        {"required": ["source_ids"], "properties": {"source_ids": {"minItems": 1}}},
    ]
}
# prepare needs a query, or messages to take it from
_PREPARE_QUERY: Constraint = {
    "anyOf": [
        {"required": ["query"], "properties": {"query": {"type": "string"}}},
        {"required": ["messages"], "properties": {"messages": {"type": "array", "minItems": 1}}},
    ]
}
_PARAMETERS: dict[tuple[str, str], Constraint] = {
    ("/v1/usage", "from"): _ISO_MOMENT,
    ("/v1/usage", "to"): _ISO_MOMENT,
    ("/v1/memory/timeline", "bucket"): {"enum": list(BUCKET_SIZES)},
    # what domain.new_key_id (and the migration that gave older keys ids) makes: any other
    # id names no key (404), and /v1/keys/current is another resource (api.KeyIdConvertor)
    ("/v1/keys/{key_id}", "key_id"): {"pattern": "^key_[0-9a-f]{16}$"},
}


def with_server_rules(
    generate: Callable[[], Document], embedder_names: Sequence[str]
) -> Callable[[], Document]:
    """``generate`` (FastAPI's ``app.openapi``) with the server's own rules added once.

    ``embedder_names`` are the embedding models a request may name; ``""`` picks the
    server's default, as leaving the field out does.
    """
    done: list[Document] = []

    def openapi() -> Document:
        if not done:
            document = generate()
            add_server_rules(document, embedder_names)
            done.append(document)
        return done[0]

    return openapi


def add_server_rules(document: Document, embedder_names: Sequence[str]) -> None:
    schemas = document.get("components", {}).get("schemas", {})
    models: Constraint = {"enum": ["", *embedder_names]}
    for name, properties in _PROPERTIES.items():
        for field, constraint in properties.items():
            _constrain(schemas[name]["properties"][field], constraint)
    for name in _EMBEDDING_BODIES:
        _constrain(schemas[name]["properties"]["embeddings"], models)
    schemas["PrepareRequest"].update(_PREPARE_QUERY)
    schemas["ImportReflectionsRequest"].update(_IMPORT_DATED)
    for name in _CLOSED:
        schemas[name]["additionalProperties"] = False
    _constrain(schemas["KeyCreateRequest"]["properties"]["name"], _showable())
    _add_parameter_rules(document, models)
    _add_security(document)


@functools.cache
def _showable() -> Constraint:
    """A key name holds none of the characters ``schemas.hidden`` names (the Unicode
    categories Cc, Cf, Zl and Zp but the joiners), listed as one class. A character past
    U+FFFF is written as itself: no escape for it is read alike by every regex dialect."""
    points = (c for c in range(_LAST_CODE_POINT + 1) if c not in _SURROGATES)
    runs: list[list[int]] = []
    for code in (c for c in points if wire.hidden(chr(c))):
        if runs and runs[-1][1] == code - 1:
            runs[-1][1] = code
        else:
            runs.append([code, code])
    spelled = "".join(_spell(a) + ("" if a == b else "-" + _spell(b)) for a, b in runs)
    return {"pattern": f"^[^{spelled}]*$"}


def _spell(code: int) -> str:
    return f"\\u{code:04x}" if code <= 0xFFFF else chr(code)


def _add_security(document: Document) -> None:
    document.setdefault("components", {})["securitySchemes"] = copy.deepcopy(_SCHEMES)
    for item in document.get("paths", {}).values():
        for operation in item.values():
            headers = {p["name"].lower() for p in operation.get("parameters", [])}
            if headers >= set(_KEY_HEADERS):
                operation["security"] = [{name: []} for name in _SCHEMES]


def _add_parameter_rules(document: Document, models: Constraint) -> None:
    headers = {EMBEDDING_HEADER.lower(): models} | dict.fromkeys(_KEY_HEADERS, _ONE_VALUE)
    for path, item in document.get("paths", {}).items():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                name = parameter["name"]
                if parameter["in"] == "header":
                    _header(parameter)
                    rule = headers.get(name.lower())
                else:
                    rule = _PARAMETERS.get((path, name))
                if rule is not None:
                    _constrain(parameter["schema"], rule)


def _header(parameter: Constraint) -> None:
    """A header is absent or a string: FastAPI's ``null`` branch would be sent as the
    text ``null``."""
    schema = parameter["schema"]
    strings = [b for b in schema.pop("anyOf", []) if b.get("type") != "null"]
    if strings:
        schema.update(strings[0])


def _constrain(schema: Constraint, constraint: Constraint) -> None:
    """Add ``constraint`` to the branch of ``schema`` it concerns (the string or array
    branch of a nullable field), so ``null`` stays allowed where it was."""
    for branch in _typed_branches(schema, _kind(constraint)):
        branch.update(constraint)


def _kind(constraint: Constraint) -> str:
    if "minItems" in constraint or "items" in constraint:
        return "array"
    if "minimum" in constraint:
        return "integer"
    return "string"


def _typed_branches(schema: Constraint, kind: str) -> Iterable[Constraint]:
    if schema.get("type") == kind:
        return [schema]
    found = [b for b in schema.get("anyOf", []) if b.get("type") == kind]
    if not found:
        raise ValueError(f"no {kind} branch in {schema}")
    return found
