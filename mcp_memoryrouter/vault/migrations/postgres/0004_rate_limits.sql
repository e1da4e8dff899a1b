-- Rate-limit budgets shared by every replica over this database: one token bucket per caller
-- (the SHA-256 of its key, or its address), refilled by the database's own clock so replicas'
-- clocks never disagree. last_ok says whether the last take found a token.
CREATE TABLE rate_buckets (
    caller  text PRIMARY KEY,
    tokens  double precision NOT NULL,
    at_ms   bigint NOT NULL,
    last_ok boolean NOT NULL DEFAULT true
);
CREATE INDEX rate_buckets_at ON rate_buckets (at_ms);
