//! What a run measures and records.

pub mod facts;
pub mod generator;
pub mod progress;
pub mod provenance;
pub mod stats;
