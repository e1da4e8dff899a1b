"""Outlines of the JSON schemas the tools publish: what a model needs to call a tool and
read its result, without the weight pydantic adds (generated titles, ``anyOf`` with null,
``default: null``, nested ``$defs``).

Input schemas keep every constraint and description; output schemas name each top-level
field and its JSON type. The server still validates results against the full models.

No schema names ``null``: an optional field is optional by being left out of ``required``,
and a result leaves out a top-level field that has no value (``budget.shaped``). A ``type``
array (``["string", "null"]``, pydantic's ``X | None``) is less portable than one type: a
host that maps tool schemas onto a single-type dialect (Gemini's OpenAPI subset) may refuse
the tool, and the MCP Inspector warns of each. Where a field truly takes several types they
are ``anyOf`` branches of one type each.
"""

from __future__ import annotations

from typing import Any

_NULL = {"type": "null"}


def input_outline(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` without titles, defaults of null, and null (``anyOf [X, null]`` is ``X``):
    a parameter that may be null has a default, so it is optional already."""
    defs = schema.get("$defs", {})
    outline = {k: v for k, v in schema.items() if k not in ("$defs", "title")}
    outline["properties"] = {
        name: _lean(_resolve(prop, defs)) for name, prop in schema.get("properties", {}).items()
    }
    return outline


def output_outline(schema: dict[str, Any]) -> dict[str, Any]:
    """The top-level fields of ``schema`` and their JSON types, one level deep; a field that
    may be null is optional (a result leaves it out when it has no value)."""
    defs = schema.get("$defs", {})
    properties = {name: _inline(prop, defs) for name, prop in schema.get("properties", {}).items()}
    outline: dict[str, Any] = {
        "type": "object",
        "properties": {name: _shallow(prop, defs) for name, prop in properties.items()},
    }
    required = [
        name
        for name in schema.get("required", [])
        if "null" not in _json_types(properties[name], defs)
    ]
    if required:
        outline["required"] = required
    return outline


def _inline(prop: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = prop.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return dict(defs[ref.removeprefix("#/$defs/")])
    return prop


def _resolve(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` with every local ``$ref`` replaced by what it names."""
    if isinstance(node, list):
        return [_resolve(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    return {k: _resolve(v, defs) for k, v in _inline(node, defs).items()}


def _lean(node: Any) -> Any:
    if isinstance(node, list):
        return [_lean(item) for item in node]
    if not isinstance(node, dict):
        return node
    lean = {
        k: _lean(v)
        for k, v in node.items()
        if not (k == "title" and isinstance(v, str)) and not (k == "default" and v is None)
    }
    return _without_null(lean)


def _without_null(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with no null alternative: none left in ``anyOf`` (a single remaining branch
    is ``node`` itself) and a ``type`` array split into ``anyOf`` of one type each."""
    kinds = node.get("type")
    if isinstance(kinds, list):
        kinds = [k for k in kinds if k != "null"]
        node = {k: v for k, v in node.items() if k != "type"}
        if len(kinds) == 1:
            node["type"] = kinds[0]
        elif kinds:
            node["anyOf"] = [{"type": k} for k in kinds]
    alternatives = node.get("anyOf")
    if isinstance(alternatives, list) and _NULL in alternatives:
        others = [a for a in alternatives if a != _NULL]
        node = {k: v for k, v in node.items() if k != "anyOf"}
        if len(others) == 1 and isinstance(others[0], dict):
            return {**others[0], **node}
        node["anyOf"] = others
    return node


def _json_types(prop: dict[str, Any], defs: dict[str, Any]) -> list[str]:
    found: list[str] = []
    for alternative in prop.get("anyOf", [prop]):
        alternative = _inline(alternative, defs)
        kind = alternative.get("type", "object" if "properties" in alternative else None)
        kinds = kind if isinstance(kind, list) else [kind]
        found += [k for k in kinds if isinstance(k, str) and k not in found]
    return found


def _one_of(kinds: list[str]) -> dict[str, Any]:
    """The schema of a value of any of ``kinds`` (never null), one type per branch."""
    kinds = [k for k in kinds if k != "null"]
    if len(kinds) == 1:
        return {"type": kinds[0]}
    return {"anyOf": [{"type": k} for k in kinds]} if kinds else {}


def _shallow(prop: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    kinds = _json_types(prop, defs)
    shallow = _one_of(kinds)
    arrays = [a for a in prop.get("anyOf", [prop]) if isinstance(a, dict) and "items" in a]
    items = arrays[0]["items"] if arrays else None
    if kinds == ["array"] or sorted(kinds) == ["array", "null"]:
        item_kinds = _json_types(_inline(items, defs), defs) if isinstance(items, dict) else []
        if item_kinds:
            shallow["items"] = _one_of(item_kinds)
    return shallow
