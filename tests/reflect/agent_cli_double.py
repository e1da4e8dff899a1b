"""Claude Code's print mode, doubled: what the plugin's hook runs as ``claude -p ...``.

Installed as an executable named ``claude`` first on PATH, it stands in for the model command
alone (the seam): it records each call's arguments as one JSON line in CLAUDE_DOUBLE_ARGS,
refuses to answer without ``-p`` (an interactive session would wait for a terminal), and then
answers the model input on stdin exactly as ``model_program.py`` does (its REFLECT_TEST_*
variables apply). CLAUDE_DOUBLE_FAIL=1 makes it fail as a signed-out Claude Code does: a
message and exit status 1.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script

from tests.reflect import model_program


def main() -> None:
    args = sys.argv[1:]
    with Path(os.environ["CLAUDE_DOUBLE_ARGS"]).open("a", encoding="utf-8") as record:
        record.write(json.dumps(args) + "\n")
    if "-p" not in args and "--print" not in args:
        print("claude double: not in print mode", file=sys.stderr)
        sys.exit(2)
    if os.environ.get("CLAUDE_DOUBLE_FAIL") == "1":
        print("Not logged in · Please run /login")
        sys.exit(1)
    model_program.main()


if __name__ == "__main__":
    main()
