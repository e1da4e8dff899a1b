"""Every ``mcp-memoryrouter`` command README.md and docs/*.md show runs as written.

The commands are read from the docs' shell blocks (```bash, ```sh, ```shell, ```console and
indented ``$ `` lines): a console block's commands are its ``$ `` lines, a trailing ``\\``
continues a line, ``export`` lines and ``NAME=value`` prefixes are the command's environment.
Each one is parsed by the console script's own click group: it names a command that exists,
only options that command has, and values they take; the settings it sets take the values
it gives them. A command prose names in `code` is parsed too (it may leave out its
argument). The ones that need no model, no server
of their own and no client (``keys``, ``migrate``, ``export``, ``import``) then run, exactly
as written, against a vault on loopback in a temporary data directory, with the key in
``MEMORYROUTER_KEY`` as the docs tell a person to set it, from a directory holding the files
they name.

What a doc leaves to the reader the test fills in: ``<your memory key>`` and ``mk_…`` become
the vault's key, ``vr_…`` (``vr_3f9c0a…``) its reference, ``KEY_ID`` (``key_1a2b3c4d5e6f7a8b``)
a key id of that vault, and an environment value with ``…`` in it (a PostgreSQL URL) is left
out: the temporary SQLite store stands in.

Every ``MEMORYROUTER_*`` name a doc mentions is a setting: a field of ``config.Settings``, an
option's environment variable, or one of the few read elsewhere (``READ_ELSEWHERE``).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from mcp_memoryrouter.commands import main
from mcp_memoryrouter.config import Settings
from tests.support import live_server, make_vault
from tests.support.reflect import CLAUDE, chatgpt_zip

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PROGRAM = "mcp-memoryrouter"
SHELL_BLOCKS = {"bash", "sh", "shell", "console"}
FENCE = re.compile(r"^\s*```(\w*)\s*$")
PROMPT = re.compile(r"^\s*\$ (.*)$")
INDENTED_PROMPT = re.compile(r"^ {4,}\$ (.*)$")
ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
OPERATORS = {"&&", "||", ";", "|", "&"}
REDIRECTS = {">", ">>", "<", "2>"}
# the commands that run here: no model, no server of their own, no client
RUNNABLE = {"keys", "migrate", "export", "import"}
SETTING = re.compile(r"MEMORYROUTER_[A-Z0-9_]*")
# names read outside Settings and the options, and the file that reads each
READ_ELSEWHERE = {
    "MEMORYROUTER_MODEL_KEY": "mcp_memoryrouter/reflect/models.py",
    "MEMORYROUTER_TEST_POSTGRES": "tests/pg.py",
    "MEMORYROUTER_SCREENSHOTS": "tests/support/ui.py",
    # the connectors' hook (docs/connectors.md), a shell script
    "MEMORYROUTER_MODEL_CMD": "integrations/claude-code/hooks/consolidate.sh",
}
INLINE = re.compile(rf"`{PROGRAM} ([^`]+)`")
RAW_JSONL = '{"content": "We chose Postgres for the auth service."}\n'


@dataclass(frozen=True)
class Filled:
    """What the test puts where a doc shows a placeholder."""

    key: str
    vault: str
    key_id: str

    def into(self, line: str) -> str:
        line = line.replace("<your memory key>", self.key).replace("mk_…", self.key)
        line = re.sub(r"\bvr_[0-9a-f]*…", self.vault, line)
        line = re.sub(r"\bkey_[0-9a-f]{16}\b", self.key_id, line)
        return re.sub(r"(?<![A-Za-z0-9_])KEY_ID(?![A-Za-z0-9_])", self.key_id, line)


PARSE_ONLY = Filled("mk_" + "a" * 40, "vr_0123456789abcdef", "key_0123456789abcdef")


@dataclass(frozen=True)
class Shown:
    """One ``mcp-memoryrouter`` command line a doc shows, placeholders filled."""

    where: str  # "docs/keys.md:15"
    args: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.where}: {PROGRAM} {shlex.join(self.args)}"


def _commands(lines: list[str], console: bool) -> Iterator[tuple[int, str]]:
    """(index, command) of a block's lines: continuations joined, console output skipped."""
    index = 0
    while index < len(lines):
        start, line = index, lines[index]
        index += 1
        if console:
            prompt = PROMPT.match(line)
            if prompt is None:
                continue
            line = prompt.group(1)
        while _continued(line) and index < len(lines):
            escaped = line.rstrip().endswith("\\")
            line = line.rstrip()[:-1] + " " if escaped else line + "\n"
            line += lines[index]
            index += 1
        yield start, line


def _continued(line: str) -> bool:
    """A trailing backslash, or a quote still open: the command goes on."""
    if line.rstrip().endswith("\\"):
        return True
    try:
        _words(line)
    except ValueError:
        return True
    return False


def _doc_commands(path: Path) -> Iterator[tuple[int, list[tuple[int, str]]]]:
    """Each shell block of a doc (and each indented ``$`` line) as its commands, with the
    1-based line number of each."""
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if fence is None:
            prompt = INDENTED_PROMPT.match(lines[index])
            if prompt is not None:
                yield index, [(index + 1, prompt.group(1))]
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if FENCE.match(lines[i]))
        if fence.group(1) in SHELL_BLOCKS:
            body = lines[index + 1 : end]
            found = _commands(body, fence.group(1) == "console")
            yield index, [(index + 2 + at, command) for at, command in found]
        index = end + 1


def _words(command: str) -> list[str]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def _segments(words: list[str]) -> Iterator[list[str]]:
    """The simple commands of a line, redirections dropped."""
    segment: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in OPERATORS:
            yield segment
            segment = []
        elif word in REDIRECTS:
            skip = True
        else:
            segment.append(word)
    yield segment


def _assignments(words: list[str]) -> dict[str, str]:
    found = (ASSIGNMENT.match(word) for word in words)
    return {match.group(1): match.group(2) for match in found if match}


def _invocations(command: str, exported: dict[str, str], where: str) -> Iterator[Shown]:
    for segment in _segments(_words(command)):
        env = dict(exported)
        if segment[:1] == ["export"]:
            exported.update(_assignments(segment[1:]))
            continue
        while segment and (assigned := ASSIGNMENT.match(segment[0])):
            env[assigned.group(1)] = assigned.group(2)
            segment = segment[1:]
        for at, word in enumerate(segment):
            if Path(word).name == PROGRAM:
                yield Shown(where, tuple(segment[at + 1 :]), env)
                break


def documented(filled: Filled) -> list[Shown]:
    shown: list[Shown] = []
    for path in DOCS:
        name = path.relative_to(ROOT).as_posix()
        for _, commands in _doc_commands(path):
            exported: dict[str, str] = {}
            for number, command in commands:
                shown += _invocations(filled.into(command), exported, f"{name}:{number}")
    return shown


def _openmemory_zip(target: Path) -> None:
    with zipfile.ZipFile(target, "w") as archive:
        archive.write(MOVING / "openmemory-memories.json", "memories.json")


MOVING = ROOT / "tests" / "reflect" / "fixtures" / "moving"
# the inputs docs/backup.md's "Moving in" names, from tests/reflect/test_moving_in.py's fixtures
MOVING_IN: dict[str, Callable[[Path], object]] = {
    "memory.jsonl": lambda target: shutil.copyfile(MOVING / "memory.jsonl", target),
    "memories_export_alice.zip": _openmemory_zip,
    "memories_export_me.zip": _openmemory_zip,
    "~/basic-memory": lambda target: shutil.copytree(MOVING / "basic-memory", target),
    "agent.af": lambda target: shutil.copyfile(MOVING / "letta" / "sam.af", target),
    "~/.letta/agents/agent-7c2e4f": lambda target: shutil.copytree(
        MOVING / "letta" / "agent-7c2e4f", target
    ),
}


def _files(shown: Shown, folder: Path, filled: Filled) -> None:
    """The files a command names, as a person following the doc would have them."""
    outputs = {value for flag, value in pairwise(shown.args) if flag in ("-o", "--output")}
    for word in set(shown.args) - outputs:
        target = folder / word
        if word.endswith(".key"):
            target.write_text(filled.key + "\n")
            target.chmod(0o600)
        elif word in MOVING_IN:  # what the products people move in from write
            MOVING_IN[word](target)
        elif word.endswith(".jsonl"):
            target.write_text(RAW_JSONL)
        elif word.endswith(".zip"):
            chatgpt_zip(target)
        elif word == "conversations.json":
            shutil.copyfile(CLAUDE, target)


def _parse(shown: Shown) -> click.Context:
    """``shown`` parsed as the console script parses it, without running it."""
    command: click.Command = main
    context = click.Context(main, info_name=PROGRAM)
    args = list(shown.args)
    while isinstance(command, click.Group):
        assert args, f"{shown}: names no command"
        name = args.pop(0)
        found = command.get_command(context, name)
        assert found is not None, f"{shown}: no command {name!r}"
        command = found
        context = click.Context(command, info_name=name, parent=context)
    assert context.parent is not None
    return command.make_context(context.info_name, args, parent=context.parent)


def _problem(shown: Shown, *, whole: bool = True) -> str | None:
    """What is wrong with ``shown``, if anything; prose may name a command without its
    argument (`keys revoke`): it is not ``whole``."""
    try:
        _parse(shown)
    except click.exceptions.Exit as shown_help:  # --help
        return None if shown_help.exit_code == 0 else f"{shown}: exit {shown_help.exit_code}"
    except click.MissingParameter as missing:
        return None if not whole else f"{shown}: {missing.format_message()}"
    except click.ClickException as error:
        return f"{shown}: {error.format_message()}"
    return None


def _inline(filled: Filled) -> Iterator[Shown]:
    """The commands prose names in `code`: a command and options, not always whole."""
    for path in DOCS:
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            for span in INLINE.findall(line):
                where = f"{path.relative_to(ROOT).as_posix()}:{number}"
                yield Shown(where, tuple(_words(filled.into(span))))


def _run(shown: Shown, env: dict[str, str]) -> Result:
    kept = {name: value for name, value in shown.env.items() if "…" not in value}
    return CliRunner().invoke(main, list(shown.args), env=env | kept, prog_name=PROGRAM)


def test_the_docs_show_mcp_memoryrouter_commands() -> None:
    shown = documented(PARSE_ONLY)
    assert len(shown) >= 20
    assert {s.args[0] for s in shown} >= RUNNABLE | {"serve", "stdio", "reflect"}


@pytest.mark.parametrize("shown", documented(PARSE_ONLY), ids=str)
def test_each_documented_command_names_a_command_and_options_it_has(
    shown: Shown, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _files(shown, tmp_path, PARSE_ONLY)
    monkeypatch.chdir(tmp_path)
    for name, value in shown.env.items():
        monkeypatch.setenv(name, value)
    Settings()  # the settings the line sets take the values it gives them
    assert _problem(shown) is None


@pytest.mark.parametrize("shown", list(_inline(PARSE_ONLY)), ids=str)
def test_each_command_prose_names_is_a_command_with_options_it_has(
    shown: Shown, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _files(shown, tmp_path, PARSE_ONLY)
    monkeypatch.chdir(tmp_path)
    assert _problem(shown, whole=False) is None


@dataclass
class Served:
    """A vault on loopback in ``data``, and the environment of a person's shell for it."""

    filled: Filled
    env: dict[str, str]
    workdir: Path


def _json(result: Result) -> dict[str, object]:
    assert result.exit_code == 0, result.output
    found: dict[str, object] = json.loads(result.output)
    return found


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    data = tmp_path / "data"
    data.mkdir()
    vault = make_vault(data)
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    with live_server(vault.app) as url:
        env = {
            "HOME": str(tmp_path),
            "MEMORYROUTER_DATA_DIR": str(data),
            "MEMORYROUTER_API_URL": url,  # the docs' servers listen on the default address
            "MEMORYROUTER_EMBEDDINGS": "none",
            "MEMORYROUTER_KEY": vault.key,
        }
        listed = _json(CliRunner().invoke(main, ["keys", "list", "--json"], env=env))
        vault_ref = str(listed["vaults"][0]["vault"])  # type: ignore[index]
        spare = CliRunner().invoke(
            main, ["keys", "create", "--vault", vault_ref, "--json"], env=env
        )
        filled = Filled(vault.key, vault_ref, str(_json(spare)["id"]))
        yield Served(filled, env, workdir)
    vault.http.close()
    vault.store.close()


RUN = [s for s in documented(PARSE_ONLY) if s.args[0] in RUNNABLE and "--help" not in s.args]


@pytest.mark.parametrize("index", range(len(RUN)), ids=[str(s) for s in RUN])
def test_each_documented_command_that_needs_no_model_runs_as_written(
    index: int, served: Served
) -> None:
    shown = [s for s in documented(served.filled) if s.args[0] in RUNNABLE][index]
    _files(shown, served.workdir, served.filled)
    result = _run(shown, served.env)
    assert result.exit_code == 0, f"{shown}\n{result.output}"


def _known_settings() -> set[str]:
    known = {f"MEMORYROUTER_{name.upper()}" for name in Settings.model_fields}
    for command in _all_commands(main, click.Context(main)):
        for param in command.params:
            envvar = param.envvar
            known |= {envvar} if isinstance(envvar, str) else set(envvar or ())
    return known | set(READ_ELSEWHERE)


def _all_commands(command: click.Command, context: click.Context) -> Iterator[click.Command]:
    yield command
    if isinstance(command, click.Group):
        for name in command.list_commands(context):
            found = command.get_command(context, name)
            assert found is not None
            yield from _all_commands(found, click.Context(found, parent=context))


def test_names_read_elsewhere_are_read_where_this_test_says() -> None:
    for name, reader in READ_ELSEWHERE.items():
        assert f'"{name}"' in (ROOT / reader).read_text(encoding="utf-8"), name


def _named_settings() -> Iterator[tuple[str, str]]:
    """(where, name) of each MEMORYROUTER_* name the docs mention; ``NAME_*`` is a prefix,
    ``MEMORYROUTER_<NAME>`` a placeholder."""
    for path in DOCS:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in SETTING.finditer(line):
                follows = line[match.end() : match.end() + 1]
                if follows != "<":
                    where = f"{path.relative_to(ROOT).as_posix()}:{number}"
                    yield where, match.group(0) + ("*" if follows == "*" else "")


def test_every_memoryrouter_variable_the_docs_name_is_a_setting() -> None:
    known = _known_settings()
    unknown = [
        f"{where}: {name}"
        for where, name in _named_settings()
        if not (
            any(k.startswith(name[:-1]) for k in known) if name.endswith("*") else name in known
        )
    ]
    assert not unknown
