"""Claims an access token carries inside this process (never on the wire)."""

VAULT_KEY_CLAIM = "memoryrouter_vault_key"  # the memory key the grant is bound to
VAULT_REF_CLAIM = "memoryrouter_vault"  # the vault's opaque public reference
KEY_INFO_CLAIM = "memoryrouter_key_info"  # a memory key sent as the token: what it may do
