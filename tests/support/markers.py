"""Markers from what a test uses, so that no file has to remember them.

A test's code, its fixtures' code and every test helper these call (functions and classes
defined under ``tests/``, followed through their globals) are read for the names they use:

- ``browser``: a real Chromium through Playwright;
- ``subprocess``: a process of its own (``subprocess``, the SDK's stdio client: ``serve``,
  ``stdio``, Node, Caddy, the model program);
- ``postgres``: the PostgreSQL server (the ``postgres_databases`` fixture, or the
  ``postgresql`` leg of ``store_backend``);
- ``slow``: any of the two first, a generated-input run (hypothesis, schemathesis), the real
  embedding model, or a module in ``MEASURED`` (slow by its measured time, for the reason
  given there).

The fast subset is ``-m "not slow and not postgres"`` (README, "Tests"). The markers are
registered in pyproject.toml.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest

_BROWSER = {"sync_playwright", "async_playwright"}
_PROCESS = {"subprocess", "StdioServerParameters", "open_process", "create_subprocess_exec"}
_MODEL = {"LocalMiniLM"}
# Modules slow by what they measure, not by what they use: the module, and why (with the
# time it took with two processes on the two-core development machine)
MEASURED = {
    "tests/mcp/test_result_budget.py": (
        "every tool result within the budget over 5,000 long memories, filled over HTTP,"
        " and a server built for each budget: 30 s"
    ),
}


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _ours(value: object) -> bool:
    return str(getattr(value, "__module__", "") or "").startswith("tests")


def _names(root: Callable[..., Any], seen: set[int]) -> set[str]:
    """Every global name ``root`` and the test helpers it reaches use."""
    found: set[str] = set()
    todo: list[Any] = [root]
    while todo:
        item = inspect.unwrap(todo.pop())
        if id(item) in seen:
            continue
        seen.add(id(item))
        if inspect.isclass(item):
            todo += [
                v for v in vars(item).values() if inspect.isfunction(v) or isinstance(v, property)
            ]
            continue
        if isinstance(item, property):
            todo += [f for f in (item.fget, item.fset) if f is not None]
            continue
        code = getattr(item, "__code__", None)
        if code is None:
            continue
        spaces = getattr(item, "__globals__", {})
        for names in (c.co_names for c in _code_objects(code)):
            for name in names:
                found.add(name)
                value = spaces.get(name)
                if (
                    value is not None
                    and _ours(value)
                    and (inspect.isfunction(value) or inspect.isclass(value))
                ):
                    todo.append(value)
    return found


def derive(item: pytest.Item) -> set[str]:
    """The markers ``item`` earns by what it uses."""
    function = getattr(item, "function", None)
    if function is None:
        return set()
    seen: set[int] = set()
    names = _names(function, seen)
    info = getattr(item, "_fixtureinfo", None)
    fixtures = set(getattr(item, "fixturenames", ()))
    callspec = getattr(item, "callspec", None)
    # a fixture parametrized by the names of others (``request.getfixturevalue(param)``)
    chosen = {v for v in (callspec.params.values() if callspec else ()) if isinstance(v, str)}
    for name in fixtures | chosen:
        definitions = info.name2fixturedefs.get(name) if info else None
        if definitions is None and name in chosen:
            definitions = item.session._fixturemanager.getfixturedefs(name, item)
        for definition in definitions or ():
            names |= _names(definition.func, seen)
    marks: set[str] = set()
    if names & _BROWSER:
        marks.add("browser")
    if names & _PROCESS:
        marks.add("subprocess")
    if "postgres_databases" in fixtures or (
        callspec is not None and callspec.params.get("store_backend") == "postgresql"
    ):
        marks.add("postgres")
    generated = getattr(function, "is_hypothesis_test", False) or any(
        getattr(value, "__name__", "") == "schemathesis"
        for value in vars(getattr(item, "module", None) or types).values()
    )
    measured = item.nodeid.split("::")[0] in MEASURED
    if marks & {"browser", "subprocess"} or generated or names & _MODEL or measured:
        marks.add("slow")
    return marks


def apply(items: list[pytest.Item]) -> None:
    for item in items:
        have = {m.name for m in item.iter_markers()}
        for name in sorted(derive(item) - have):
            item.add_marker(name)
