-- The record a registration replaced, kept by the upsert itself so that one statement
-- both registers a connection and returns the one before it (NULL: there was none).
ALTER TABLE connections ADD COLUMN prev_connection_id TEXT;
ALTER TABLE connections ADD COLUMN prev_node TEXT;
ALTER TABLE connections ADD COLUMN prev_lease_until BIGINT;
