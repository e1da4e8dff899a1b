"""The state the authorization server and the explorer keep beside the vault: the two
databases (SQLite files or the shared PostgreSQL), the authorization server's store, the
sealing of keys at rest and the secrets kept in the data directory."""
