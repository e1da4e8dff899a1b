-- The authorization server's tables as they were made at start before they had migrations
-- (CREATE TABLE IF NOT EXISTS: a deployment that has them keeps them as they are).
-- Times are seconds since 1970 as DOUBLE PRECISION (SQLite's REAL; PostgreSQL's REAL is single
-- precision and would lose minutes). The signing keys replicas share live here only.
CREATE TABLE IF NOT EXISTS oauth_clients (
    client_id TEXT PRIMARY KEY,
    info TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS oauth_requests (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    params TEXT NOT NULL,
    csrf TEXT NOT NULL,
    sealed_key TEXT,
    vault_ref TEXT,
    allowed TEXT,
    expires_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS oauth_sessions (
    digest TEXT PRIMARY KEY,
    vault_ref TEXT NOT NULL,
    sealed_key TEXT NOT NULL,
    allowed TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS oauth_grants (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    vault_ref TEXT NOT NULL,
    sealed_key TEXT NOT NULL,
    scopes TEXT NOT NULL,
    resource TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS oauth_codes (
    digest TEXT PRIMARY KEY,
    grant_id TEXT NOT NULL REFERENCES oauth_grants(id),
    redirect_uri TEXT NOT NULL,
    explicit INTEGER NOT NULL,
    code_challenge TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    used INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS oauth_oidc_logins (
    state TEXT PRIMARY KEY,
    request_id TEXT NOT NULL,
    nonce TEXT NOT NULL,
    verifier TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS oauth_identities (
    issuer TEXT NOT NULL,
    subject TEXT NOT NULL,
    vault_ref TEXT NOT NULL,
    sealed_key TEXT NOT NULL,
    email TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (issuer, subject)
);
CREATE TABLE IF NOT EXISTS oauth_refresh_tokens (
    digest TEXT PRIMARY KEY,
    grant_id TEXT NOT NULL REFERENCES oauth_grants(id),
    scopes TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    used INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS oauth_grant_uses (
    grant_id TEXT PRIMARY KEY REFERENCES oauth_grants(id),
    used_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS oauth_signing_keys (
    kid TEXT PRIMARY KEY,
    sealed_jwk TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
);
