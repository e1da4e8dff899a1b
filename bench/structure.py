"""The package's shape, measured from its source: files and lines, the largest modules and
functions, and the import table between its parts.

    python -m bench.structure [--root DIR] [--most N]

``--root`` is a checkout (default: this one), so two commits can be set side by side::

    git worktree add /tmp/before <rev> && python -m bench.structure --root /tmp/before

A part is a top-level package or a package one level down (``vault.store``, ``auth``);
the small top-level modules every part stands on count as one, ``foundation``, and imports
of it are left out of the table. The table counts, for each pair of
parts, the names one imports from the other (``from x import a, b`` is two; ``import x``
one), and the modules imported from.
"""

from __future__ import annotations

import argparse
import ast
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "mcp_memoryrouter"


@dataclass(frozen=True)
class Function:
    where: str
    name: str
    lines: int


def modules(root: Path) -> dict[str, Path]:
    """Dotted name (without the package prefix) -> file."""
    base = root / PACKAGE
    found = {}
    for path in sorted(base.rglob("*.py")):
        parts = list(path.relative_to(base).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def part(name: str) -> str:
    """The part a module belongs to: ``vault.store.sqlite.x`` -> ``vault.store``; a module
    directly in ``vault/`` or ``auth/`` -> ``vault`` or ``auth``."""
    pieces = name.split(".")
    if len(pieces) > 1 and ".".join(pieces[:2]) in SUBPACKAGES:
        return ".".join(pieces[:2])
    if pieces[0] in FOUNDATION:
        return "foundation"
    return pieces[0]


# the small modules every part stands on (tests/test_layers.py's lowest layers)
FOUNDATION = {"", "errors", "limits", "tokens", "private", "asgi", "ratelimit", "forwarding"}
FOUNDATION |= {"accesslog", "schemas", "config", "abilities", "edge", "pages"}


SUBPACKAGES: set[str] = set()  # ``vault.store``, ``auth.server``: packages one level down


def functions(tree: ast.AST, where: str) -> list[Function]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            end = node.end_lineno or node.lineno
            out.append(Function(f"{where}:{node.lineno}", node.name, end - node.lineno + 1))
    return out


def imports(tree: ast.AST, name: str, is_package: bool) -> list[tuple[str, int]]:
    """(imported module inside the package, how many names) for each import."""
    here = name.split(".") if name else []
    package = here if is_package else here[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, *(node.module.split(".") if node.module else [])])
                out.append((target, len(node.names)))
            elif node.module and (node.module == PACKAGE or node.module.startswith(PACKAGE + ".")):
                out.append((node.module[len(PACKAGE) + 1 :], len(node.names)))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE + "."):
                    out.append((alias.name[len(PACKAGE) + 1 :], 1))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--most", type=int, default=12)
    args = parser.parse_args()
    found = modules(args.root)
    SUBPACKAGES.update(
        name for name, path in found.items() if name.count(".") == 1 and path.name == "__init__.py"
    )
    sizes: dict[str, int] = {}
    code: dict[str, int] = {}
    every: list[Function] = []
    names: Counter[tuple[str, str]] = Counter()
    sources: dict[tuple[str, str], set[str]] = defaultdict(set)
    for name, path in found.items():
        text = path.read_text()
        sizes[name] = len(text.splitlines())
        code[name] = sum(
            1 for line in text.splitlines() if line.strip() and not line.strip().startswith("#")
        )
        tree = ast.parse(text)
        every.extend(functions(tree, str(path.relative_to(args.root))))
        for target, count in imports(tree, name, path.name == "__init__.py"):
            a, b = part(name), part(target)
            if a != b:
                names[(a, b)] += count
                sources[(a, b)].add(target)
    lengths = sorted(f.lines for f in every)
    print(
        f"files {len(found)}, physical lines {sum(sizes.values())}, code lines {sum(code.values())}"
    )
    over40 = sum(1 for n in lengths if n > 40)
    share = 100 * over40 / len(lengths)
    print(
        f"functions {len(lengths)}: median {statistics.median(lengths):.0f}, "
        f"p90 {lengths[int(0.9 * len(lengths))]}, > 40 lines {over40} ({share:.1f} %)"
    )
    print("\nlargest modules (physical lines)")
    for name, lines in sorted(sizes.items(), key=lambda kv: -kv[1])[: args.most]:
        print(f"  {lines:5d}  {name}")
    print("\nlongest functions")
    for f in sorted(every, key=lambda f: -f.lines)[: args.most]:
        print(f"  {f.lines:4d}  {f.name}  {f.where}")
    print("\nimports between parts (names imported / modules imported from)")
    for (a, b), count in sorted(names.items(), key=lambda kv: (kv[0][0], -kv[1])):
        if b == "foundation":
            continue
        print(f"  {a:>14} -> {b:<14} {count:4d} / {len(sources[(a, b)])}")
    into_app = [(b, names[(a, b)], len(sources[(a, b)])) for (a, b) in names if a == "app"]
    print(
        f"\napp imports {sum(n for _, n, _ in into_app)} names from "
        f"{sum(m for _, _, m in into_app)} modules in {len(into_app)} parts"
    )


if __name__ == "__main__":
    main()
