"""Retrieval: how a query is ranked, and the in-memory indexes that answer it.

- :mod:`.ranking` the pure ranking rules: query terms, common-word pruning, lexical and dense
  fusion, neighbour smoothing, lifting the sources of a relevant reflection;
- :mod:`.lexical` and :mod:`.vectors` the BM25 and vector indexes a SQLite store keeps in
  memory (both :class:`.index.SearchIndex`), over the row table of :mod:`.rowtable`;
- :mod:`.embeddings` the text embedders and what a memory's vector encodes.

PostgreSQL answers the same questions in SQL (``store/postgres``); the service fuses both
kinds of hits the same way (``vault/hybrid.py``, which runs them over a store).
"""
