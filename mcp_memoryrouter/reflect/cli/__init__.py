"""``mcp-memoryrouter reflect | auto | import | export``: the consolidation loop's commands.

They reach the vault only over its REST API (``--api-url`` or MEMORYROUTER_API_URL; the key
from MEMORYROUTER_KEY or ``--key-file``, see :mod:`.options`), so they work against the local
server and a remote one alike. Progress goes to stderr, results to stdout.
"""

from __future__ import annotations

import click

from mcp_memoryrouter.reflect.cli.archive import export, import_command
from mcp_memoryrouter.reflect.cli.consolidate import auto, reflect


def register(group: click.Group) -> None:
    for command in (reflect, auto, import_command, export):
        group.add_command(command)
