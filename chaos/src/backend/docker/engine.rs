//! Reaching the Docker engine, and checking before a run that every image it needs is there.

use bollard::errors::Error;
use bollard::Docker;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(
        "cannot reach the Docker engine at {endpoint}: {source}. Is dockerd running? As root: \
         `dockerd &` (Debian package docker.io) or `systemctl start docker`"
    )]
    Unreachable { endpoint: String, source: Error },
    #[error("docker: cannot {action}: {source}")]
    Call { action: String, source: Error },
}

/// The engine the environment names (`DOCKER_HOST`, else the local socket), speaking the
/// newest API version both sides know (Debian's docker.io 20.10 stops at 1.41).
pub async fn connect() -> Result<Docker, EngineError> {
    let endpoint =
        std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".to_owned());
    let unreachable = |source| EngineError::Unreachable {
        endpoint: endpoint.clone(),
        source,
    };
    let docker = Docker::connect_with_local_defaults().map_err(unreachable)?;
    let docker = docker.negotiate_version().await.map_err(unreachable)?;
    docker.ping().await.map_err(unreachable)?;
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
