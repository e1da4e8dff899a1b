-- The tables take the prefix they have on PostgreSQL, so every statement names them alike on
-- both databases (SQLite rewrites the references to oauth_grants as it renames).
ALTER TABLE clients RENAME TO oauth_clients;
ALTER TABLE requests RENAME TO oauth_requests;
ALTER TABLE sessions RENAME TO oauth_sessions;
ALTER TABLE grants RENAME TO oauth_grants;
ALTER TABLE codes RENAME TO oauth_codes;
ALTER TABLE oidc_logins RENAME TO oauth_oidc_logins;
ALTER TABLE identities RENAME TO oauth_identities;
ALTER TABLE refresh_tokens RENAME TO oauth_refresh_tokens;
ALTER TABLE grant_uses RENAME TO oauth_grant_uses;
