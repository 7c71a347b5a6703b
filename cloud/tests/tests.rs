//! Integration tests: each starts real `anyplay-cloud` processes and drives the
//! contract over HTTP and WebSockets, one module per topic. Every test of a
//! topic runs twice, on one SQLite node (`::single`) and on a two-node cluster
//! over PostgreSQL and NATS (`::pair`); `cluster` has what only a cluster shows.
//! `friends_limits` runs nodes in process with limits of its own; `deploy_files` checks the
//! deployment files against the binary. One binary for all: each would link the cloud again.

mod abuse;
mod auth;
mod cards;
mod clock;
mod cluster;
mod concurrency;
mod deploy_files;
mod drain;
mod events;
mod friends_limits;
mod limits;
mod sessions;
mod store;
mod store_faults;
mod support;
