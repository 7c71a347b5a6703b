//! Integration tests: each starts the real `anyplay-cloud` binary and drives the
//! contract over HTTP and WebSockets, one module per topic.

mod abuse;
mod auth;
mod cards;
mod concurrency;
mod drain;
mod events;
mod sessions;
mod support;
