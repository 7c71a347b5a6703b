-- Times are unix milliseconds (BIGINT) so that one SQL text serves SQLite and PostgreSQL.
CREATE TABLE accounts (
    id          BIGSERIAL PRIMARY KEY,
    email       TEXT    NOT NULL UNIQUE,
    handle      TEXT    NOT NULL UNIQUE,
    privacy     TEXT    NOT NULL DEFAULT 'friends',
    avatar      TEXT,
    created_at  BIGINT  NOT NULL
);

CREATE TABLE challenges (
    id          TEXT    PRIMARY KEY,
    email       TEXT    NOT NULL,
    code        TEXT    NOT NULL,
    ip          TEXT    NOT NULL,
    attempts    BIGINT  NOT NULL DEFAULT 0,
    burned      BIGINT  NOT NULL DEFAULT 0,
    created_at  BIGINT  NOT NULL,
    expires_at  BIGINT  NOT NULL
);
CREATE INDEX challenges_by_ip ON challenges (ip, created_at);
CREATE INDEX challenges_by_email ON challenges (email, created_at);

CREATE TABLE signup_tokens (
    token_hash  TEXT    PRIMARY KEY,
    email       TEXT    NOT NULL,
    expires_at  BIGINT  NOT NULL
);

CREATE TABLE access_tokens (
    token_hash  TEXT    PRIMARY KEY,
    account_id  BIGINT  NOT NULL REFERENCES accounts (id),
    expires_at  BIGINT  NOT NULL
);
CREATE INDEX access_tokens_by_account ON access_tokens (account_id);

CREATE TABLE refresh_tokens (
    token_hash  TEXT    PRIMARY KEY,
    account_id  BIGINT  NOT NULL REFERENCES accounts (id),
    expires_at  BIGINT  NOT NULL
);
CREATE INDEX refresh_tokens_by_account ON refresh_tokens (account_id);

CREATE TABLE trophies (
    id          BIGSERIAL PRIMARY KEY,
    account_id  BIGINT  NOT NULL REFERENCES accounts (id),
    name        TEXT    NOT NULL,
    granted_at  BIGINT  NOT NULL
);
CREATE INDEX trophies_by_account ON trophies (account_id, id);

-- One row per direction, so "my friends" is one index range.
CREATE TABLE friendships (
    account_id  BIGINT  NOT NULL REFERENCES accounts (id),
    friend_id   BIGINT  NOT NULL REFERENCES accounts (id),
    since       BIGINT  NOT NULL,
    PRIMARY KEY (account_id, friend_id)
);

CREATE TABLE friend_requests (
    from_id     BIGINT  NOT NULL REFERENCES accounts (id),
    to_id       BIGINT  NOT NULL REFERENCES accounts (id),
    at          BIGINT  NOT NULL,
    PRIMARY KEY (from_id, to_id)
);
CREATE INDEX friend_requests_by_target ON friend_requests (to_id);

-- Every request ever sent, for the daily limit of young accounts.
CREATE TABLE friend_request_log (
    id          BIGSERIAL PRIMARY KEY,
    from_id     BIGINT  NOT NULL,
    at          BIGINT  NOT NULL
);
CREATE INDEX friend_request_log_by_sender ON friend_request_log (from_id, at);

CREATE TABLE blocks (
    blocker_id  BIGINT  NOT NULL REFERENCES accounts (id),
    blocked_id  BIGINT  NOT NULL REFERENCES accounts (id),
    at          BIGINT  NOT NULL,
    PRIMARY KEY (blocker_id, blocked_id)
);
CREATE INDEX blocks_by_blocked ON blocks (blocked_id);

CREATE TABLE presence (
    account_id  BIGINT  PRIMARY KEY REFERENCES accounts (id),
    activity    TEXT    NOT NULL DEFAULT '',
    version     BIGINT  NOT NULL,
    updated_at  BIGINT  NOT NULL
);

CREATE TABLE sessions (
    id          BIGSERIAL PRIMARY KEY,
    leader      BIGINT  NOT NULL REFERENCES accounts (id),
    max_members BIGINT  NOT NULL,
    created_at  BIGINT  NOT NULL
);

-- account_id is unique: an account is in at most one session, enforced by the store.
CREATE TABLE session_members (
    id          BIGSERIAL PRIMARY KEY,
    session_id  BIGINT  NOT NULL REFERENCES sessions (id),
    account_id  BIGINT  NOT NULL UNIQUE REFERENCES accounts (id),
    joined_at   BIGINT  NOT NULL
);
CREATE INDEX session_members_by_session ON session_members (session_id, id);

-- The live event connections of the whole cloud: one per account.
CREATE TABLE connections (
    account_id    BIGINT  PRIMARY KEY REFERENCES accounts (id),
    connection_id TEXT    NOT NULL UNIQUE,
    node          TEXT    NOT NULL,
    since         BIGINT  NOT NULL,
    lease_until   BIGINT  NOT NULL
);
CREATE INDEX connections_by_node ON connections (node);
