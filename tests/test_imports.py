"""The layering rules of DESIGN.md §2, enforced by walking every import."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mcp_memoryrouter"

# (importer prefix, forbidden import prefix)
RULES = [
    ("mcp_memoryrouter.vault", "mcp_memoryrouter.mcp"),
    ("mcp_memoryrouter.vault", "mcp_memoryrouter.auth"),
    ("mcp_memoryrouter.vault", "mcp_memoryrouter.client"),
    ("mcp_memoryrouter.vault", "mcp_memoryrouter.reflect"),
    ("mcp_memoryrouter.mcp", "mcp_memoryrouter.vault"),
    ("mcp_memoryrouter.auth", "mcp_memoryrouter.vault"),
    ("mcp_memoryrouter.client", "mcp_memoryrouter.vault"),
    ("mcp_memoryrouter.reflect", "mcp_memoryrouter.vault"),
    ("mcp_memoryrouter.schemas", "mcp_memoryrouter.vault"),
    ("mcp_memoryrouter.errors", "mcp_memoryrouter."),
]
# Pure rules: no I/O libraries, no clock reads.
PURE = [
    "rules.counters",
    "rules.window",
    "rules.prepare",
    "rules.date_words",
    "rules.selection",
    "rules.leases",
    "rules.coverage",
    "rules.debt",
    "rules.contract",
    "rules.chunking",
    "search.ranking",
    "rules.dates",
    "rules.access",
    "rules.domain",
]
PURE_FORBIDDEN = ["sqlite3", "time", "os", "httpx2", "fastapi", "starlette", "socket"]
# Only composition roots read configuration.
CONFIG_READERS = {"mcp_memoryrouter.app", "mcp_memoryrouter.vault.app", "mcp_memoryrouter.cli"}


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def all_modules() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in PACKAGE.rglob("*.py")}


def test_layers_import_only_in_the_allowed_direction() -> None:
    violations = [
        f"{mod} imports {imp}"
        for mod, imps in all_modules().items()
        for importer, forbidden in RULES
        if mod.startswith(importer)
        for imp in imps
        if imp.startswith(forbidden)
    ]
    assert violations == []


def test_pure_rule_modules_do_no_io() -> None:
    modules = all_modules()
    violations = [
        f"{name} imports {imp}"
        for name in PURE
        for imp in modules[f"mcp_memoryrouter.vault.{name}"]
        if imp.split(".")[0] in PURE_FORBIDDEN
    ]
    assert violations == []


def test_only_composition_roots_read_settings() -> None:
    readers = {
        mod
        for mod, imps in all_modules().items()
        if "mcp_memoryrouter.config" in imps or "mcp_memoryrouter.config.Settings" in imps
    }
    assert readers <= CONFIG_READERS


def test_the_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from mcp_memoryrouter.vault.service import VaultService\n")
    assert "mcp_memoryrouter.vault.service" in imports_of(bad)
