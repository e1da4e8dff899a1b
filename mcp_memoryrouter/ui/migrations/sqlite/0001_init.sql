-- The explorer's tables as they were made at start before they had migrations
-- (CREATE TABLE IF NOT EXISTS: a deployment that has them keeps them as they are).
CREATE TABLE IF NOT EXISTS ui_sessions (
    digest TEXT PRIMARY KEY,
    vault_ref TEXT NOT NULL,
    sealed_key TEXT NOT NULL,
    read_only INTEGER NOT NULL,
    csrf TEXT NOT NULL,
    created_at REAL NOT NULL,
    last_seen REAL NOT NULL,
    shown_once TEXT
);
CREATE TABLE IF NOT EXISTS ui_corrections (
    vault_ref TEXT NOT NULL,
    corrected TEXT NOT NULL,
    correction TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (vault_ref, corrected, correction)
);
CREATE INDEX IF NOT EXISTS ui_corrections_by ON ui_corrections (vault_ref, correction);
