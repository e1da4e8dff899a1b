"""The client-side consolidation loop: the vault's REST API on one side, a model on the other.

It reaches the vault only through :class:`~mcp_memoryrouter.client.VaultClient` and the wire
models of :mod:`mcp_memoryrouter.schemas`, never the vault's code, so it runs the same
against a local server and a remote one.

- :mod:`.batch` one checkout → model → commit transaction; :mod:`.loop` the backfill and the
  debt-triggered run; :mod:`.auto` the connectors' background behaviour (lock, cooldown,
  opt-out, log) around it.
- :mod:`.prompt` and :mod:`.parse` what the model reads and how its answer is read;
  :mod:`.models` the command and chat-endpoint adapters.
- Moving memories in and out (a vault as JSONL, a ChatGPT or Claude history) is not
  consolidation: it is :mod:`mcp_memoryrouter.transfer`.
- :mod:`.cli` the commands: what each takes (light, so ``--help`` starts at once) and what
  it does, imported when it runs.

The package itself imports nothing: a command's options are read without loading the loop.
"""
