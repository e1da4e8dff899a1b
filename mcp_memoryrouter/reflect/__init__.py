"""The client-side consolidation loop: the vault's REST API on one side, a model on the other.

It reaches the vault only through :class:`~mcp_memoryrouter.client.VaultClient` and the wire
models of :mod:`mcp_memoryrouter.schemas`, never the vault's code, so it runs the same
against a local server and a remote one.

- :mod:`.batch` one checkout → model → commit transaction; :mod:`.loop` the backfill and the
  debt-triggered run; :mod:`.auto` the connectors' background behaviour (lock, cooldown,
  opt-out, log) around it.
- :mod:`.prompt` and :mod:`.parse` what the model reads and how its answer is read;
  :mod:`.models` the command and chat-endpoint adapters.
- :mod:`.archive`, :mod:`.export`, :mod:`.importer` a whole vault as JSONL and back.
"""

from mcp_memoryrouter.errors import InvalidAnswer, ModelFailure
from mcp_memoryrouter.reflect.auto import AutoConsolidator, AutoOutcome
from mcp_memoryrouter.reflect.batch import BatchResult, NothingFree, consolidate_batch
from mcp_memoryrouter.reflect.loop import RunReport, backfill, run_triggered
from mcp_memoryrouter.reflect.models import ChatModel, CommandModel, Model

__all__ = [
    "AutoConsolidator",
    "AutoOutcome",
    "BatchResult",
    "ChatModel",
    "CommandModel",
    "InvalidAnswer",
    "Model",
    "ModelFailure",
    "NothingFree",
    "RunReport",
    "backfill",
    "consolidate_batch",
    "run_triggered",
]
