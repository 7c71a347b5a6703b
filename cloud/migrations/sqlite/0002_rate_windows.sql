-- Calls per source address and minute, counted in the store so that the limit
-- holds across every node that shares it (PostgreSQL); one SQLite node counts in memory.
CREATE TABLE rate_windows (
    ip            TEXT    NOT NULL,
    window_start  BIGINT  NOT NULL,
    calls         BIGINT  NOT NULL,
    PRIMARY KEY (ip, window_start)
);
