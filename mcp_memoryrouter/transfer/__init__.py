"""Memories moved in and out of a vault, over its REST API like the consolidation loop.

- :mod:`.archive` the JSONL a whole vault is written as (every tier with its lineage), and
  how it is read back; :mod:`.export` writes it, :mod:`.importer` brings it (or a chat
  history) into a vault.
- :mod:`.history` a ChatGPT or Claude conversation history read into sessions of messages;
  :mod:`.chat_export` the zip those products' data exports come as.

The commands that run them (``import``, ``export``) are :mod:`mcp_memoryrouter.reflect.cli`'s.
"""
