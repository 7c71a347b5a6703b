//! What the load's TLS clients trust (`--url https://…`, its events over `wss://`): the
//! system's roots, and a private CA named with `--ca`. One configuration for the process,
//! fixed at start before any client is made, shared by every HTTP client and event socket
//! (players, floods, bursts, metrics), so none of them can trust less or more than the rest.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rustls::{ClientConfig, RootCertStore};

static TRUST: OnceLock<Arc<ClientConfig>> = OnceLock::new();

/// Why `--ca` cannot be trusted.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    #[error("--ca {0}")]
    Read(#[from] anyplay_cloud::tls::TlsError),
    #[error("--ca {}: {why}", path.display())]
    Unusable { path: PathBuf, why: String },
}

/// Trusts the certificates of `ca` beside the system's roots, from now on.
pub fn trust_also(ca: &Path) -> Result<(), CaError> {
    let error = |why: String| CaError::Unusable {
        path: ca.to_owned(),
        why,
    };
    let certs = anyplay_cloud::tls::certificates(ca)?;
    let mut roots = system_roots();
    let (_, refused) = roots.add_parsable_certificates(certs);
    if refused > 0 {
        return Err(error(format!("{refused} certificates could not be used")));
    }
    TRUST
        .set(config(roots))
        .map_err(|_| error("read after the first TLS client was made".into()))
}

/// The configuration every TLS client of the process uses.
pub(crate) fn client_config() -> Arc<ClientConfig> {
    TRUST.get_or_init(|| config(system_roots())).clone()
}

/// The system's roots; a machine without any still reaches a cloud signed by `--ca`.
fn system_roots() -> RootCertStore {
    let found = rustls_native_certs::load_native_certs();
    for error in &found.errors {
        tracing::debug!(%error, "a system root certificate could not be read");
    }
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(found.certs);
    roots
}

fn config(roots: RootCertStore) -> Arc<ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}
