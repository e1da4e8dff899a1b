"""The layers of the package (docs/architecture.md), enforced over every import.

Each module belongs to one layer; a layer imports only the layers it stands on, listed
explicitly below, so a lower layer never imports a higher one and the two sides (the vault,
and the clients of its HTTP API: auth, mcp, reflect) never import each other. Imports are
read from the source: ``import`` and ``from`` at any depth, relative ones resolved, and
``importlib.import_module``/``__import__`` with a literal name (any other name is itself a
violation). Only composition roots read the environment, and the vault's pure rules read
no clock and do no I/O. Each check is shown failing on a deliberate violation at the end.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mcp_memoryrouter"
ROOT = "mcp_memoryrouter"

# layer: (its modules, by prefix; the layers it may import), lowest first
LAYERS: dict[str, tuple[list[str], list[str]]] = {
    "foundation": (
        [
            *["", "errors", "limits", "tokens", "private", "accesslog", "abilities", "words"],
            "allocator",  # how much freed memory the process keeps (glibc's malloc)
            # the HTTP edge: loopback, a request's Host and Origin, bodies, whole answers,
            # token buckets, CORS, what gives a relayed request away
            "edge",
        ],
        [],
    ),
    # the one page system: the shell, escaping and security headers of every HTML page, the
    # explorer's and the sign-in pages' alike (below both: the explorer stands on auth)
    "pages": (["pages"], ["foundation"]),
    "schemas": (["schemas"], ["foundation"]),
    # every database the server keeps: connections, pools, the dialect, one migration runner
    "db": (["db"], ["foundation"]),
    "config": (["config"], ["foundation"]),
    # /metrics: request counters around the whole server, the store read through a callable
    "metrics": (["metrics"], ["foundation"]),
    # the vault side
    "rules": (["vault.rules"], ["foundation"]),
    "search": (["vault.search"], ["foundation", "rules"]),
    "store": (["vault.store"], ["foundation", "db", "rules", "search"]),
    "service": (
        ["vault", "vault.service", "vault.hybrid", "vault.memory_keys", "vault.indexer"],
        ["foundation", "rules", "search", "store"],
    ),
    "http": (["vault.http"], ["foundation", "schemas", "rules", "service"]),
    "vault root": (
        ["vault.app"],
        ["foundation", "schemas", "config", "rules", "search", "store", "service", "http"],
    ),
    # the client side: the vault only over HTTP
    "client": (["client"], ["foundation", "schemas"]),
    "auth": (["auth"], ["foundation", "pages", "schemas", "client"]),
    # auth/ by role, each on the scopes, claims, metadata and display above (the "auth" line):
    # the state the authorization server and the explorer keep; the token check on /mcp; the
    # identity providers' sign-in; the authorization server with its pages. The resource side
    # and sign-in know nothing of the server, and no part reaches past another's entry
    # (AUTH_ENTRIES below).
    "auth state": (["auth.state"], ["foundation", "db", "schemas", "client", "auth"]),
    "auth resource": (["auth.resource"], ["foundation", "pages", "schemas", "client", "auth"]),
    "auth signin": (["auth.signin"], ["foundation", "schemas", "client", "auth"]),
    "auth server": (
        ["auth.server"],
        [
            *["foundation", "db", "pages", "schemas", "client", "auth"],
            *["auth state", "auth resource", "auth signin"],
        ],
    ),
    "reflect": (["reflect"], ["foundation", "schemas", "client"]),
    # memories moved in and out: a vault as JSONL, a chat history brought in
    "transfer": (["transfer"], ["foundation", "schemas", "client"]),
    # reflect_memories runs the consolidation loop's own steps with the host's model
    "mcp": (
        ["mcp_server"],
        ["foundation", "schemas", "client", "auth", "auth resource", "reflect"],
    ),
    "reflect cli": (["reflect.cli"], ["foundation", "schemas", "client", "reflect", "transfer"]),
    # the chat proxy: provider calls with memory, the vault over HTTP like the MCP side
    "proxy": (["proxy"], ["foundation", "schemas", "client"]),
    # the server's reflector: the consolidation loop with a provider's model, the vault over
    # the HTTP client (carried in process), the provider's shapes from the chat proxy's formats
    "reflector": (["reflector"], ["foundation", "schemas", "client", "reflect", "proxy"]),
    # the explorer's pages: the vault over HTTP too; its sessions seal keys as auth does,
    # and its upload imports an export as the import command does (transfer)
    "ui": (
        ["ui"],
        [
            "foundation",
            "db",
            "pages",
            "schemas",
            "client",
            "auth",
            "auth state",
            "auth server",
            "transfer",
        ],
    ),
    # composition roots
    "startup": (["startup"], ["foundation"]),
    # the connections serve accepts: deadlines, a cap, the proxies trusted
    "serve": (["edge.connections"], ["foundation"]),
    "app": (
        ["app"],
        [
            *["foundation", "schemas", "config", "client", "auth", "mcp", "proxy", "ui"],
            *["auth state", "auth resource", "auth signin", "auth server"],
            *["service", "vault root", "metrics", "reflector"],
        ],
    ),
    "cli": (
        ["cli", "__main__", "commands"],
        [
            *["foundation", "schemas", "config", "rules", "store", "service", "http"],
            *["vault root", "client", "reflect", "reflect cli", "startup", "serve", "app"],
        ],
    ),
}
# The parts of auth/ entered only through one module: (the entry, the modules inside the
# part besides its own folder). A module outside a part imports the entry, never what is
# behind it (the sign-in and consent pages are the server's own).
AUTH_ENTRIES: dict[str, tuple[str, list[str]]] = {
    "auth.resource": ("auth.resource", []),
    "auth.signin": ("auth.signin", []),
    "auth.server": ("auth.server.embedded", []),
}
# Where settings come from the environment; everything else is handed its values.
ENVIRONMENT_READERS = ["config", "app", "vault.app", "cli", "commands", "reflect.cli"]
# The pure rules: time comes in as an argument, and nothing here touches the outside.
PURE = [
    "abilities",
    "vault.rules",
    "vault.search.ranking",
    "vault.search.features",
    "proxy.formats",
    "proxy.events",
    "proxy.options",
    "proxy.routes",
    "pages.document",
    "pages.headers",
    "ui.views",
    "ui.render",
    "ui.render_memory",
    "ui.render_overview",
    "ui.render_search",
    "ui.render_tidy",
    "ui.render_writing",
]
IO_LIBRARIES = ["sqlite3", "psycopg", "psycopg_pool", "httpx2", "socket", "subprocess", "os"]
IO_LIBRARIES += ["fastapi", "starlette", "threading", "asyncio", "anyio", "time"]
# The database drivers: imported by the connection layer (db), and by the vault's store for
# what only one database does (its errors, SQL composition, FTS5); nothing else imports them,
# and only the connection layer opens a connection or a pool.
DRIVERS = ["sqlite3", "psycopg", "psycopg_pool"]
DRIVER_USERS = ["db", "vault.store"]
OPENERS = {"connect", "ConnectionPool", "AsyncConnectionPool", "NullConnectionPool"}
SCOPE_LITERAL = re.compile(r"memories:(read|write|reflect|delete)\b")
POLICY_LOADER = "auth.scopes"  # reads scopes.yaml, and names the scopes it knows
# The security headers of every HTML answer are written in one module (the explorer's, the
# sign-in pages', the refusals' and the stylesheet's), never by a page of its own.
HEADERS_MODULE = "pages.headers"
SECURITY_HEADERS = {
    *["content-security-policy", "x-frame-options", "x-content-type-options"],
    *["referrer-policy", "cross-origin-opener-policy"],
}
# The edge decides once what is loopback (edge/addresses.py: an address's loopback and
# IPv4-mapped attributes are read there alone) and reads request bodies once (edge/body.py:
# nothing else takes "http.request" messages from an ASGI receive).
EDGE_RULES = {
    "edge.addresses": ({"is_loopback", "ipv4_mapped"}, set()),
    "edge.body": (set(), {"http.request"}),
}
CLOCK_CALLS = {"now", "utcnow", "today", "time", "time_ns", "monotonic", "monotonic_ns"}


@dataclass(frozen=True)
class Module:
    name: str  # dotted, below the package: "vault.rules.leases" ("" is the package itself)
    is_package: bool
    tree: ast.Module


@functools.cache
def _parsed(path: Path, changed_ns: int) -> ast.Module:
    """A file's tree, parsed once while it is unchanged (every planted case reads the whole
    package again; no check changes a tree)."""
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def modules(root: Path = PACKAGE) -> list[Module]:
    found = []
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found.append(Module(".".join(parts), is_package, _parsed(path, path.stat().st_mtime_ns)))
    return found


def within(name: str, prefix: str) -> bool:
    return (prefix == "" and name == "") or name == prefix or name.startswith(prefix + ".")


@functools.cache
def layer_of(name: str) -> str:
    """The layer whose prefix matches ``name`` most closely."""
    best, length = "", -1
    for layer, (prefixes, _) in LAYERS.items():
        for prefix in prefixes:
            if within(name, prefix) and len(prefix) > length:
                best, length = layer, len(prefix)
    if length < 0:
        raise AssertionError(f"{ROOT}.{name} is in no layer: add it to LAYERS")
    return best


@functools.cache
def nodes(module: Module) -> tuple[ast.AST, ...]:
    """Every node of ``module``'s tree, walked once (every check, on every planted case, reads
    every module; walking the trees again each time was most of this file's time)."""
    return tuple(ast.walk(module.tree))


@functools.cache
def imported(module: Module) -> tuple[tuple[str, int], ...]:
    """(absolute dotted name, line) of everything ``module`` imports; a dynamic import of a
    name that is not a literal yields ``"<dynamic>"``."""
    return tuple(_imported(module))


def _imported(module: Module) -> Iterator[tuple[str, int]]:
    here = module.name.split(".") if module.name else []
    package = here if module.is_package else here[:-1]
    for node in nodes(module):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                parent = ".".join([ROOT, *base, *([node.module] if node.module else [])])
            else:
                parent = node.module or ""
            yield parent, node.lineno
            for alias in node.names:  # ``from package import module``
                yield f"{parent}.{alias.name}", node.lineno
        elif isinstance(node, ast.Call) and _is_dynamic_import(node.func):
            argument = node.args[0] if node.args else None
            if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                yield argument.value, node.lineno
            else:
                yield "<dynamic>", node.lineno


def _is_dynamic_import(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in ("__import__", "import_module")
    return isinstance(func, ast.Attribute) and func.attr == "import_module"


def internal(name: str, known: set[str]) -> str | None:
    """``name`` as a module of the package (dropping a trailing attribute), else None."""
    if name != ROOT and not name.startswith(ROOT + "."):
        return None
    inner = name.removeprefix(ROOT).removeprefix(".")
    while inner not in known and "." in inner:
        inner = inner.rsplit(".", 1)[0]
    return inner if inner in known else ""


def layer_violations(found: list[Module]) -> list[str]:
    known = {m.name for m in found}
    problems: dict[str, None] = {}  # in order, once each
    for module in found:
        layer = layer_of(module.name)
        allowed = {layer, *LAYERS[layer][1]}
        for name, line in imported(module):
            where = f"{module.name}:{line}"
            if name == "<dynamic>":
                problems[f"{where} imports a module whose name is computed"] = None
                continue
            target = internal(name, known)
            if target is not None and layer_of(target) not in allowed:
                shown = target or ROOT
                problems[f"{where} ({layer}) imports {shown} ({layer_of(target)})"] = None
    return list(problems)


def entry_violations(found: list[Module]) -> list[str]:
    known = {m.name for m in found}
    problems: dict[str, None] = {}
    for module in found:
        for name, line in imported(module):
            target = internal(name, known) if name != "<dynamic>" else None
            for part, (entry, members) in AUTH_ENTRIES.items():
                inside = any(within(module.name, m) for m in [part, *members])
                if target and within(target, part) and target not in (part, entry) and not inside:
                    problems[f"{module.name}:{line} imports {target} past {entry}"] = None
    return list(problems)


def environment_violations(found: list[Module]) -> list[str]:
    return [
        problem
        for module in found
        if not any(within(module.name, root) for root in ENVIRONMENT_READERS)
        for problem in _environment_reads(module)
    ]


@functools.cache
def _environment_reads(module: Module) -> tuple[str, ...]:
    """Where ``module`` reads the environment (once a module: every planted case asks again
    of the whole package)."""
    problems = []
    for node in nodes(module):
        reads = (
            (isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb"))
            or (
                isinstance(node, ast.ImportFrom)
                and node.module == "os"
                and any(a.name in ("environ", "getenv", "environb") for a in node.names)
            )
            or (
                isinstance(node, ast.ImportFrom)
                and (node.module or "").startswith("pydantic_settings")
            )
        )
        if reads:
            problems.append(f"{module.name}:{getattr(node, 'lineno', 0)} reads the environment")
    return tuple(problems)


def purity_violations(found: list[Module]) -> list[str]:
    problems = []
    for module in found:
        if not any(within(module.name, pure) for pure in PURE):
            continue
        for name, line in imported(module):
            if any(within(name, library) for library in IO_LIBRARIES):
                problems.append(f"{module.name}:{line} imports {name}")
        for node in nodes(module):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in CLOCK_CALLS
            ):
                problems.append(f"{module.name}:{node.lineno} reads a clock ({node.func.attr})")
    return problems


def _opens(func: ast.expr) -> bool:
    """A call of a driver's ``connect`` (``sqlite3.connect``, ``psycopg.Connection.connect``)
    or of a pool class."""
    if isinstance(func, ast.Name):
        return func.id in OPENERS - {"connect"}
    if not isinstance(func, ast.Attribute) or func.attr not in OPENERS:
        return False
    if func.attr != "connect":
        return True
    owner = ast.unparse(func.value)
    return owner.split(".")[0] in DRIVERS or owner.endswith("Connection")


def database_violations(found: list[Module]) -> list[str]:
    problems = []
    for module in found:
        if within(module.name, "db"):
            continue
        may_import = any(within(module.name, user) for user in DRIVER_USERS)
        for name, line in imported(module):
            driver = any(within(name, library) for library in DRIVERS)
            if driver and (not may_import or name.rsplit(".", 1)[-1] in OPENERS):
                problems.append(f"{module.name}:{line} imports {name}")
        problems += _opened(module)
    return problems


@functools.cache
def _opened(module: Module) -> tuple[str, ...]:
    return tuple(
        f"{module.name}:{node.lineno} opens a database connection"
        for node in nodes(module)
        if isinstance(node, ast.Call) and _opens(node.func)
    )


def header_violations(found: list[Module]) -> list[str]:
    return [
        f"{module.name}:{node.lineno} sets {node.value!r}"
        for module in found
        if module.name != HEADERS_MODULE
        for node in nodes(module)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, (str, bytes))
        and _text(node.value).lower() in SECURITY_HEADERS
    ]


def edge_violations(found: list[Module]) -> list[str]:
    return [problem for module in found for problem in _edge_reads(module)]


@functools.cache
def _edge_reads(module: Module) -> tuple[str, ...]:
    problems = []
    for owner, (attributes, literals) in EDGE_RULES.items():
        if module.name == owner:
            continue
        for node in nodes(module):
            if isinstance(node, ast.Attribute) and node.attr in attributes:
                problems.append(f"{module.name}:{node.lineno} reads .{node.attr} ({owner})")
            elif isinstance(node, ast.Constant) and node.value in literals:
                problems.append(f"{module.name}:{node.lineno} reads a body ({owner})")
    return tuple(problems)


def _text(value: str | bytes) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value


def scope_violations(found: list[Module]) -> list[str]:
    return [
        f"{module.name}:{node.lineno} names {node.value!r}"
        for module in found
        if module.name != POLICY_LOADER
        for node in nodes(module)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and SCOPE_LITERAL.search(node.value)
    ]


# Front doors: what stands behind one is reached, from the modules around it, only through
# it. On the vault's HTTP side that is the front (vault/http/front.VaultAPI, where every call
# is admitted): the REST routes, the admission middleware and the in-process carrier are its
# adapters, and none of them calls a use case itself.
FRONT_DOORS: dict[str, tuple[list[str], list[str]]] = {
    # the door: (the modules that come through it, what stands behind it)
    "vault.http.front": (
        ["vault.http"],
        [
            *["vault.service", "vault.memory_keys", "vault.hybrid", "vault.indexer"],
            *["vault.store", "vault.search"],
        ],
    ),
}


def front_door_violations(found: list[Module]) -> list[str]:
    known = {m.name for m in found}
    problems: dict[str, None] = {}  # in order, once each
    for door, (around, behind) in FRONT_DOORS.items():
        for module in found:
            if within(module.name, door) or not any(within(module.name, a) for a in around):
                continue
            for name, line in imported(module):
                target = internal(name, known)
                if target is not None and any(within(target, b) for b in behind):
                    problems[f"{module.name}:{line} imports {target}, behind {door}"] = None
    return list(problems)


# --- the package as it is -------------------------------------------------------------------


def test_every_module_belongs_to_a_layer_and_layers_stand_only_on_lower_ones() -> None:
    order = list(LAYERS)
    for layer, (_, below) in LAYERS.items():
        assert all(order.index(b) < order.index(layer) for b in below), layer
    assert layer_violations(modules()) == []


def test_the_parts_of_auth_are_entered_only_through_their_entries() -> None:
    assert entry_violations(modules()) == []


def test_only_composition_roots_read_the_environment() -> None:
    assert environment_violations(modules()) == []


def test_the_pure_rules_read_no_clock_and_do_no_io() -> None:
    assert purity_violations(modules()) == []


def test_only_the_connection_layer_opens_databases() -> None:
    """One connection layer (db/) for everything the server stores: only it and the vault's
    store import a database driver, and only it opens a connection or a pool."""
    assert database_violations(modules()) == []


def test_security_headers_are_written_in_one_place() -> None:
    assert header_violations(modules()) == []


def test_the_edge_decides_loopback_and_reads_bodies_in_one_place_each() -> None:
    assert edge_violations(modules()) == []


def test_no_scope_is_named_outside_the_policy() -> None:
    """A tool's scope is written in scopes.yaml alone (read by auth/scopes.py)."""
    assert scope_violations(modules()) == []


def test_what_stands_behind_a_front_door_is_reached_only_through_it() -> None:
    assert front_door_violations(modules()) == []


# --- each check fails on a deliberate violation ---------------------------------------------


def planted(tmp_path: Path, files: dict[str, str]) -> list[Module]:
    """The package's modules with ``files`` (path below the package: source) put in."""
    found = {m.name: m for m in modules()}
    root = tmp_path / f"planted{len(list(tmp_path.iterdir()))}"
    for relative, source in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    for module in modules(root):
        found[module.name] = module
    return list(found.values())


SERVER_IMPORT = "from mcp_memoryrouter.auth.server.provider import Lifetimes\n"


@pytest.mark.parametrize(
    ("where", "source", "expected"),
    [
        ("vault/rules/leases.py", "from mcp_memoryrouter.app import Server\n", "imports app"),
        (
            "vault/service.py",
            "import mcp_memoryrouter.mcp_server.server\n",
            "imports mcp_server.server",
        ),
        (
            "schemas.py",
            "from mcp_memoryrouter.mcp_server import budget\n",
            "imports mcp_server.budget",
        ),
        ("client.py", "from mcp_memoryrouter.auth.scopes import Scope\n", "imports auth.scopes"),
        (
            "auth/resource/challenge.py",
            "from mcp_memoryrouter.mcp_server.binding import Vault\n",
            "imports mcp_server.",
        ),
        ("mcp_server/binding.py", "from ..vault.service import VaultService\n", "vault.service"),
        ("vault/search/ranking.py", "from ..store import base\n", "imports vault.store.base"),
        ("vault/store/base.py", "from ..http import api\n", "imports vault.http.api"),
        (
            "reflect/loop.py",
            "import importlib\nimportlib.import_module('mcp_memoryrouter.vault.service')\n",
            "imports vault.service",
        ),
        ("mcp_server/server.py", "import importlib\nimportlib.import_module(name)\n", "computed"),
        ("pages/document.py", "from mcp_memoryrouter.auth.display import shown\n", "imports auth."),
        ("pages/headers.py", "from mcp_memoryrouter.ui import render\n", "imports ui.render"),
        ("pages/document.py", "from mcp_memoryrouter import schemas\n", "imports schemas"),
        # auth/ by role: the resource side and sign-in know nothing of the server, the state
        # nothing of any role, the resource side nothing of the state, the base nothing above
        ("auth/resource/challenge.py", SERVER_IMPORT, "imports auth.server.provider"),
        ("auth/signin/oidc.py", "from ..server import embedded\n", "imports auth.server.embedded"),
        ("auth/state/store.py", "from ..server.signing import Signer\n", "auth.server.signing"),
        ("auth/state/sealing.py", "from ..resource import protect\n", "imports auth.resource"),
        ("auth/resource/memory_keys.py", "from ..state import store\n", "auth.state.store"),
        ("auth/scopes.py", "from mcp_memoryrouter.auth.signin import Identity\n", "auth.signin"),
        ("mcp_server/binding.py", SERVER_IMPORT, "imports auth.server.provider"),
        ("ui/explorer.py", "from mcp_memoryrouter.auth import resource\n", "auth.resource"),
    ],
)
def test_the_layer_check_fails_on_an_upward_or_sideways_import(
    tmp_path: Path, where: str, source: str, expected: str
) -> None:
    problems = layer_violations(planted(tmp_path, {where: source}))
    planted_module = where.removesuffix(".py").replace("/", ".")
    assert problems and all(p.startswith(planted_module + ":") for p in problems)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize(
    ("where", "source", "expected"),
    [
        ("app.py", SERVER_IMPORT, "auth.server.provider past auth.server.embedded"),
        ("auth/server/grants.py", "from ..resource import memory_keys\n", "past auth.resource"),
        ("auth/server/embedded.py", "from ..signin.oidc import Identity\n", "past auth.signin"),
        ("ui/explorer.py", "from mcp_memoryrouter.auth.server import provider\n", "provider past"),
    ],
)
def test_the_entry_check_fails_on_an_import_past_an_entry(
    tmp_path: Path, where: str, source: str, expected: str
) -> None:
    problems = entry_violations(planted(tmp_path, {where: source}))
    planted_module = where.removesuffix(".py").replace("/", ".")
    assert problems and all(p.startswith(planted_module + ":") for p in problems)
    assert any(expected in p for p in problems), problems
    # inside a part (the server's own pages included) the modules behind the entry are open
    assert not entry_violations(planted(tmp_path, {"auth/server/pages/flow.py": SERVER_IMPORT}))
    assert not entry_violations(planted(tmp_path, {"auth/server/grants.py": SERVER_IMPORT}))


@pytest.mark.parametrize(
    "source",
    [
        "import os\nos.environ.get('MEMORYROUTER_KEY')\n",
        "import os\nos.getenv('MEMORYROUTER_KEY')\n",
        "from os import environ\n",
        "from pydantic_settings import BaseSettings\n",
    ],
)
def test_the_environment_check_fails_outside_a_composition_root(
    tmp_path: Path, source: str
) -> None:
    assert environment_violations(planted(tmp_path, {"mcp_server/binding.py": source}))
    assert not environment_violations(planted(tmp_path, {"app.py": source}))


@pytest.mark.parametrize(
    "source",
    [
        "import time\n",
        "from datetime import datetime\ndatetime.now()\n",
        "import datetime\ndatetime.datetime.utcnow()\n",
        "from datetime import date\ndate.today()\n",
        "import sqlite3\n",
        "from mcp_memoryrouter.vault.rules import dates\nimport httpx2\n",
    ],
)
def test_the_purity_check_fails_on_a_clock_or_io_in_the_rules(tmp_path: Path, source: str) -> None:
    assert purity_violations(planted(tmp_path, {"vault/rules/leases.py": source}))
    assert not purity_violations(planted(tmp_path, {"vault/service.py": source}))


@pytest.mark.parametrize(
    ("where", "source", "expected"),
    [
        ("ui/sessions.py", "import sqlite3\n", "imports sqlite3"),
        ("auth/state/store.py", "from psycopg_pool import ConnectionPool\n", "imports psycopg"),
        ("vault/store/sqlite/store.py", "import sqlite3\nsqlite3.connect('x')\n", "opens"),
        ("vault/store/postgres/store.py", "import psycopg\npsycopg.connect('x')\n", "opens"),
        (
            "vault/store/postgres/store.py",
            "import psycopg\npsycopg.Connection.connect('x')\n",
            "opens",
        ),
        (
            "vault/store/postgres/store.py",
            "import psycopg_pool\npsycopg_pool.ConnectionPool('x')\n",
            "opens",
        ),
        ("vault/store/sqlite/store.py", "from sqlite3 import connect\n", "imports sqlite3.connect"),
    ],
)
def test_the_database_check_fails_outside_the_connection_layer(
    tmp_path: Path, where: str, source: str, expected: str
) -> None:
    problems = database_violations(planted(tmp_path, {where: source}))
    assert problems and any(expected in p for p in problems), problems
    assert not database_violations(planted(tmp_path, {"db/sqlite.py": source}))


@pytest.mark.parametrize(
    "source",
    [
        'HEADERS = {"X-Frame-Options": "DENY"}\n',
        'RAW = [(b"content-security-policy", b"default-src \'none\'")]\n',
        'response.headers["Referrer-Policy"] = "same-origin"\n',
    ],
)
def test_the_header_check_fails_on_a_page_setting_its_own(tmp_path: Path, source: str) -> None:
    [problem] = header_violations(planted(tmp_path, {"auth/server/pages/html.py": source}))
    assert problem.startswith("auth.server.pages.html:1")
    assert not header_violations(planted(tmp_path, {"pages/headers.py": source}))


@pytest.mark.parametrize(
    ("where", "source", "expected"),
    [
        ("metrics.py", "def local(ip):\n    return ip.is_loopback\n", "edge.addresses"),
        ("app.py", "def f(ip):\n    return ip.ipv4_mapped\n", "edge.addresses"),
        (
            "auth/server/throttle.py",
            "async def f(receive):\n    return (await receive())['type'] == 'http.request'\n",
            "edge.body",
        ),
    ],
)
def test_the_edge_check_fails_on_a_rule_written_again(
    tmp_path: Path, where: str, source: str, expected: str
) -> None:
    [problem] = edge_violations(planted(tmp_path, {where: source}))
    assert problem.endswith(f"({expected})")
    owner = expected.replace(".", "/") + ".py"
    assert not edge_violations(planted(tmp_path, {owner: source}))


def test_the_scope_check_fails_on_a_scope_in_a_tool(tmp_path: Path) -> None:
    source = 'NEEDED = "memories:write"\n'
    [problem] = scope_violations(planted(tmp_path, {"mcp_server/tools/write.py": source}))
    assert problem.startswith("mcp_server.tools.write:1")


@pytest.mark.parametrize(
    ("where", "source"),
    [
        ("vault/http/inprocess.py", "from mcp_memoryrouter.vault.service import VaultService\n"),
        ("vault/http/api.py", "from ..service import VaultService\n"),
        ("vault/http/boundary.py", "from mcp_memoryrouter.vault import memory_keys\n"),
        ("vault/http/render.py", "import mcp_memoryrouter.vault.store.base\n"),
    ],
)
def test_the_front_door_check_fails_on_a_way_around_the_vaults_front(
    tmp_path: Path, where: str, source: str
) -> None:
    problems = front_door_violations(planted(tmp_path, {where: source}))
    planted_module = where.removesuffix(".py").replace("/", ".")
    assert problems and all(p.startswith(planted_module + ":1 ") for p in problems), problems
    assert not front_door_violations(planted(tmp_path, {"vault/http/front.py": source}))
