"""The vault: the MemoryRouter REST API and its three-tier store."""
