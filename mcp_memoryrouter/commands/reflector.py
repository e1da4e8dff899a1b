"""``consolidate-now`` and ``server-reflector``: the server's reflector, asked over REST
(docs/reflector.md). What each takes is here (light: ``--help`` loads nothing else); the
calls are in :mod:`.reflecting`, imported when one runs."""

from __future__ import annotations

import click

from mcp_memoryrouter.limits import CHECKOUT_TOKENS_MAX, CHECKOUT_TOKENS_MIN, CONSOLIDATE_NOW_TOKENS
from mcp_memoryrouter.reflect.cli.options import vault_options


@click.command("consolidate-now")
@vault_options
@click.option(
    "--max-tokens",
    type=click.IntRange(CHECKOUT_TOKENS_MIN, CHECKOUT_TOKENS_MAX),
    default=None,
    help=f"Each batch's token cap (default {CONSOLIDATE_NOW_TOKENS:,}); smaller batches give "
    "tighter lineage.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the server's answer as JSON.")
def consolidate_now(api_url: str, key: str, max_tokens: int | None, as_json: bool) -> None:
    """Consolidate the vault now with the server's reflector, below the threshold too.

    The server's model writes the reflections (MEMORYROUTER_REFLECTOR_URL on the server): at
    most 3 batches, stopping at the first failure. Exit status 1 when the server has no
    reflector, the vault turned it off, a run holds it, or the model failed (nothing is
    committed then). To consolidate with a model of yours, use `reflect`.
    """
    from mcp_memoryrouter.commands import reflecting  # imported as it runs

    reflecting.run_now(api_url, key, max_tokens, as_json)


@click.command("server-reflector")
@vault_options
@click.argument("state", required=False, type=click.Choice(["on", "off"]))
@click.option("--json", "as_json", is_flag=True, help="Print the state as JSON.")
def server_reflector(api_url: str, key: str, state: str | None, as_json: bool) -> None:
    """Show, or turn on or off, the server's reflector for this vault.

    `off` (a read-write key): the server never consolidates this vault, for an owner who
    consolidates with their own model (a connector's `auto`, `reflect`); `on` undoes it.
    Without an argument: whether the server has a reflector, whether it may consolidate
    this vault, and its last run.
    """
    from mcp_memoryrouter.commands import reflecting  # imported as it runs

    reflecting.server_reflector(api_url, key, None if state is None else state == "on", as_json)
