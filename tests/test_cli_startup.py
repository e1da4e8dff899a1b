"""Commands that serve nothing start without the server: ``--version``, every ``--help``
and a wrong usage import none of the heavy modules (the app, the vault, pydantic, the HTTP
client, numpy, onnxruntime, mcp), checked in a fresh process's ``sys.modules``, not timed
(``bench/cli_startup.py`` times them). ``serve`` and ``stdio`` are still listed, and load
when asked for."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from mcp_memoryrouter.cli import main
from mcp_memoryrouter.commands import SERVING
from mcp_memoryrouter.reflect.cli.options import MODEL_TIMEOUT
from mcp_memoryrouter.reflect.models import DEFAULT_TIMEOUT

HEAVY = [
    *["numpy", "onnxruntime", "fastapi", "starlette", "uvicorn", "mcp", "pydantic", "httpx2"],
    *["mcp_memoryrouter.app", "mcp_memoryrouter.cli", "mcp_memoryrouter.vault"],
    *["mcp_memoryrouter.client", "mcp_memoryrouter.schemas", "mcp_memoryrouter.config"],
]
# the command as `python -m mcp_memoryrouter` runs it; then the modules it imported, as JSON
PROBE = """
import json, runpy, sys
sys.argv = ["mcp-memoryrouter", *sys.argv[1:]]
try:
    runpy.run_module("mcp_memoryrouter", run_name="__main__")
except SystemExit as done:
    code = done.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""
LIGHT = [
    ["--version"],
    ["--help"],
    ["keys", "--help"],
    ["keys", "create", "--help"],
    ["keys", "list", "--help"],
    ["keys", "revoke", "--help"],
    ["migrate", "--help"],
    ["import", "--help"],
    ["export", "--help"],
    ["reflect", "--help"],
    ["auto", "--help"],
    ["import", "no-such-file.jsonl"],  # a wrong usage: exit 2
    ["reflect", "--model-cmd", "x", "--model-url", "http://m"],
]


def run_fresh(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "MEMORYROUTER_KEY": "mk_0123456789abcdef"},
    )


def imported_by(args: list[str]) -> tuple[int, set[str]]:
    report = json.loads(run_fresh(args).stderr.strip().splitlines()[-1])
    return report["code"], set(report["modules"])


@pytest.mark.parametrize("args", LIGHT, ids=" ".join)
def test_a_command_that_serves_nothing_imports_no_heavy_module(args: list[str]) -> None:
    code, modules = imported_by(args)
    assert code in (0, 2)
    heavy = {m for m in HEAVY if m in modules or any(n.startswith(m + ".") for n in modules)}
    assert heavy == set()


def test_serve_and_stdio_are_listed_by_their_own_first_line() -> None:
    for name, line in SERVING.items():
        command = main.commands[name]  # cli.py declared it
        assert command.help is not None
        assert " ".join(command.help.split("\n\n")[0].split()) == line


def test_a_fresh_help_lists_serve_and_stdio_by_their_line_without_loading_them() -> None:
    shown = run_fresh(["--help"]).stdout
    for name, line in SERVING.items():
        assert f"  {name} " in shown and line[:40] in shown


def test_the_help_lists_every_command_and_serve_loads_when_asked_for() -> None:
    listed = CliRunner().invoke(main, ["--help"])
    assert listed.exit_code == 0
    for name in ("auto", "export", "import", "keys", "migrate", "reflect", "serve", "stdio"):
        assert f"\n  {name} " in listed.output
    serve = CliRunner().invoke(main, ["serve", "--help"])
    assert serve.exit_code == 0 and "--port" in serve.output


def test_the_model_timeout_the_options_show_is_the_adapters_own() -> None:
    assert MODEL_TIMEOUT == DEFAULT_TIMEOUT
