-- The authorization server's tables as they were made at start before they had migrations
-- (CREATE TABLE IF NOT EXISTS: a deployment that has them keeps them as they are).
CREATE TABLE IF NOT EXISTS clients (
    client_id TEXT PRIMARY KEY,
    info TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS requests (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    params TEXT NOT NULL,
    csrf TEXT NOT NULL,
    sealed_key TEXT,
    vault_ref TEXT,
    allowed TEXT,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    digest TEXT PRIMARY KEY,
    vault_ref TEXT NOT NULL,
    sealed_key TEXT NOT NULL,
    allowed TEXT NOT NULL,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS grants (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    vault_ref TEXT NOT NULL,
    sealed_key TEXT NOT NULL,
    scopes TEXT NOT NULL,
    resource TEXT NOT NULL,
    created_at REAL NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS codes (
    digest TEXT PRIMARY KEY,
    grant_id TEXT NOT NULL REFERENCES grants(id),
    redirect_uri TEXT NOT NULL,
    explicit INTEGER NOT NULL,
    code_challenge TEXT NOT NULL,
    expires_at REAL NOT NULL,
    used INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS oidc_logins (
    state TEXT PRIMARY KEY,
    request_id TEXT NOT NULL,
    nonce TEXT NOT NULL,
    verifier TEXT NOT NULL,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS identities (
    issuer TEXT NOT NULL,
    subject TEXT NOT NULL,
    vault_ref TEXT NOT NULL,
    sealed_key TEXT NOT NULL,
    email TEXT,
    created_at REAL NOT NULL,
    PRIMARY KEY (issuer, subject)
);
CREATE TABLE IF NOT EXISTS refresh_tokens (
    digest TEXT PRIMARY KEY,
    grant_id TEXT NOT NULL REFERENCES grants(id),
    scopes TEXT NOT NULL,
    expires_at REAL NOT NULL,
    used INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS grant_uses (
    grant_id TEXT PRIMARY KEY REFERENCES grants(id),
    used_at REAL NOT NULL
);
