"""The server's own reflector (docs/reflector.md): off unless an operator gives the server a
model (``MEMORYROUTER_REFLECTOR_URL``).

It consolidates a vault on the same trigger the connectors use (the server's debt
suggestion, at most three batches, a cooldown) with the same loop every consolidator runs
(:mod:`mcp_memoryrouter.reflect.loop`: checkout, the contract verbatim, commit). It reaches
the vault through :class:`~mcp_memoryrouter.client.VaultClient` like the other clients,
carried in process with the access of the write that woke it.

- :mod:`.provider` the model: an OpenAI-compatible endpoint, Anthropic or Google, in the
  chat proxy's formats (:mod:`mcp_memoryrouter.proxy.formats`), over HTTP.
- :mod:`.runs` when it runs: the trigger, one run per vault across replicas, the cooldown,
  the backoff after failures, and "consolidate now".
"""
