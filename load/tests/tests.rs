//! The harness's integration tests, one module per mode, all against the real `anyplay-cloud`:
//! in process on SQLite, as an external process, and as a two-node cluster on the PostgreSQL and
//! NATS that `deploy/test.sh` starts (`source deploy/test-services.sh` exports their URLs), and
//! spread over load agent processes that meet on that NATS; a two-node cluster over TLS; and the headless game client riding through a drain.

mod agents;
mod cluster;
mod external;
mod game_client;
mod in_process;
mod processes;
mod support;
mod tls;
