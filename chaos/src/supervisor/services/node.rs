//! A cloud node: the caller's command (program, arguments, environment, log), ready when its
//! operations listener answers `GET /readyz` with 200.

use std::net::SocketAddr;

use crate::backend::Command;
use crate::supervisor::{Probe, ServiceSpec};

/// The spec of node `name` (`node-1`, …) whose operations listener is `ops`.
pub fn spec(name: &str, command: Command, ops: SocketAddr) -> ServiceSpec {
    ServiceSpec::new(name, command, Probe::Http(readyz_url(ops)))
}

pub fn readyz_url(ops: SocketAddr) -> String {
    format!("http://{ops}/readyz")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_readyz() {
        let ops: SocketAddr = ([127, 0, 0, 1], 9001).into();
        let spec = spec("node-1", Command::new("cloud", "/tmp/node-1.log"), ops);
        assert_eq!(spec.name, "node-1");
        assert!(matches!(spec.probe, Probe::Http(url) if url == "http://127.0.0.1:9001/readyz"));
    }
}
