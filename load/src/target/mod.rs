//! What a run plays against: the nodes, where sign-in codes come from, and optional hooks into
//! the nodes (control for storms, the store pool's busy count).

pub mod inprocess;
pub mod mail_log;
pub mod metrics;
pub(crate) mod test_codes;

use std::sync::Arc;

use futures_util::future::BoxFuture;

use crate::error::LoadError;
use crate::measure::generator::PoolProbe;
use crate::settings::{Codes, External};
use crate::target::mail_log::{MailLog, DEFAULT_WAIT};
use crate::target::test_codes::TestCodes;

/// One cloud node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEndpoint {
    /// The public listener, e.g. `http://127.0.0.1:8080` (no trailing slash).
    pub api: String,
    /// The operations listener, e.g. `http://127.0.0.1:9090`, for `/metrics`.
    pub ops: Option<String>,
    /// The node's process, for its CPU and memory (none when it runs inside the harness).
    pub pid: Option<u32>,
}

impl NodeEndpoint {
    pub fn metrics_url(&self) -> Option<String> {
        self.ops.as_ref().map(|ops| format!("{ops}/metrics"))
    }
}

/// Where a player gets the 6-digit code that `POST /v1/auth/email` sent.
pub trait CodeSource: Send + Sync {
    /// The newest code sent to `email` that no earlier call returned, waiting (bounded) for it.
    fn code_for<'a>(&'a self, email: &'a str) -> BoxFuture<'a, Result<String, LoadError>>;
}

/// Control over nodes, for the storms that stop or kill one. Indexes are 0-based into
/// [`Target::nodes`].
pub trait NodeControl: Send + Sync {
    /// Graceful stop: the node drains and closes its event connections with 1001.
    fn stop(&self, node: usize) -> BoxFuture<'_, Result<(), LoadError>>;
    /// The node vanishes at once (SIGKILL, or an in-process node dropped without a drain).
    fn kill(&self, node: usize) -> BoxFuture<'_, Result<(), LoadError>>;
}

/// Everything a scenario runs against.
#[derive(Clone)]
pub struct Target {
    pub nodes: Vec<NodeEndpoint>,
    pub codes: Arc<dyn CodeSource>,
    /// None in external mode: storms that need it are refused.
    pub control: Option<Arc<dyn NodeControl>>,
    pub pool: Option<Arc<dyn PoolProbe>>,
}

impl Target {
    /// External mode: the nodes given by `--url`, their codes from `--mail-log` or
    /// `--codes-from`; `--ca` trusted before any client is made.
    pub fn external(external: &External) -> Result<Target, LoadError> {
        if let Some(ca) = &external.ca {
            crate::api::tls::trust_also(ca).map_err(|e| LoadError::Refused(e.to_string()))?;
        }
        let nodes = external
            .nodes
            .iter()
            .map(|node| NodeEndpoint {
                api: node.url.trim_end_matches('/').to_string(),
                // `--metrics-url` names the metrics page; the ops listener is its base.
                ops: node.metrics_url.as_ref().map(|url| {
                    let url = url.trim_end_matches('/');
                    url.strip_suffix("/metrics").unwrap_or(url).to_string()
                }),
                pid: node.pid,
            })
            .collect();
        let codes: Arc<dyn CodeSource> = match &external.codes {
            Codes::MailLog(path) => Arc::new(MailLog::open(path, DEFAULT_WAIT)?),
            Codes::TestCodes {
                ops,
                admin_token_file,
            } => Arc::new(TestCodes::new(ops, admin_token_file)?),
        };
        Ok(Target {
            nodes,
            codes,
            control: None,
            pool: None,
        })
    }
}
