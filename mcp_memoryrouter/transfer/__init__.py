"""Memories moved in and out of a vault, over its REST API like the consolidation loop.

- :mod:`.archive` the JSONL a whole vault is written as (every tier with its lineage), and
  how it is read back; :mod:`.export` writes it, :mod:`.importer` brings it (or a chat
  history) into a vault.
- :mod:`.history` a ChatGPT or Claude conversation history read into sessions of messages;
  :mod:`.chat_export` the zip those products' data exports come as.
- :mod:`.moving` moving in from another memory product: :mod:`.graph` (server-memory's
  knowledge graph, and a vault written as one), :mod:`.mem0` (mem0 and OpenMemory),
  :mod:`.notes` (basic-memory's notes, and a vault written as a folder of them) and
  :mod:`.letta` (Letta's agent files and memory blocks).

The commands that run them (``import``, ``export``) are :mod:`mcp_memoryrouter.reflect.cli`'s.
"""
