"""``mcp-memoryrouter reflect | auto | import | export``: the consolidation loop's commands.

They reach the vault only over its REST API (``--api-url`` or MEMORYROUTER_API_URL; the key
from MEMORYROUTER_KEY or ``--key-file``, see :mod:`.options`), so they work against the local
server and a remote one alike. Progress goes to stderr, results to stdout.

:mod:`.commands` declares them (light: ``--help`` loads nothing else); :mod:`.consolidate`
and :mod:`.transfer` do their work, imported when one runs.
"""

from __future__ import annotations

import click

from mcp_memoryrouter.reflect.cli.commands import auto, export, import_command, reflect


def register(group: click.Group) -> None:
    for command in (reflect, auto, import_command, export):
        group.add_command(command)
