"""Claims an access token carries inside this process (never on the wire)."""

VAULT_KEY_CLAIM = "memoryrouter_vault_key"  # the memory key the grant is bound to
VAULT_REF_CLAIM = "memoryrouter_vault"  # the vault's opaque public reference
KEY_INFO_CLAIM = "memoryrouter_key_info"  # a memory key sent as the token: what it may do
# a memory key sent as the token: the client acting with it as the token check admitted it,
# for this request's calls (``VaultClient.admitted``: the key is not looked up again)
VAULT_CLIENT_CLAIM = "memoryrouter_vault_client"
