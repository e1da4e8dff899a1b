"""Outlines of the JSON schemas the tools publish: what a model needs to call a tool and
read its result, without the weight pydantic adds (generated titles, ``anyOf`` with null,
``default: null``, nested ``$defs``).

Input schemas keep every constraint and description; output schemas name each top-level
field and its JSON type. The server still validates results against the full models.
"""

from __future__ import annotations

from typing import Any

_NULL = {"type": "null"}


def input_outline(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` without titles, defaults of null, and with ``anyOf [X, null]`` folded
    into ``X`` with a type list."""
    defs = schema.get("$defs", {})
    outline = {k: v for k, v in schema.items() if k not in ("$defs", "title")}
    outline["properties"] = {
        name: _lean(_resolve(prop, defs)) for name, prop in schema.get("properties", {}).items()
    }
    return outline


def output_outline(schema: dict[str, Any]) -> dict[str, Any]:
    """The top-level fields of ``schema`` and their JSON types, one level deep."""
    defs = schema.get("$defs", {})
    outline: dict[str, Any] = {
        "type": "object",
        "properties": {
            name: _shallow(_inline(prop, defs), defs)
            for name, prop in schema.get("properties", {}).items()
        },
    }
    if schema.get("required"):
        outline["required"] = schema["required"]
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
    alternatives = lean.get("anyOf")
    if isinstance(alternatives, list) and len(alternatives) == 2 and _NULL in alternatives:
        (other,) = [a for a in alternatives if a != _NULL]
        if isinstance(other, dict) and isinstance(other.get("type"), str):
            del lean["anyOf"]
            lean = {**other, **lean, "type": [other["type"], "null"]}
    return lean


def _json_types(prop: dict[str, Any], defs: dict[str, Any]) -> list[str]:
    found: list[str] = []
    for alternative in prop.get("anyOf", [prop]):
        alternative = _inline(alternative, defs)
        kind = alternative.get("type", "object" if "properties" in alternative else None)
        kinds = kind if isinstance(kind, list) else [kind]
        found += [k for k in kinds if isinstance(k, str) and k not in found]
    return found


def _shallow(prop: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    kinds = _json_types(prop, defs)
    if not kinds:
        return {}
    shallow: dict[str, Any] = {"type": kinds[0] if len(kinds) == 1 else kinds}
    arrays = [a for a in prop.get("anyOf", [prop]) if isinstance(a, dict) and "items" in a]
    items = arrays[0]["items"] if arrays else None
    if "array" in kinds and isinstance(items, dict):
        item_kinds = _json_types(_inline(items, defs), defs)
        if item_kinds:
            shallow["items"] = {"type": item_kinds[0] if len(item_kinds) == 1 else item_kinds}
    return shallow
