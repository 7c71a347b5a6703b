//! NATS for a run: `nats-server` on a free port of its host (a process or a container), ready
//! once it greets with `INFO`.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;

use super::{find_program, log_path, pick_port, Placement, SetupError};
use crate::backend::{Command, Program};
use crate::supervisor::{Probe, ServiceSpec};

/// The service's name in the topology.
pub const NAME: &str = "nats";

#[derive(Debug, Clone, Default)]
pub struct NatsSettings {
    /// A free port when `None`.
    pub port: Option<u16>,
    /// Extra `nats-server` arguments.
    pub args: Vec<String>,
    pub placement: Placement,
}

#[derive(Debug, Clone)]
pub struct Nats {
    pub spec: ServiceSpec,
    pub port: u16,
    /// `nats://ADDRESS:PORT`
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
    let port = pick_port(settings.port)?;
    let command = Command::new(program, log_path(run_dir, NAME))
        .args(server_args(port, settings))
        .cwd(run_dir)
        .netns(settings.placement.netns.clone());
    Ok(served(command, port, settings.placement.address))
}

/// NATS as a container of `image`, whose entrypoint is the server (as in the official `nats`
/// image): it gets only the arguments.
pub fn container(run_dir: &Path, settings: &NatsSettings, image: &str) -> Result<Nats, SetupError> {
    let port = pick_port(settings.port)?;
    let command = Command::new(Program::Image(image.to_owned()), log_path(run_dir, NAME))
        .args(server_args(port, settings));
    Ok(served(command, port, settings.placement.address))
}

fn server_args(port: u16, settings: &NatsSettings) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "-a".into(),
        settings.placement.address.to_string(),
        "-p".into(),
        port.to_string(),
    ];
    args.extend(settings.args.iter().cloned());
    args
}

fn served(command: Command, port: u16, address: Ipv4Addr) -> Nats {
    let probe = Probe::Nats(SocketAddr::from((address, port)));
    Nats {
        spec: ServiceSpec::new(NAME, command, probe),
        port,
        url: format!("nats://{address}:{port}"),
    }
}
