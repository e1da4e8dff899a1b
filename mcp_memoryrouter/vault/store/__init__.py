"""The store: what the service asks of a database, each call atomic.

Every use case is written once (:mod:`.base`, over the SQL dialect of :mod:`.sql`, in
:mod:`.reflect`, :mod:`.window` and :mod:`.backup`) and runs on :mod:`.sqlite` (the
embedded default) and :mod:`.postgres` (for scale), which hold only what each database does
its own way. The rules (selection, leases, debt, paging) stay pure in ``vault/rules``.
"""

from mcp_memoryrouter.vault.store.base import Store

__all__ = ["Store"]
