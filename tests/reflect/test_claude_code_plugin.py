"""The Claude Code plugin (integrations/claude-code): its manifest as Claude Code's own CLI reads
it, and its hook run as Claude Code runs it (the command of hooks/hooks.json through a shell,
the event's JSON on stdin) against a real server, with a double of ``claude -p`` as the model.

The CLI tests need Claude Code installed in .tools/claude (``npm install --prefix .tools/claude
@anthropic-ai/claude-code``); they are skipped without it, unless MEMORYROUTER_TEST_CLAUDE_CODE=1
(CI), where a missing CLI is a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from mcp_memoryrouter.limits import RAW_SUGGESTED, TIER2_SUGGESTED
from tests.reflect.model_program import MEMORY_LINE, entries
from tests.support.messages_api import Reply, Text, ToolUse, messages_api, tool_results, user_text
from tests.support.oauth import oauth_server_at
from tests.support.reflect import ModelProgram, Served, assert_no_ids, moment, wait_until

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "integrations" / "claude-code"
HOOKS = PLUGIN / "hooks" / "hooks.json"
CONNECTORS = REPO / "docs" / "connectors.md"
DOUBLE = Path(__file__).resolve().parent / "agent_cli_double.py"
CLAUDE_CLI = REPO / ".tools" / "claude" / "node_modules" / ".bin" / "claude"
CLI_REQUIRED = os.environ.get("MEMORYROUTER_TEST_CLAUDE_CODE", "").strip() == "1"
QUIET = {"REFLECT_TEST_GROUP": "100", "REFLECT_TEST_IMPORTANCE": "1"}  # little tier 2 debt
# Claude Code's CLI in the tests sends nothing anywhere: no telemetry, error reports or updates
OFFLINE = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
}
HOOK_SECONDS = 10.0  # hooks.json gives each hook this long; ours returns in milliseconds
# The tool names Claude Code gives the plugin's server and a server added as `memoryrouter`
PLUGIN_TOOL = "mcp__plugin_memoryrouter_memoryrouter__search_memories"
ADDED_TOOL = "mcp__memoryrouter__search_memories"


def claude_cli() -> Path:
    if not CLAUDE_CLI.exists():
        if CLI_REQUIRED:
            pytest.fail(f"MEMORYROUTER_TEST_CLAUDE_CODE=1 but {CLAUDE_CLI} is missing")
        pytest.skip(
            "Claude Code's CLI is not installed: "
            "npm install --prefix .tools/claude @anthropic-ai/claude-code"
        )
    return CLAUDE_CLI


def run_claude(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Claude Code's CLI in a home of its own (it writes its settings there), signed out."""
    home = tmp_path / "claude-home"
    home.mkdir(exist_ok=True)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "ANTHROPIC"))}
    done = subprocess.run(
        [str(claude_cli()), *args],
        env={**environ, **OFFLINE, "HOME": str(home), **(env or {})},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_plugin_validates_with_claude_codes_own_cli(tmp_path: Path) -> None:
    said = run_claude(tmp_path, "plugin", "validate", "--strict", str(PLUGIN))
    assert "Validation passed" in said


def test_the_marketplace_it_is_installed_from_validates_too(tmp_path: Path) -> None:
    said = run_claude(tmp_path, "plugin", "validate", "--strict", str(PLUGIN.parent))
    assert "marketplace.json" in said and "Validation passed" in said


def test_a_plugin_with_a_broken_hook_fails_that_validation(tmp_path: Path) -> None:
    """The check above reads hooks/hooks.json, not the manifest alone."""
    broken = tmp_path / "broken"
    shutil.copytree(PLUGIN, broken)
    hooks = json.loads(HOOKS.read_text())
    hooks["hooks"]["SessionEnd"][0]["hooks"][0]["type"] = "shell"
    (broken / "hooks" / "hooks.json").write_text(json.dumps(hooks))
    done = subprocess.run(
        [str(claude_cli()), "plugin", "validate", "--strict", str(broken)],
        env={**os.environ, **OFFLINE, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "hooks.SessionEnd.0.hooks.0.type" in done.stdout + done.stderr


def test_the_plugins_mcp_server_connects_with_the_key_from_the_environment(
    tmp_path: Path,
) -> None:
    with oauth_server_at(tmp_path / "data") as server:
        key = server.new_key()
        env = {"MEMORYROUTER_API_URL": server.base, "MEMORYROUTER_KEY": key}
        said = run_claude(tmp_path, "--plugin-dir", str(PLUGIN), "mcp", "list", env=env)
        assert f"plugin:memoryrouter:memoryrouter: {server.base}/mcp (HTTP) - ✔ Connected" in said
        wrong = {**env, "MEMORYROUTER_KEY": "mk_" + "0" * 40}
        refused = run_claude(tmp_path, "--plugin-dir", str(PLUGIN), "mcp", "list", env=wrong)
        assert "✔ Connected" not in refused
    for path in PLUGIN.rglob("*"):  # the key is never in the plugin: it comes from the env
        if path.is_file():
            assert "mk_" not in path.read_text(encoding="utf-8")


# --- the hook, as Claude Code runs it ------------------------------------------------------


def hook_command(event: str) -> str:
    """The command hooks.json gives Claude Code for ``event`` (the plugin has one each)."""
    (entry,) = json.loads(HOOKS.read_text())["hooks"][event]
    (hook,) = entry["hooks"]
    assert hook["type"] == "command"
    command: str = hook["command"]
    return command


@dataclass
class Session:
    """A Claude Code session's environment with the plugin enabled, over ``served``."""

    served: Served
    program: ModelProgram
    home: Path  # MEMORYROUTER_HOME (~/.memoryrouter)
    tmp: Path
    options: dict[str, str]

    @property
    def double_args(self) -> Path:
        return self.tmp / "agent-args.jsonl"

    def environ(self, **extra: str) -> dict[str, str]:
        bin_dir = self.tmp / "bin"
        if not bin_dir.exists():
            bin_dir.mkdir()
            for agent in ("claude", "codex"):
                double = bin_dir / agent
                double.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{DOUBLE}" {agent} "$@"\n')
                double.chmod(double.stat().st_mode | stat.S_IXUSR)
        ours = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYROUTER_")}
        return {
            **ours,
            **self.program.env,
            **QUIET,
            # the double, then this virtual environment's mcp-memoryrouter
            "PATH": f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}"
            + os.environ.get("PATH", ""),
            "HOME": str(self.tmp),
            "MEMORYROUTER_HOME": str(self.home),
            "MEMORYROUTER_API_URL": self.served.url,
            "MEMORYROUTER_KEY": self.served.key,
            "AGENT_DOUBLE_ARGS": str(self.double_args),
            # what Claude Code sets for a plugin's hook
            "CLAUDE_PLUGIN_ROOT": str(PLUGIN),
            "CLAUDE_PROJECT_DIR": str(self.tmp),
            "CLAUDECODE": "1",
            "CLAUDE_CODE_SESSION_ID": "5f0c8a52-31d2-4a49-9a4c-0d6f6d1b7e10",
            **{f"CLAUDE_PLUGIN_OPTION_{k.upper()}": v for k, v in self.options.items()},
            **extra,
        }

    def fire(
        self, event: str, payload: dict[str, Any], command: str | None = None, **extra: str
    ) -> float:
        """Run the hook as Claude Code does (or ``command`` as another agent does, through a
        shell); it must exit 0 in silence. Its duration."""
        stdin = json.dumps(
            {
                "session_id": "5f0c8a52-31d2-4a49-9a4c-0d6f6d1b7e10",
                "transcript_path": str(self.tmp / "transcript.jsonl"),
                "cwd": str(self.tmp),
                "hook_event_name": event,
                **payload,
            }
        )
        started = time.monotonic()
        done = subprocess.run(
            ["bash", "-c", command or hook_command(event)],
            input=stdin,
            env=self.environ(**extra),
            cwd=self.tmp,
            capture_output=True,
            text=True,
            timeout=HOOK_SECONDS,
        )
        took = time.monotonic() - started
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
        return took

    def session_end(self, **extra: str) -> float:
        return self.fire("SessionEnd", {"reason": "prompt_input_exit"}, **extra)

    def log(self) -> str:
        path = self.home / "consolidate.log"
        return path.read_text(encoding="utf-8") if path.exists() else ""

    def calls(self) -> list[list[str]]:
        if not self.double_args.exists():
            return []
        return [json.loads(line) for line in self.double_args.read_text().splitlines()]

    def reflections(self) -> int:
        tiers = self.served.stats()["tiers"]
        return int(tiers["2"]["count"]) + int(tiers["3"]["count"])


@pytest.fixture
def session(served: Served, program: ModelProgram, home: Path, tmp_path: Path) -> Session:
    return Session(served, program, home, tmp_path, {})


def test_at_session_end_the_hook_returns_at_once_and_claude_p_writes_the_reflections(
    session: Session, program: ModelProgram
) -> None:
    session.served.ingest(1100)  # 55,000 tokens: the server suggests consolidation
    release = session.tmp / "release"
    took = session.session_end(REFLECT_TEST_MODE="block", REFLECT_TEST_RELEASE=str(release))
    wait_until(program.inputs)  # the model runs, though the hook has long returned
    assert took < 5, took
    assert session.reflections() == 0
    release.touch()
    wait_until(lambda: "run ended" in session.log())
    wait_until(lambda: not (session.home / "consolidate.lock").exists())
    assert session.reflections() > 0
    debt = session.served.stats()["reflection"]
    assert debt["suggestion"] is None and debt["unconsolidated"]["raw"]["units"] == 100
    ((agent, *args),) = session.calls()
    assert agent == "claude" and args[:1] == ["-p"]
    assert "--safe-mode" in args  # no plugins, hooks or MCP servers
    assert args[args.index("--tools") + 1] == ""  # and no tools
    assert_no_ids(program.inputs())
    assert "batch committed: tier 1, 1000 memories" in session.log()
    mode = stat.S_IMODE((session.home / "consolidate.log").stat().st_mode)
    assert mode == 0o600


def test_a_tool_result_carrying_the_suggestion_starts_a_run(session: Session) -> None:
    session.served.ingest(1100)
    suggestion = session.served.stats()["reflection"]["suggestion"]
    assert suggestion.startswith(RAW_SUGGESTED)
    result = {"memories": [], "consolidation_suggestion": suggestion}
    session.fire(
        "PostToolUse",
        {
            "tool_name": PLUGIN_TOOL,
            "tool_input": {"query": "auth"},
            "tool_response": [{"type": "text", "text": json.dumps(result)}],
        },
    )
    wait_until(lambda: "run ended" in session.log())
    assert session.reflections() > 0 and len(session.calls()) == 1


def test_a_tool_result_without_the_suggestion_starts_nothing(session: Session) -> None:
    session.served.ingest(1100)  # even with debt: only the result's suggestion triggers
    result: dict[str, Any] = {"memories": [], "consolidation_suggestion": None}
    session.fire(
        "PostToolUse",
        {
            "tool_name": PLUGIN_TOOL,
            "tool_input": {"query": "auth"},
            "tool_response": [{"type": "text", "text": json.dumps(result)}],
        },
    )
    time.sleep(1.0)  # time enough for a run to have started and logged
    assert session.log() == "" and session.calls() == [] and session.reflections() == 0


def test_the_post_tool_use_matcher_takes_memoryrouter_tools_only() -> None:
    """Claude Code tests a matcher with regex characters as an unanchored JavaScript RegExp."""
    (entry,) = json.loads(HOOKS.read_text())["hooks"]["PostToolUse"]
    matcher = re.compile(entry["matcher"])
    assert matcher.search(PLUGIN_TOOL) and matcher.search(ADDED_TOOL)
    for other in ["Bash", "Read", "mcp__github__search_code", "mcp__notes__memoryrouter_copy"]:
        assert not matcher.search(other), other
    assert entry["hooks"][0]["async"] is True  # never holds up the conversation


@pytest.mark.parametrize("words", [RAW_SUGGESTED, TIER2_SUGGESTED], ids=["raw", "tier2"])
def test_the_hook_knows_the_servers_words_for_each_tier(words: str) -> None:
    script = (PLUGIN / "hooks" / "consolidate.sh").read_text()
    assert words in script


def test_opted_out_in_the_plugins_settings_nothing_happens(session: Session) -> None:
    session.served.ingest(1100)
    session.options["autoConsolidate"] = "false"  # how Claude Code hands a boolean option
    session.session_end()
    time.sleep(1.0)
    assert session.log() == "" and session.calls() == [] and session.reflections() == 0
    assert session.served.stats()["reflection"]["suggestion"] is not None


def test_opted_out_machine_wide_nothing_happens(session: Session) -> None:
    session.served.ingest(1100)
    session.home.mkdir(mode=0o700)
    (session.home / "config.json").write_text('{"autoConsolidate": false}')
    session.session_end()
    wait_until(lambda: "disabled" in session.log())
    assert session.calls() == [] and session.reflections() == 0


def test_a_failing_model_commits_nothing_and_the_session_sees_nothing(
    session: Session,
) -> None:
    session.served.ingest(1100)
    session.session_end(AGENT_DOUBLE_FAIL="1")
    wait_until(lambda: "run ended" in session.log())
    assert session.reflections() == 0
    assert session.served.stats()["reflection"]["unconsolidated"]["raw"]["units"] == 1100
    assert "Not logged in" in session.log()  # why, for whoever reads the log
    assert len(session.calls()) == 1  # one run: no retry loop spending the user's inference


def test_without_a_key_the_failure_goes_to_the_log(session: Session) -> None:
    session.served.ingest(1100)
    session.session_end(MEMORYROUTER_KEY="")
    wait_until(lambda: "no memory key" in session.log())
    assert session.calls() == [] and session.reflections() == 0


def test_a_program_that_is_not_there_is_named_in_the_log(session: Session) -> None:
    session.options["program"] = str(session.tmp / "venv" / "bin" / "mcp-memoryrouter")
    session.session_end()
    wait_until(lambda: "No such file or directory" in session.log())
    assert str(session.tmp / "venv") in session.log() and session.calls() == []


def test_inside_the_model_commands_own_session_the_hook_does_nothing(session: Session) -> None:
    session.served.ingest(1100)
    session.session_end(MEMORYROUTER_AUTO_RUN="1")
    time.sleep(1.0)
    assert session.log() == "" and session.calls() == []


# --- the hook fired by Claude Code itself --------------------------------------------------


def claude_session(session: Session, *args: str, **extra: str) -> None:
    """One real Claude Code print session in ``session``'s environment, its home the test's.
    Signed out, it stops before any model call; its SessionEnd hooks run as at the end of
    every session. Plugin options come from Claude Code's settings, not from the test."""
    env = {
        k: v
        for k, v in session.environ(**extra).items()
        if k == "AGENT_DOUBLE_ARGS" or not k.startswith(("CLAUDE", "ANTHROPIC"))
    } | OFFLINE
    done = subprocess.run(
        [str(claude_cli()), *args, "-p"],
        input="hello",
        env=env,
        cwd=session.tmp,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Not logged in" in done.stdout, done.stdout + done.stderr
    assert session.calls() == []  # the session's own `claude` is the real one, by its path


def install(session: Session, *config: str) -> None:
    """The plugin installed as a user does, from the repository's marketplace."""
    env = {"HOME": str(session.tmp)}
    run_claude(session.tmp, "plugin", "marketplace", "add", str(PLUGIN.parent), env=env)
    options = [arg for option in config for arg in ("--config", option)]
    run_claude(session.tmp, "plugin", "install", "memoryrouter@mcp-memoryrouter", *options, env=env)


def test_claude_code_itself_fires_the_hook_at_session_end(session: Session) -> None:
    session.served.ingest(1100)
    claude_session(session, "--plugin-dir", str(PLUGIN))
    wait_until(lambda: "run ended" in session.log())
    assert session.reflections() > 0
    ((agent, *args),) = session.calls()
    assert (agent, args[:1]) == ("claude", ["-p"])


def test_autoconsolidate_false_in_claude_codes_plugin_settings_opts_out(
    session: Session,
) -> None:
    session.served.ingest(1100)
    install(session, "autoConsolidate=false")
    settings = json.loads((session.tmp / ".claude" / "settings.json").read_text())
    options = settings["pluginConfigs"]["memoryrouter@mcp-memoryrouter"]["options"]
    assert options == {"autoConsolidate": False}
    claude_session(session)
    time.sleep(1.0)
    assert session.log() == "" and session.reflections() == 0
    install(session, "autoConsolidate=true")  # the same session end, opted in: a run
    claude_session(session)
    wait_until(lambda: "run ended" in session.log())
    assert session.reflections() > 0


# --- the documented snippets for other agents ----------------------------------------------


def documented_hooks(heading: str) -> dict[str, Any]:
    """The hooks JSON docs/connectors.md gives under ``## heading``, for this clone."""
    section = CONNECTORS.read_text(encoding="utf-8").split(f"## {heading}\n", 1)[1]
    blocks = re.findall(r"```json\n(.*?)```", section.split("\n## ", 1)[0], re.DOTALL)
    (block,) = [b for b in blocks if '"hooks"' in b]
    hooks: dict[str, dict[str, Any]] = json.loads(
        block.replace("/path/to/mcp-memoryrouter", str(REPO))
    )
    return hooks["hooks"]


def test_codex_s_documented_hook_runs_codex_exec_on_a_tool_result_with_the_suggestion(
    session: Session,
) -> None:
    hooks = documented_hooks("Codex")
    (entry,) = hooks["PostToolUse"]
    assert re.search(entry["matcher"], ADDED_TOOL)  # Codex names MCP tools mcp__SERVER__TOOL
    session.served.ingest(1100)
    suggestion = session.served.stats()["reflection"]["suggestion"]
    response = {"memories": [], "consolidation_suggestion": suggestion}
    session.fire(
        "PostToolUse",
        {"tool_name": ADDED_TOOL, "tool_input": {}, "tool_response": json.dumps(response)},
        command=entry["hooks"][0]["command"],
    )
    wait_until(lambda: "run ended" in session.log())
    assert session.reflections() > 0
    ((agent, *args),) = session.calls()
    assert agent == "codex" and args[0] == "exec" and args[-1] == "-"
    assert args[args.index("--disable") + 1] == "hooks"  # the run never calls itself


def test_codex_s_documented_stop_hook_reads_the_debt_and_runs(session: Session) -> None:
    (entry,) = documented_hooks("Codex")["Stop"]
    session.served.ingest(1100)
    session.fire("Stop", {"stop_hook_active": False}, command=entry["hooks"][0]["command"])
    wait_until(lambda: "run ended" in session.log())
    assert session.reflections() > 0 and session.calls()[0][0] == "codex"


def test_gemini_s_documented_hook_names_the_gemini_model_command() -> None:
    (entry,) = documented_hooks("Gemini CLI")["SessionEnd"]
    assert entry["hooks"][0]["command"].endswith("consolidate.sh check gemini")
    script = (PLUGIN / "hooks" / "consolidate.sh").read_text()
    assert "gemini) model_cmd=\"gemini -p ''\"" in script


# --- a whole Claude Code session, its model doubled at the Messages API --------------------


def consolidating_model(body: dict[str, Any]) -> Reply:
    """The model behind Claude Code: in the session, it searches the memory once, then answers;
    asked to consolidate (by the hook's ``claude -p``), it writes entries as model_program does."""
    text = user_text(body)
    if tool_results(body):
        return Text("Ana fixed bug 71.")
    if any(MEMORY_LINE.match(line) for line in text.splitlines()):
        return Text(json.dumps(entries(text)))
    if any(tool.get("name") == PLUGIN_TOOL for tool in body.get("tools", [])):
        return ToolUse(PLUGIN_TOOL, {"query": "what Ana fixed"})
    return Text("ok")


def past_the_threshold(http: httpx2.Client) -> None:
    """1,100 memories of about 52 tokens: 57,000 tokens, a raw consolidation suggested."""
    for start in range(0, 1100, 550):
        messages = [
            {"content": moment(i, 210), "date": f"2026-11-{1 + i // 60:02d}T10:{i % 60:02d}:00Z"}
            for i in range(start, start + 550)
        ]
        assert http.post("/v1/memory/ingest", json={"messages": messages}).status_code == 202
    suggestion = http.get("/v1/memory/stats").json()["reflection"]["suggestion"]
    assert suggestion.startswith(RAW_SUGGESTED)


def test_a_claude_code_session_searching_the_memory_consolidates_through_the_plugin(
    tmp_path: Path,
) -> None:
    """Claude Code itself, end to end: the plugin's MCP server answers a search whose result
    carries the suggestion, the PostToolUse hook starts `auto`, and the reflections are written
    by Claude Code's own print mode (the real CLI, its model doubled at the API)."""
    cli = claude_cli()
    home = tmp_path / "memoryrouter"
    log = home / "consolidate.log"
    with oauth_server_at(tmp_path / "data") as server, messages_api(consolidating_model) as api:
        key = server.new_key()
        vault = httpx2.Client(base_url=server.base, headers={"Authorization": f"Bearer {key}"})
        with vault:
            past_the_threshold(vault)
            ours = ("CLAUDE", "ANTHROPIC", "MEMORYROUTER_")
            env = {k: v for k, v in os.environ.items() if not k.startswith(ours)} | OFFLINE
            env |= {
                "HOME": str(tmp_path),
                "PATH": os.pathsep.join(
                    [str(cli.parent), str(Path(sys.executable).parent), os.environ["PATH"]]
                ),
                "ANTHROPIC_BASE_URL": api.url,
                "ANTHROPIC_API_KEY": "sk-ant-double",
                "MEMORYROUTER_API_URL": server.base,
                "MEMORYROUTER_KEY": key,
                "MEMORYROUTER_HOME": str(home),
            }
            done = subprocess.run(
                ["claude", "--plugin-dir", str(PLUGIN), "-p", "--allowedTools", PLUGIN_TOOL],
                input="What did Ana fix?",
                env=env,
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert (done.returncode, done.stdout) == (0, "Ana fixed bug 71.\n"), done.stderr
            wait_until(lambda: log.exists() and "run ended" in log.read_text(), timeout=60)
            tiers = vault.get("/v1/memory/stats").json()["tiers"]
    said = log.read_text()
    assert "hook (claude, tool-result)" in said  # started by the search's result
    assert "hook (claude, check)" in said  # and SessionEnd found it running, or done
    assert "\nlocked\n" in said or "\ncooling_down\n" in said
    assert int(tiers["2"]["count"]) > 0
    asked = [b for b in api.requests if any(map(MEMORY_LINE.match, user_text(b).splitlines()))]
    assert asked and all(b.get("tools") == [] for b in asked)  # print mode, no tools
    assert_no_ids([user_text(b) for b in asked])
