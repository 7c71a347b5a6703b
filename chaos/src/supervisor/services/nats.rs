//! NATS for a run: `nats-server` on a free loopback port, ready once it greets with `INFO`.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;

use super::{find_program, log_path, SetupError};
use crate::backend::Command;
use crate::ports::free_port;
use crate::supervisor::{Probe, ServiceSpec};

/// The service's name in the topology.
pub const NAME: &str = "nats";

#[derive(Debug, Clone, Default)]
pub struct NatsSettings {
    /// A free port when `None`.
    pub port: Option<u16>,
    /// Extra `nats-server` arguments.
    pub args: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Nats {
    pub spec: ServiceSpec,
    pub port: u16,
    /// `nats://127.0.0.1:PORT`
    pub url: String,
}

pub fn prepare(run_dir: &Path, settings: &NatsSettings) -> Result<Nats, SetupError> {
    let program = find_program(
        "nats-server",
        &["/usr/sbin", "/usr/local/sbin", "/usr/local/bin"],
    )
    .ok_or_else(|| {
        SetupError::NotFound(
            "nats-server not found on PATH or in /usr/sbin: install it \
                 (apt-get install nats-server)"
                .to_owned(),
        )
    })?;
    let port = match settings.port {
        Some(port) => port,
        None => free_port().map_err(SetupError::Port)?,
    };
    let command = Command::new(program, log_path(run_dir, NAME))
        .args(["-a", "127.0.0.1", "-p", &port.to_string()])
        .args(settings.args.iter().cloned())
        .cwd(run_dir);
    let probe = Probe::Nats(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
    Ok(Nats {
        spec: ServiceSpec::new(NAME, command, probe),
        port,
        url: format!("nats://127.0.0.1:{port}"),
    })
}
