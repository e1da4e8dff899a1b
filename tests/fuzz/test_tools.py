"""Hypothesis over every MCP tool's arguments, through the SDK client: whatever a model
sends, the answer is a result or a clean tool error, never a crash or an internal error."""

from __future__ import annotations

import logging
from datetime import UTC, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.tools import ToolHarness, assert_clean, call

TOOLS = [
    "search_memories",
    "date_search_memories",
    "inspect_memory",
    "memory_status",
    "search",
    "fetch",
    "store_memory",
    "consolidate_memories",
    "commit_reflections",
    "delete_memories",
    "forget_all_memories",
]
ODD_TEXT = st.sampled_from(
    [
        "",
        " ",
        "yesterday",
        "9999-99-99",
        "9999-12-31T23:00:00-05:00",
        "0001-01-01T00:00:00+05:00",
        "\ud800",
        "a\udfffb",
        "\x00",
        "cb_0000",
        "00000000-0000-0000-0000-000000000000",
        "DELETE ALL MEMORIES",
        "x" * 20_000,
    ]
)
DATES = st.one_of(
    st.dates().map(lambda d: d.isoformat()),
    st.datetimes(timezones=st.sampled_from([None, UTC, timezone(timedelta(hours=-14))])).map(
        lambda d: d.isoformat()
    ),
)
NUMBER = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63),
    st.sampled_from([0, 1, 2, 3, 10, 11, 250, 251, 999, 1000, 200_000]),
    st.floats(allow_nan=True, allow_infinity=True),
)
JsonSchema = dict[str, Any]


class Shapes:
    """Values shaped by a tool's input schema, mostly valid, often at or just past its
    bounds, and now and then anything at all. ``known`` ids are real rows of the vault."""

    def __init__(self, defs: JsonSchema, known: list[str]) -> None:
        self.defs = defs
        self.text = st.one_of(st.text(max_size=40), ODD_TEXT, DATES, st.sampled_from(known))
        scalar = st.one_of(st.none(), st.booleans(), NUMBER, self.text)
        self.anything = st.recursive(
            scalar,
            lambda inner: st.one_of(
                st.lists(inner, max_size=4),
                st.dictionaries(st.sampled_from(["text", "importance", "x"]), inner, max_size=3),
            ),
            max_leaves=8,
        )

    def value(self, schema: JsonSchema) -> st.SearchStrategy[Any]:
        if not schema:
            return self.anything
        fitting = self.shaped(schema)
        return st.one_of(fitting, fitting, fitting, self.anything)

    def shaped(self, schema: JsonSchema) -> st.SearchStrategy[Any]:
        if "$ref" in schema:
            return self.shaped(self.defs[schema["$ref"].rsplit("/", 1)[-1]])
        if "anyOf" in schema:
            return st.one_of([self.shaped(option) for option in schema["anyOf"]])
        if "enum" in schema or "const" in schema:
            return st.sampled_from(schema.get("enum", [schema.get("const")]))
        kind = schema.get("type")
        if kind == "integer":
            low, high = schema.get("minimum", -1000), schema.get("maximum", 1000)
            inside = st.integers(low, high)
            return st.one_of(inside, inside, st.sampled_from([low - 1, high + 1]))
        if kind == "array":
            low = schema.get("minItems", 0)
            return st.lists(self.value(schema.get("items", {})), min_size=low, max_size=low + 3)
        if kind == "object":
            return self.arguments(schema)
        simple = {"string": self.text, "number": NUMBER, "boolean": st.booleans()}
        return simple.get(str(kind), st.none())

    def arguments(self, schema: JsonSchema) -> st.SearchStrategy[dict[str, Any]]:
        properties: JsonSchema = schema.get("properties", {})
        required = set(schema.get("required", []))
        fields = {name: self.value(p) for name, p in properties.items()}
        return st.fixed_dictionaries(
            {name: value for name, value in fields.items() if name in required},
            optional={
                **{name: value for name, value in fields.items() if name not in required},
                "unexpected": self.anything,
            },
        )


@pytest.mark.parametrize("name", TOOLS)
def test_any_arguments_give_a_result_or_a_clean_tool_error(
    tools: ToolHarness, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    listed = {t.name: t for t in tools.portal.call(tools.client.list_tools).tools}
    schema = listed[name].input_schema
    shapes = Shapes(schema.get("$defs", {}), tools.ids)

    @settings(
        max_examples=50,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(arguments=shapes.arguments(schema))
    def fuzz(arguments: dict[str, Any]) -> None:
        assert_clean(name, call(tools, name, arguments))

    with caplog.at_level(logging.WARNING):
        fuzz()
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


# What the fuzzer found: each of these crashed the tool ("Error executing tool <name>",
# logged as an unexpected exception) before the fix.
FOUND = [
    ("store_memory", {"content": "a fact", "date": "\ud800"}),
    ("store_memory", {"content": "a fact", "date": "9999-12-31T23:00:00-05:00"}),
    ("search_memories", {"query": "x", "from_date": "\udfff"}),
    ("search_memories", {"query": "x" * 20_000}),
    ("date_search_memories", {"from_date": "2026-01-01", "query": "x" * 20_000}),
    ("delete_memories", {"ids": ["\ud800"]}),
    ("inspect_memory", {"memory_id": "x" * 300}),
    ("fetch", {"id": "x" * 300}),
    ("commit_reflections", {"batch_id": "b" * 300, "entries": [{"text": "t", "importance": 5}]}),
]


@pytest.mark.parametrize(("name", "arguments"), FOUND)
def test_arguments_that_once_crashed_a_tool_are_clean_errors(
    tools: ToolHarness, name: str, arguments: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        result = call(tools, name, arguments)
    assert result.is_error
    assert_clean(name, result)
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
