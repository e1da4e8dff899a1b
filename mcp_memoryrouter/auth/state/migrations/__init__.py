"""The authorization server's tables, one numbered script per change and database
(applied by :mod:`mcp_memoryrouter.db.migrations`; on PostgreSQL recorded in
``oauth_schema_migrations``)."""
