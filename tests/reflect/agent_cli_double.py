"""An agent's command line in its non-interactive mode, doubled: what the connectors' hook runs
as the model command (``claude -p ...``, ``codex exec ... -``).

Installed as an executable named after the agent, first on PATH, it stands in for the model
command alone (the seam). ``agent_cli_double.py AGENT ARGS...``: it records each call's
arguments as one JSON line in AGENT_DOUBLE_ARGS, refuses to answer unless ARGS ask for that
agent's non-interactive mode reading stdin (an interactive session would wait for a terminal),
and then answers the model input on stdin exactly as ``model_program.py`` does (its
REFLECT_TEST_* variables apply). AGENT_DOUBLE_FAIL=1 makes it fail as a signed-out Claude Code
does: the reason on stdout and exit status 1.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script

from tests.reflect import model_program


def non_interactive(agent: str, args: list[str]) -> bool:
    if agent == "codex":
        return args[:1] == ["exec"] and args[-1:] == ["-"]
    return "-p" in args or "--print" in args


def main() -> None:
    agent, args = sys.argv[1], sys.argv[2:]
    with Path(os.environ["AGENT_DOUBLE_ARGS"]).open("a", encoding="utf-8") as record:
        record.write(json.dumps([agent, *args]) + "\n")
    if not non_interactive(agent, args):
        print(f"{agent} double: not in non-interactive mode: {args}", file=sys.stderr)
        sys.exit(2)
    if os.environ.get("AGENT_DOUBLE_FAIL") == "1":
        print("Not logged in · Please run /login")
        sys.exit(1)
    model_program.main()


if __name__ == "__main__":
    main()
