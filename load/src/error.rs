//! The crate's one error type at its boundary.

use std::path::PathBuf;
use std::time::Duration;

use crate::api::client::ClientError;
use crate::settings::SettingsError;

/// Why a run, or a step of one, failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// The run cannot start as asked against this target (e.g. a storm that needs node control).
    #[error("{0}")]
    Refused(String),
    /// The login wave brought no player online, so no other scenario can run.
    #[error("no player of {asked} came online in the login wave (e2e_login: {statuses}); is the cloud up?")]
    NobodyOnline { asked: usize, statuses: String },
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("no sign-in code for {email} within {waited:?}")]
    NoCode { email: String, waited: Duration },
    #[error("reading the mail log {path}: {source}")]
    MailLog {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The cloud inside the harness could not start or be controlled.
    #[error("in-process cloud: {0}")]
    InProcess(String),
    #[error("node {url}: {detail}")]
    Node { url: String, detail: String },
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
