"""The ``mcp-memoryrouter`` command: its group, and every command that serves nothing.

A command that serves nothing (``--version``, ``--help``, ``keys``, ``migrate``, ``import``,
``export``, ``reflect``, ``auto``) starts in a fraction of a second: the modules that declare
them import click and the standard library alone, and each imports what it does when it
runs (``bench/cli_startup.py``; ``tests/test_cli_startup.py`` holds the line). ``serve`` and
``stdio`` stay in ``cli.py``, the server's composition root, which imports the whole app: it
is loaded only when one of them runs or shows its help. Their line in ``--help`` is written
here, held equal to their own help by a test.
"""

from __future__ import annotations

import click

from mcp_memoryrouter import __version__
from mcp_memoryrouter.commands.keys import keys
from mcp_memoryrouter.commands.reflector import consolidate_now, server_reflector
from mcp_memoryrouter.reflect.cli import register as register_reflect_commands

# the commands cli.py declares, and their line in --help
SERVING = {
    "serve": "Serve the MCP endpoint (/mcp) and the REST API (/v1, /healthz, /openapi.json).",
    "stdio": "Serve MCP over stdin/stdout for local clients (Claude desktop).",
}


class _Commands(click.Group):
    """The group; ``serve`` and ``stdio`` are loaded from ``cli.py`` when asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *SERVING})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in SERVING and cmd_name not in self.commands:
            import mcp_memoryrouter.cli  # noqa: F401  (declares serve and stdio on main)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Click's list of commands, with the serving ones by their line alone: listing
        them must not load the server."""
        listed = [
            (name, self.commands.get(name) or click.Command(name, help=SERVING[name]))
            for name in self.list_commands(ctx)
        ]
        shown = [(name, command) for name, command in listed if not command.hidden]
        limit = formatter.width - 6 - max(len(name) for name, _ in shown)
        with formatter.section("Commands"):
            formatter.write_dl([(name, c.get_short_help_str(limit)) for name, c in shown])


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mcp-memoryrouter")
def main() -> None:
    """MemoryRouter: a three-tier memory vault for AI assistants.

    Configuration comes from MEMORYROUTER_* environment variables (MEMORYROUTER_DATA_DIR,
    MEMORYROUTER_LEASE_SECONDS, ...) and the flags below.
    """


@main.command("migrate")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def migrate(as_json: bool) -> None:
    """Create or upgrade the schema of the configured store, and the authorization
    server's and the explorer's tables, then exit.

    The store is MEMORYROUTER_DATABASE_URL (postgresql://... or sqlite:///...) or the SQLite
    vault in MEMORYROUTER_DATA_DIR. Safe to run any number of times, also while servers run:
    migrations already applied are skipped, and on PostgreSQL concurrent runs wait for each
    other. Servers migrate on start too; run this once before rolling out new replicas.
    Exit status 1 when the store cannot be reached.
    """
    from mcp_memoryrouter.commands import store  # imported as it runs: it opens the store

    store.migrate(as_json)


main.add_command(keys)
main.add_command(consolidate_now)
main.add_command(server_reflector)
register_reflect_commands(main)
