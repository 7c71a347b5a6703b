//! Reaching the Docker engine, and checking before a run that every image it needs is there.

use bollard::errors::Error;
use bollard::{Docker, API_DEFAULT_VERSION};

use crate::plan::Engine;

/// How long a call to an engine may take, in seconds (bollard's default).
const TIMEOUT_S: u64 = 120;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(
        "cannot reach the Docker engine at {endpoint}: {source}. Is dockerd running? As root: \
         `dockerd &` (Debian package docker.io) or `systemctl start docker`"
    )]
    Unreachable { endpoint: String, source: Error },
    #[error("cannot reach the Docker engine at {endpoint}: its TLS files: {source}")]
    Tls {
        endpoint: String,
        source: super::tls::TlsFileError,
    },
    #[error("docker: cannot {action}: {source}")]
    Call { action: String, source: Error },
}

/// The engine the environment names (`DOCKER_HOST`, else the local socket).
pub async fn connect() -> Result<Docker, EngineError> {
    let endpoint =
        std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".to_owned());
    let unreachable = |source| EngineError::Unreachable {
        endpoint: endpoint.clone(),
        source,
    };
    let docker = Docker::connect_with_local_defaults().map_err(unreachable)?;
    answering(docker).await.map_err(unreachable)
}

/// A plan's engine: over TLS (its CA alone trusted, the client's certificate and key), or a
/// local socket.
/// A certificate the engine refuses, or one of the engine's that the CA did not sign, fails
/// here, before anything starts.
pub async fn connect_to(engine: &Engine) -> Result<Docker, EngineError> {
    let unreachable = |source| EngineError::Unreachable {
        endpoint: engine.docker.clone(),
        source,
    };
    let docker = match &engine.tls {
        Some(tls) => super::tls::connect(&engine.docker, tls, TIMEOUT_S).map_err(|source| {
            EngineError::Tls {
                endpoint: engine.docker.clone(),
                source,
            }
        })?,
        None => Docker::connect_with_unix(&engine.docker, TIMEOUT_S, API_DEFAULT_VERSION)
            .map_err(unreachable)?,
    };
    answering(docker).await.map_err(unreachable)
}

/// The engine speaking the newest API version both sides know (Debian's docker.io 20.10
/// stops at 1.41), once it answered a ping.
async fn answering(docker: Docker) -> Result<Docker, Error> {
    let docker = docker.negotiate_version().await?;
    docker.ping().await?;
    Ok(docker)
}

/// The images of `wanted` that the engine does not have.
pub async fn missing_images<'a>(
    docker: &Docker,
    wanted: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<&'a str>, EngineError> {
    let mut missing = Vec::new();
    for image in wanted {
        match docker.inspect_image(image).await {
            Ok(_) => {}
            Err(Error::DockerResponseServerError {
                status_code: 404, ..
            }) => missing.push(image),
            Err(source) => {
                return Err(EngineError::Call {
                    action: format!("look up image {image}"),
                    source,
                })
            }
        }
    }
    Ok(missing)
}
