//! The integration tests of anyplay-chaos, one module per topic, in one binary (each binary
//! would link chaos, load and the cloud again). They start the real `anyplay-chaos` binary,
//! PostgreSQL, NATS, nodes, Docker containers and Chromium; `support` holds what they share,
//! and `committed` reads the committed run of `plans/node-crash.yaml`.

mod browser;
mod committed;
mod control_api;
mod docker;
mod docker_engine_lost;
mod docker_services;
mod plans;
mod proxy;
mod proxy_faults;
mod report;
mod rerun;
mod runs;
mod service_faults;
mod supervisor;
mod support;
