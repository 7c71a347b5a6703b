//! A remote engine over TLS that trusts the plan's CA and nothing else: bollard's own TLS
//! client adds the system's roots, so any certificate a public CA signed for the engine's
//! address would pass. The client certificate and key are the plan's too.

use std::path::Path;
use std::sync::Arc;

use bollard::{BollardRequest, Docker, API_DEFAULT_VERSION};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::plan::Tls;

/// Why the plan's TLS files cannot make a client.
#[derive(Debug, thiserror::Error)]
#[error("{}: {why}", path.display())]
pub struct TlsFileError {
    path: std::path::PathBuf,
    why: String,
}

fn file_error(path: &Path) -> impl Fn(String) -> TlsFileError + '_ {
    move |why| TlsFileError {
        path: path.to_owned(),
        why,
    }
}

/// Every certificate of the plan's CA file, and only those.
pub fn plan_roots(ca: &Path) -> Result<RootCertStore, TlsFileError> {
    let error = file_error(ca);
    let certs = anyplay_cloud::tls::certificates(ca).map_err(|e| error(e.reason().into()))?;
    let mut roots = RootCertStore::empty();
    let (_, refused) = roots.add_parsable_certificates(certs);
    if refused > 0 {
        return Err(error(format!("{refused} certificates could not be used")));
    }
    Ok(roots)
}

/// The rustls client of `tls`: the plan's CA as its only roots, the plan's certificate.
fn client_config(tls: &Tls) -> Result<rustls::ClientConfig, TlsFileError> {
    let roots = plan_roots(&tls.ca)?;
    let certs = CertificateDer::pem_file_iter(&tls.cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| file_error(&tls.cert)(e.to_string()))?;
    let key =
        PrivateKeyDer::from_pem_file(&tls.key).map_err(|e| file_error(&tls.key)(e.to_string()))?;
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| file_error(&tls.ca)(e.to_string()))?
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, key)
        .map_err(|e| file_error(&tls.cert)(e.to_string()))
}

/// bollard on a client of `tls` for the engine at `endpoint` (`tcp://host:port`).
pub fn connect(endpoint: &str, tls: &Tls, timeout_s: u64) -> Result<Docker, TlsFileError> {
    let config = client_config(tls)?;
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let https = HttpsConnector::from((http, config));
    let client = Arc::new(
        Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build(https),
    );
    let address = format!(
        "https://{}",
        endpoint
            .strip_prefix("tcp://")
            .or_else(|| endpoint.strip_prefix("https://"))
            .unwrap_or(endpoint)
    );
    Docker::connect_with_custom_transport(
        move |request: BollardRequest| {
            let client = Arc::clone(&client);
            async move {
                client
                    .request(request)
                    .await
                    .map_err(bollard::errors::Error::from)
            }
        },
        Some(address),
        timeout_s,
        API_DEFAULT_VERSION,
    )
    .map_err(|e| file_error(Path::new(endpoint))(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed CA certificate made by openssl, in PEM.
    fn ca_pem(dir: &Path, name: &str) -> String {
        let out = std::process::Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
            ])
            .args(["-nodes", "-days", "1", "-subj", &format!("/CN={name}")])
            .arg("-keyout")
            .arg(dir.join(format!("{name}-key.pem")))
            .output()
            .expect("openssl runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn the_roots_are_the_plan_ca_and_nothing_else() {
        let dir = std::env::temp_dir().join(format!("anyplay-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, ca_pem(&dir, "one") + &ca_pem(&dir, "two")).unwrap();
        // Two certificates in the file, two roots: no system root beside them.
        assert_eq!(plan_roots(&ca).unwrap().len(), 2);
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let error = plan_roots(&empty).unwrap_err().to_string();
        assert!(error.contains("no certificate"), "{error}");
        let missing = plan_roots(&dir.join("missing.pem"))
            .unwrap_err()
            .to_string();
        assert!(missing.contains("missing.pem"), "{missing}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
