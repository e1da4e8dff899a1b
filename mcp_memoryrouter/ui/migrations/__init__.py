"""The explorer's tables (its sessions, the corrections' links), one numbered script per
change and database (applied by :mod:`mcp_memoryrouter.db.migrations`; on PostgreSQL
recorded in ``ui_schema_migrations``)."""
